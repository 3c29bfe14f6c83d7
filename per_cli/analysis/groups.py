"""Runs grouped over seeds: same env, replay label and values of the settings that change results."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from per_cli.analysis.runs import Run

# keys (or prefixes ending in ".") that never make runs different settings, and why
BOOKKEEPING_KEYS: dict[str, str] = {
    "seed": "the replicate itself",
    "device": "where it ran",
    "agent.cuda_graph": "how the update and the greedy action are launched on a GPU (the eager values)",
    "train.checkpoint_every": "checkpoint cadence",
    "train.save_replay": "what a checkpoint holds",
    "train.eval_every": "evaluation cadence (a separate env and RNG: training is unchanged)",
    "train.eval_episodes": "evaluation sample size (the precision of eval return, not its expectation)",
    "log.": "logging cadence, TensorBoard on or off, run names",
    "metrics.": "what is measured about batches, never what is trained",
}
AXES = ("env.id", "replay.kind")  # grouped by directly (the replay label comes from summary.json)


@dataclass
class Group:
    env: str
    replay: str
    settings: tuple[tuple[str, Any], ...]  # the swept keys of this env and replay label, with their values
    runs: list[Run]  # every run of the group, failed ones included

    @property
    def label(self) -> str:
        return ", ".join([self.replay, *settings_text(self.settings)])

    @property
    def settings_label(self) -> str:
        return ", ".join(settings_text(self.settings))

    @property
    def curve_runs(self) -> list[Run]:
        """Runs that go into the curves: completed, running and interrupted (partial curves)."""
        return [r for r in self.runs if r.status in ("completed", "running", "interrupted")]

    @property
    def completed(self) -> list[Run]:
        return [r for r in self.runs if r.status == "completed"]


def is_bookkeeping(key: str) -> bool:
    return any(key == k or (k.endswith(".") and key.startswith(k)) for k in BOOKKEEPING_KEYS)


# keys whose value another key decides when that one is set: swept together with it, they are one setting
DERIVED_FROM = {"train.train_freq": "train.replay_ratio", "train.gradient_steps": "train.replay_ratio"}


def swept_keys(runs: Sequence[Run]) -> list[str]:
    """Config keys with more than one value among the ``runs`` that have a config, less those a swept key decides
    (:data:`DERIVED_FROM`: they would read as factors of their own)."""
    configs = [r.config for r in runs if r.config]
    keys = sorted({k for c in configs for k in c if not is_bookkeeping(k) and k not in AXES})
    swept = [k for k in keys if len({repr(c.get(k)) for c in configs}) > 1]
    return [k for k in swept if not (k in DERIVED_FROM and DERIVED_FROM[k] in swept and _decided(configs, k))]


def _decided(configs: Sequence[dict], key: str) -> bool:
    """Whether ``key`` has one value for each value of its deciding key (unset included) among ``configs``."""
    by_value: dict[str, set[str]] = {}
    for c in configs:
        by_value.setdefault(repr(c.get(DERIVED_FROM[key])), set()).add(repr(c.get(key)))
    return all(len(values) == 1 for values in by_value.values())


def group_runs(runs: Sequence[Run]) -> list[Group]:
    """Groups of runs over seeds, sorted by env, replay kind (registry order) and settings."""
    by_kind: dict[tuple[str, str], list[Run]] = {}
    for run in runs:
        by_kind.setdefault((run.env, run.replay), []).append(run)
    groups: dict[tuple, Group] = {}
    for (env, replay), members in by_kind.items():
        keys = swept_keys(members)
        for run in members:
            settings = tuple((k, run.config.get(k)) for k in keys)
            groups.setdefault((env, replay, repr(settings)), Group(env, replay, settings, [])).runs.append(run)
    return sorted(groups.values(), key=lambda g: (g.env, kind_rank(g.replay), _sort_key(g.settings)))


def kind_rank(replay: str) -> tuple:
    """Replay labels in registry order (none, uniform, combined, prioritized, rank), each before its +her."""
    from per_cli.replay import KINDS

    kind, _, her = replay.partition("+")
    order = list(KINDS)
    return (order.index(kind) if kind in order else len(order), kind, her)


def _sort_key(settings: tuple[tuple[str, Any], ...]) -> tuple:
    return tuple((k, (0, v) if is_numeric([v]) else (1, repr(v))) for k, v in settings)


def is_numeric(values: Sequence[Any]) -> bool:
    return all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)


def format_value(value: Any) -> str:
    """Compact setting values for labels: 1000 -> 1k, 1000000 -> 1M, 0.0003 -> 0.0003."""
    if isinstance(value, bool) or value is None:
        return str(value).lower()
    if isinstance(value, int):
        for div, suffix in ((10**9, "G"), (10**6, "M"), (10**3, "k")):
            if abs(value) >= div and value % div == 0:
                return f"{value // div}{suffix}"
        return str(value)
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, tuple):
        return "[" + ",".join(format_value(v) for v in value) + "]"
    return str(value)


def settings_text(settings: tuple[tuple[str, Any], ...]) -> list[str]:
    """``key=value`` with the shortest unambiguous key (``capacity`` for ``replay.capacity``)."""
    lasts = [key.rsplit(".", 1)[-1] for key, _ in settings]
    return [
        f"{last if lasts.count(last) == 1 else key}={format_value(value)}"
        for (key, value), last in zip(settings, lasts, strict=True)
    ]
