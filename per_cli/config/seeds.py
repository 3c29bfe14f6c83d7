"""``--seeds``: which seeds one command trains, read the same way by ``per train`` and ``per grid``."""

from __future__ import annotations

import dataclasses
import re

from per_cli.config.schema import Config
from per_cli.errors import ConfigError

# seeds one command takes: each is a run to plan, check and hold
MAX_SEEDS = 10_000
_SPEC = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$")
_SHOWN = 40  # characters of a bad spec echoed back


def seed_bounds() -> tuple[int, int]:
    """The config's ``seed`` bounds (inclusive), read from the schema so both options follow ``--seed``."""
    meta = next(f.metadata for f in dataclasses.fields(Config) if f.name == "seed")
    return int(meta["lo"]), int(meta["hi"])


def _shown(text: str) -> str:
    return repr(text if len(text) <= _SHOWN else text[:_SHOWN] + "...")


def parse_seeds(text: str) -> list[int]:
    """The seeds of a spec (:mod:`module docs <per_cli.config.seeds>`), distinct, in the order given; a
    ConfigError naming ``--seeds`` for anything else."""
    lo, hi = seed_bounds()
    compact = text.replace(" ", "")
    if not _SPEC.match(compact):
        raise ConfigError(
            f"--seeds {_shown(text)}: write a seed (3), a range (1-100: seeds 1 to 100) or a list (1,5,9 or "
            f"1-10,20); seeds are integers in [{lo}, {hi}]"
        )
    digits = len(str(hi))
    parts: list[tuple[int, int]] = []
    for low_text, _, high_text in (part.partition("-") for part in compact.split(",")):
        for number in (low_text, high_text):
            # (a number longer than the bound is out of range: never handed to int(), which refuses 4,300 digits)
            if number and (len(number.lstrip("0")) > digits or not lo <= int(number) <= hi):
                raise ConfigError(
                    f"--seeds {_shown(text)}: seed {_shown(number)[1:-1]} is out of range; seeds are in [{lo}, {hi}] "
                    "as for --seed"
                )
        low, high = int(low_text), int(high_text or low_text)
        if high < low:
            raise ConfigError(f"--seeds: the range {low}-{high} is empty; write LOW-HIGH with LOW <= HIGH")
        parts.append((low, high))
    count = sum(high - low + 1 for low, high in parts)  # counted before any list is made
    if count > MAX_SEEDS:
        raise ConfigError(
            f"--seeds {_shown(text)} names {count:,} seeds; one command takes at most {MAX_SEEDS:,} (each seed is "
            "a run to plan, check and hold); split them over several commands"
        )
    seeds = [seed for low, high in parts for seed in range(low, high + 1)]
    seen: set[int] = set()
    for seed in seeds:
        if seed in seen:  # (1,01 and 1-3,2 too)
            raise ConfigError(f"--seeds {_shown(text)}: names seed {seed} twice; each seed is one run")
        seen.add(seed)
    return seeds


def single_seed_note(text: str, seeds: list[int]) -> str | None:
    """A note when ``--seeds N`` names the one seed N > 1: easily read as seeds 1 to N."""
    if len(seeds) != 1 or seeds[0] <= 1 or "-" in text:
        return None
    return f"--seeds {seeds[0]} trains seed {seeds[0]} alone; for seeds 1 to {seeds[0]} write --seeds 1-{seeds[0]}"
