"""Run directories read back: find them under a folder and load each one's config, summary and scalars."""

from __future__ import annotations

import os
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from itertools import repeat
from pathlib import Path
from typing import Any

import numpy as np

from per_cli.config.reading import parse_yaml, read_text
from per_cli.errors import ConfigError, cut
from per_cli.rundir.logger import RUNNING, STATUSES, UNREADABLE, read_summary
from per_cli.rundir.readers import RETURN_TAG, Scalars, checked_summary, damage, read_scalars

RUN_MARKERS = ("summary.json", "config.yaml")
# Config keys added after runs were recorded, with the value that does what those runs did: an older run's
# config.yaml lacks them, and must still group with a new run of the same setting.
ADDED_LATER: dict[str, Any] = {
    "env.backend": "gymnasium",
    "env.done_reward": None,
    "env.done_reward_except_return": None,
    "env.truncation_terminates": False,
    "replay.beta_increment": None,
    "replay.is_weights": "memory_max",
    "replay.chunk": 1,
    "replay.min_priority": 0.01,
    "replay.n_step": 1,
    "train.replay_ratio": None,
    "replay.device_frames": False,
    "train.priority_lag": 0,
    "plugins": (),  # (flattened: lists are tuples)
}
PARALLEL_FROM = 4  # runs; fewer load faster in this process than a pool starts


@dataclass
class Run:
    path: Path
    name: str  # path relative to the directory searched
    status: str  # one of STATUSES
    env: str  # the Gymnasium id (aliases resolved)
    replay: str  # the replay label (kind, or kind+her)
    seed: int | None
    config: dict[str, Any]  # flattened: {"replay.capacity": 1000, ...}; empty if config.yaml is missing
    summary: dict[str, Any]
    scalars: Scalars = field(default_factory=dict)
    source: str = "none"  # tensorboard, metrics.csv or none
    read_error: str | None = None
    final_episodes: int | None = None  # None: the summary's final return; N: the mean of the last N episodes
    damaged: bool = False  # a file of the run is missing or broken (read_error says which)

    @property
    def error(self) -> str | None:
        return self.summary.get("error") or self.read_error

    @property
    def final_return(self) -> float | None:
        """A completed run's summary ``final_return_mean`` (last 20 episodes), or with ``final_episodes`` N the
        mean of its last N logged returns."""
        if self.status != "completed":
            return None
        if self.final_episodes is None:
            value = self.summary.get("final_return_mean")
            return None if value is None else float(value)
        returns = self.scalars[RETURN_TAG].values if RETURN_TAG in self.scalars else ()
        return float(np.mean(returns[-self.final_episodes :])) if len(returns) else None

    @property
    def end_step(self) -> float | None:
        """The last env step of a completed, undamaged run: its curves hold their last value until there."""
        steps = self.summary.get("total_steps") if self.status == "completed" and not self.damaged else None
        return None if steps is None else float(steps)

    def mean_of(self, tag: str) -> float | None:
        """The mean of every logged value of ``tag`` (None if never logged)."""
        if tag not in self.scalars:
            return None
        values = self.scalars[tag].values
        values = values[np.isfinite(values)]
        return float(values.mean()) if len(values) else None


def find_run_dirs(root: Path, exclude: Iterable[Path] = ()) -> list[Path]:
    """Run directories under ``root`` (``root`` itself included), sorted; a run's subfolders are not searched."""
    try:
        is_dir = root.is_dir()
    except OSError as exc:  # (a path longer than the system takes)
        raise ConfigError(f"RUNS_DIR: {str(root)[:80]}... cannot be read ({exc.strerror}); give a directory") from None
    if not is_dir:
        raise ConfigError(f"RUNS_DIR: {root} is not a directory")
    skip = {p.resolve() for p in exclude}
    found = []
    for here, dirs, files in os.walk(root):
        if Path(here).resolve() in skip:
            dirs[:] = []
            continue
        dirs[:] = [d for d in dirs if not d.startswith(".")]  # .set-aside, .locks, .incoming-: never runs
        if any(marker in files for marker in RUN_MARKERS) and ("summary.json" in files or "grid.yaml" not in files):
            found.append(Path(here))
            dirs[:] = []  # checkpoints/ and the like
        else:
            dirs.sort()
    return sorted(found)


def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """Nested mappings to dotted keys; lists become tuples (hashable, comparable)."""
    if isinstance(data, dict):
        return {k: v for key, value in data.items() for k, v in flatten(value, f"{prefix}{key}.").items()}
    if isinstance(data, list):
        return {prefix[:-1]: tuple(data)}
    return {prefix[:-1]: data}


