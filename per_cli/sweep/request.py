"""What ``per grid`` was asked: the command-line strings parsed into a :class:`GridRequest`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from per_cli.config import parse_override, read_yaml
from per_cli.config.seeds import parse_seeds
from per_cli.errors import ConfigError
from per_cli.plugins import load_plugins

DEFAULT_SEEDS = "1-3"  # a --seeds spec (per_cli.config.seeds)
# keys the grid itself sets per run; they are axes (--envs, --replays, --seeds), not --set/--sweep values
AXIS_KEYS = {"env.id": "--envs", "replay.kind": "--replays", "seed": "--seeds"}
HER_SUFFIX = "+her"  # a replay label with goal relabelling: "<sampler kind>+her"


def default_configs_dir() -> Path:
    """``./configs`` when it exists (running from the repository root or a project of one's own), else the
    configs shipped inside the package."""
    from per_cli.config.shipped import shipped_root

    here = Path("configs")
    return here if here.is_dir() else shipped_root()


@dataclass(frozen=True)
class Sweep:
    key: str
    raw: tuple[str, ...]  # the values as typed, used in run names
    values: tuple[Any, ...]  # the values as YAML reads them


@dataclass
class GridRequest:
    """The options that define a grid; equal requests mean the same grid (what resuming compares)."""

    envs: list[str]
    replays: list[str] | None  # replay labels (kind, or kind+her); None: every kind that has a config
    seeds: list[int]
    sweeps: list[Sweep]
    sets: list[str]
    config: Path | None
    configs_dir: Path

    def manifest(self) -> dict[str, Any]:
        return {
            "envs": list(self.envs),
            "replays": None if self.replays is None else list(self.replays),
            "seeds": list(self.seeds),
            "sweeps": [{"key": s.key, "values": list(s.raw)} for s in self.sweeps],
            "sets": list(self.sets),
            "config": None if self.config is None else str(self.config.resolve()),
            "configs_dir": str(self.configs_dir.resolve()),
        }


def split_list(text: str, option: str, what: str) -> list[str]:
    """Split ``a,b,c`` on commas outside brackets and quotes (``[64,64],[256,256]`` is two values); empty or
    repeated items are a ConfigError naming ``option`` and ``what`` was repeated."""
    items, depth, quote, start = [], 0, None, 0
    for i, ch in enumerate(text):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
    items.append(text[start:].strip())
    if any(not item for item in items):
        raise ConfigError(f"{option} {text!r}: empty item in the comma-separated list")
    twice = next((item for item in items if items.count(item) > 1), None)
    if twice is not None:
        raise ConfigError(f"{option} {text!r}: duplicate {what} {twice}; give each once")
    return items


def parse_sweep(text: str) -> Sweep:
    key, sep, values = text.partition("=")
    key = key.strip()
    if not sep or not key or not values.strip():
        raise ConfigError(f"--sweep {text!r}: expected KEY=v1,v2,... e.g. --sweep replay.capacity=1000,100000")
    raw = split_list(values, f"--sweep {key}=", "value")
    parsed = [parse_override(f"{key}={v}").value for v in raw]
    return Sweep(key, tuple(raw), tuple(parsed))


def split_label(label: str) -> tuple[str, bool]:
    """``"prioritized+her"`` -> ``("prioritized", True)``; ``"uniform"`` -> ``("uniform", False)``."""
    return label.removesuffix(HER_SUFFIX), label.endswith(HER_SUFFIX)


def check_replay_label(label: str) -> None:
    """A ``--replays`` item: a registered sampler kind, optionally with ``+her`` (goal relabelling)."""
    from per_cli.replay import KINDS

    kind, _ = split_label(label)
    if kind == "per":
        raise ConfigError("--replays: 'per' is the file-name short form; the kind is called 'prioritized'")
    if kind in ("her", "hindsight"):
        raise ConfigError(
            f"--replays {label}: hindsight relabelling goes over a sampler; name it as KIND+her, e.g. uniform+her"
        )
    if kind not in KINDS:
        raise ConfigError(f"--replays: unknown replay kind {kind!r}; choose from {', '.join(KINDS)}")


def config_axes(config: Path) -> tuple[str, str]:
    """The env and replay label (``kind+her`` where ``replay.her_strategy`` is on) of a base config's file: what
    ``per grid --config C`` without ``--envs`` runs."""
    data = read_yaml(config)
    env = (data.get("env") or {}).get("id")
    if not env:
        raise ConfigError(f"--envs: {config} sets no env.id; give the envs to run, e.g. --envs cartpole")
    replay = data.get("replay") or {}
    her = (replay.get("her_strategy") or "off") != "off"
    return str(env), f"{replay.get('kind', 'uniform')}{HER_SUFFIX if her else ''}"


def plugins_named(config: Path | None, sets: list[str]) -> list[str]:
    """The plugins a grid's runs import: the base config's ``plugins`` and any ``--set plugins=[...]``."""
    names: list = []
    if config is not None:
        names += list(read_yaml(config).get("plugins") or [])
    for item in sets:
        key, value = parse_override(item)
        if key == "plugins":
            names += value if isinstance(value, list) else [value]
    if not all(isinstance(name, str) for name in names):
        raise ConfigError(f"plugins: {names} must be a list of module names or .py files")
    return names


def build_request(
    envs: str | None,
    replays: str | None = None,
    seeds: str = DEFAULT_SEEDS,
    sweeps: list[str] | None = None,
    sets: list[str] | None = None,
    config: Path | None = None,
    configs_dir: Path | None = None,
) -> GridRequest:
    """Parse the command-line strings of ``per grid``; raises ConfigError on bad input. Without ``envs``, ``config``
    runs as it is: its own env and (without ``replays``) its own replay kind."""
    from per_cli.envs import checked_env_id

    seed_list = parse_seeds(seeds)  # (first: cheap, and a count past the cap must not wait on the rest)
    if config is not None:  # a file, or a shipped config by name (seed001/cartpole_per)
        from per_cli.config.shipped import resolve_config

        config = resolve_config(config).path
    if envs is None:
        if config is None:
            raise ConfigError("--envs: give the envs to run (e.g. --envs cartpole,acrobot) or a --config to run as is")
        envs, own_replay = config_axes(config)
        replays = own_replay if replays is None else replays
    env_list = split_list(envs, "--envs", "env")
    for env in env_list:
        checked_env_id(env, "--envs")
    set_list = list(sets or [])
    load_plugins(plugins_named(config, set_list))  # (before the kinds are checked: the kinds they register)
    replay_list = None
    if replays is not None:
        replay_list = split_list(replays, "--replays", "replay kind")
        for label in replay_list:
            check_replay_label(label)
    sweep_list = [parse_sweep(s) for s in sweeps or []]
    keys = [s.key for s in sweep_list]
    for key in keys:
        if keys.count(key) > 1:
            raise ConfigError(f"--sweep {key}: swept twice; give all its values in one --sweep")
    for key, option in [(k, "--sweep") for k in keys] + [(parse_override(s).key, "--set") for s in set_list]:
        if key in AXIS_KEYS:
            raise ConfigError(f"{option} {key}: the grid sets {key} itself; use {AXIS_KEYS[key]} instead")
    cdir = configs_dir if configs_dir is not None else default_configs_dir()
    if configs_dir is not None and not cdir.is_dir():
        raise ConfigError(f"--configs-dir {cdir}: not a directory")
    return GridRequest(env_list, replay_list, seed_list, sweep_list, set_list, config, cdir)