def load_run(path: Path, root: Path, tags: set[str] | None = None, envs: frozenset[str] | None = None) -> Run | None:
    """One run directory; a damaged file costs that run its curves (``read_error``), never the whole plot. ``tags``:
    the scalars needed (None: all); ``envs``: the env ids to keep (another env's run is None, its scalars unread)."""
    from per_cli.envs import resolve_env_id

    summary, problems = checked_summary(read_summary(path) or {})
    config, read_error = read_run_config(path / "config.yaml")
    env = summary.get("env") or config.get("env.id") or "unknown"
    status = summary.get("status")
    run = Run(
        path=path,
        name=str(path.relative_to(root)) if path != root else path.name,
        status=status if status in STATUSES else RUNNING,
        env=resolve_env_id(str(env)),
        replay=str(summary.get("replay") or config.get("replay.kind") or "unknown"),
        seed=summary.get("seed", config.get("seed")),
        config=config,
        summary=summary,
        read_error=read_error,
    )
    if envs is not None and run.env not in envs:
        return None
    if run.status == UNREADABLE and not run.read_error:
        run.read_error = f"summary.json cannot be read: {summary.get('error', 'not valid JSON')}"
    if not (path / "config.yaml").is_file() and run.status != UNREADABLE:
        problems.append("config.yaml is missing, so its settings are unknown (grouped by its summary only)")
    problems += damage(path)
    try:
        read = read_scalars(path, tags)
        run.scalars, run.source = read.scalars, read.source
        problems += read.problems
    except Exception as exc:  # noqa: BLE001 - a damaged file costs its run's curves, not the whole plot
        problems.append(f"could not read scalars: {type(exc).__name__}: {exc}")
    if problems:
        run.damaged = True
        run.read_error = "; ".join(([run.read_error] if run.read_error else []) + problems)
    return run


def read_run_config(path: Path) -> tuple[dict[str, Any], str | None]:
    """A run's ``config.yaml`` flattened (empty when it is missing), and what is wrong with it (None: nothing)."""
    try:
        raw = parse_yaml(path, read_text(path))
    except ConfigError as exc:
        if not path.exists():
            return {}, None
        return {}, f"{path.name} cannot be read ({str(exc).removeprefix(f'{path}: ')}); its settings are unknown"
    if isinstance(raw, dict):
        return {**ADDED_LATER, **flatten(raw)}, None
    held = "nothing" if raw is None else f"a {type(raw).__name__} ({cut(repr(raw), 40, 30)})"
    return {}, (
        f"{path.name} holds {held}, not a mapping of settings, so its settings are unknown (grouped by its summary "
        "only, with the runs of its env and replay)"
    )


def load_runs(
    root: Path,
    *,
    workers: int | None = None,
    exclude: Iterable[Path] = (),
    tags: set[str] | None = None,
    envs: Iterable[str] = (),
) -> list[Run]:
    """Every run under ``root`` (``tags``: as for :func:`load_run`), in a process pool when there are many;
    ``envs``: only these envs' runs (empty: all), each a ConfigError where no run under ``root`` has it."""
    from per_cli.envs import checked_env_id

    wanted = frozenset(checked_env_id(name, f"--env {name}") for name in envs) or None
    dirs = find_run_dirs(root, exclude)
    if not dirs:
        raise ConfigError(
            f"RUNS_DIR: no run directories under {root} (a run directory holds summary.json or config.yaml); "
            "write some with per train or per grid"
        )
    workers = min(workers or os.cpu_count() or 1, len(dirs))
    jobs = (dirs, repeat(root), repeat(tags), repeat(wanted))
    if workers <= 1 or len(dirs) < PARALLEL_FROM:
        loaded = list(map(load_run, *jobs))
    else:
        with ProcessPoolExecutor(max_workers=workers, mp_context=_pool_context()) as pool:
            loaded = list(pool.map(load_run, *jobs, chunksize=max(1, len(dirs) // (4 * workers))))
    runs = [run for run in loaded if run is not None]
    if missing := sorted((wanted or set()) - {run.env for run in runs}):
        raise ConfigError(
            f"--env {', '.join(missing)}: no run of this env under {root}; leave --env out to plot every env there"
        )
    return runs


def _pool_context():
    """Workers forked from a clean server that has imported the readers (this process may hold threads); plain
    spawn where there is no fork."""
    import multiprocessing

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["per_cli.analysis.runs", "tensorboard.compat.proto.event_pb2"])
    return ctx
