"""Read run directories back: find them, load their scalars, group them over seeds, tabulate final returns.

A run directory is any directory holding ``summary.json`` or ``config.yaml`` (what ``per train`` and
``per grid`` write). Runs are grouped by (env, replay kind, swept settings): the config keys whose values
differ between runs of the same env and replay kind, other than the seed and the logging settings.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from per_cli.analysis.stats import iqm, stratified_bootstrap_ci
from per_cli.errors import ConfigError
from per_cli.train.logger import EPISODE_UPDATE_COLUMNS, read_summary

RETURN_TAG = "charts/episodic_return"
RUN_MARKERS = ("summary.json", "config.yaml")
# config keys that never make runs different settings: the seed, where it ran, how it logged
IGNORED_KEYS = ("seed", "device", "log.")
# metrics.csv columns as the TensorBoard tags they average (the CSV holds per-episode values)
CSV_TAGS = {
    "return": RETURN_TAG,
    "length": "charts/episodic_length",
    "epsilon": "charts/epsilon",
    "success": "charts/success_rate",
    **{column: tag for tag, column in EPISODE_UPDATE_COLUMNS.items()},
}
PARALLEL_FROM = 4  # runs; fewer load faster in this process than a pool starts


Scalars = dict[str, tuple[np.ndarray, np.ndarray]]  # tag -> (steps, values)


@dataclass
class Run:
    path: Path
    name: str  # path relative to the directory searched
    status: str  # completed, failed or running (a run without summary.json counts as running)
    env: str  # the Gymnasium id (aliases resolved)
    replay: str
    seed: int | None
    config: dict[str, Any]  # flattened: {"replay.capacity": 1000, ...}; empty if config.yaml is missing
    summary: dict[str, Any]
    scalars: Scalars = field(default_factory=dict)
    source: str = "none"  # tensorboard, metrics.csv or none
    read_error: str | None = None

    @property
    def error(self) -> str | None:
        return self.summary.get("error") or self.read_error

    @property
    def final_return(self) -> float | None:
        """Mean return of the run's last training episodes (summary ``final_return_mean``); None until done."""
        value = self.summary.get("final_return_mean") if self.status == "completed" else None
        return None if value is None else float(value)

    @property
    def end_step(self) -> float | None:
        """The last env step of a completed run (its curves hold their last value until there)."""
        steps = self.summary.get("total_steps") if self.status == "completed" else None
        return None if steps is None else float(steps)

    def mean_of(self, tag: str) -> float | None:
        """The mean of every logged value of ``tag`` (None if never logged)."""
        if tag not in self.scalars or not len(self.scalars[tag][1]):
            return None
        values = self.scalars[tag][1]
        values = values[np.isfinite(values)]
        return float(values.mean()) if len(values) else None


@dataclass
class Group:
    env: str
    replay: str
    settings: tuple[tuple[str, Any], ...]  # the swept keys of this env and replay kind, with their values
    runs: list[Run]  # every run of the group, failed ones included

    @property
    def label(self) -> str:
        return ", ".join([self.replay, *settings_text(self.settings)])

    @property
    def settings_label(self) -> str:
        return ", ".join(settings_text(self.settings))

    @property
    def curve_runs(self) -> list[Run]:
        """Runs that go into the curves: completed and in progress, not failed."""
        return [r for r in self.runs if r.status != "failed"]

    @property
    def completed(self) -> list[Run]:
        return [r for r in self.runs if r.status == "completed"]

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.runs)


# --------------------------------------------------------------------------------------------------------------
# finding and loading runs


def find_run_dirs(root: Path, exclude: Iterable[Path] = ()) -> list[Path]:
    """Run directories under ``root`` (``root`` itself included), sorted; a run's subfolders are not searched."""
    if not root.is_dir():
        raise ConfigError(f"RUNS_DIR: {root} is not a directory")
    skip = {p.resolve() for p in exclude}
    found = []
    for here, dirs, files in os.walk(root):
        if Path(here).resolve() in skip:
            dirs[:] = []
            continue
        if any(marker in files for marker in RUN_MARKERS) and ("summary.json" in files or "grid.yaml" not in files):
            found.append(Path(here))
            dirs[:] = []  # checkpoints/ and the like
        else:
            dirs.sort()
    return sorted(found)


def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """Nested mappings to dotted keys; lists become tuples (hashable, comparable)."""
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for key, value in data.items():
            out.update(flatten(value, f"{prefix}{key}."))
        return out
    if isinstance(data, list):
        return {prefix[:-1]: tuple(data)}
    return {prefix[:-1]: data}


def _env_id(name: str) -> str:
    from per_cli.envs import resolve_env_id

    return resolve_env_id(name)


def read_tensorboard(run_dir: Path) -> Scalars:
    """Every scalar of the run's event files, without downsampling (TensorBoard's ``EventAccumulator``)."""
    import logging

    from tensorboard.backend.event_processing import event_accumulator as ea

    # a resumed run's events restart at its checkpoint (purge_step): the accumulator drops the stale ones,
    # as it should, but says so on stderr
    logging.getLogger("tensorboard").setLevel(logging.ERROR)
    guidance = {ea.SCALARS: 0, ea.TENSORS: 1, ea.HISTOGRAMS: 1, ea.IMAGES: 1, ea.AUDIO: 1, ea.COMPRESSED_HISTOGRAMS: 1}
    acc = ea.EventAccumulator(str(run_dir), size_guidance=guidance)
    acc.Reload()
    out: Scalars = {}
    for tag in acc.Tags()["scalars"]:
        events = acc.Scalars(tag)
        out[tag] = (
            np.fromiter((e.step for e in events), dtype=np.int64, count=len(events)),
            np.fromiter((e.value for e in events), dtype=np.float64, count=len(events)),
        )
    return out


def read_metrics_csv(path: Path) -> Scalars:
    """The per-episode CSV as scalars over env steps (blank cells are left out)."""
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    out: Scalars = {}
    for column, tag in CSV_TAGS.items():
        pairs = [(int(row["step"]), float(row[column])) for row in rows if row.get(column) not in (None, "")]
        if pairs:
            steps, values = zip(*pairs, strict=True)
            out[tag] = (np.asarray(steps, dtype=np.int64), np.asarray(values, dtype=np.float64))
    return out


def read_scalars(run_dir: Path) -> tuple[Scalars, str]:
    """TensorBoard events where the run wrote them, else ``metrics.csv``; (scalars, source)."""
    if any(p.name.startswith("events.out.tfevents") for p in run_dir.iterdir()):
        scalars = read_tensorboard(run_dir)
        if scalars:
            return scalars, "tensorboard"
    if (run_dir / "metrics.csv").is_file():
        return read_metrics_csv(run_dir / "metrics.csv"), "metrics.csv"
    return {}, "none"


def load_run(path: Path, root: Path) -> Run:
    summary = read_summary(path) or {}
    config: dict[str, Any] = {}
    read_error = None
    try:
        raw = yaml.safe_load((path / "config.yaml").read_text())
        config = flatten(raw) if isinstance(raw, dict) else {}
    except FileNotFoundError:
        pass
    except yaml.YAMLError as exc:
        read_error = f"config.yaml: {type(exc).__name__}"
    env = summary.get("env") or config.get("env.id") or "unknown"
    status = summary.get("status", "running")
    run = Run(
        path=path,
        name=str(path.relative_to(root)) if path != root else path.name,
        status=status if status in ("completed", "failed") else "running",
        env=_env_id(str(env)),
        replay=str(summary.get("replay") or config.get("replay.kind") or "unknown"),
        seed=summary.get("seed", config.get("seed")),
        config=config,
        summary=summary,
        read_error=read_error,
    )
    try:
        run.scalars, run.source = read_scalars(path)
    except Exception as exc:  # noqa: BLE001 - a damaged file costs its run's curves, not the whole plot
        run.read_error = f"could not read scalars: {type(exc).__name__}: {exc}"
    return run


def _load_one(args: tuple[Path, Path]) -> Run:
    return load_run(*args)


def load_runs(root: Path, *, workers: int | None = None, exclude: Iterable[Path] = ()) -> list[Run]:
    """Find and load every run under ``root``, in a process pool when there are many."""
    dirs = find_run_dirs(root, exclude)
    if not dirs:
        raise ConfigError(
            f"RUNS_DIR: no run directories under {root} (a run directory holds summary.json or config.yaml); "
            "write some with per train or per grid"
        )
    workers = min(workers or os.cpu_count() or 1, len(dirs))
    jobs = [(d, root) for d in dirs]
    if workers <= 1 or len(dirs) < PARALLEL_FROM:
        return [_load_one(job) for job in jobs]
    with ProcessPoolExecutor(max_workers=workers, mp_context=_pool_context()) as pool:
        return list(pool.map(_load_one, jobs, chunksize=max(1, len(jobs) // (4 * workers))))


def _pool_context():
    """Workers forked from a clean server that has imported the readers (not from this process, which may
    hold threads: torch's, a test runner's); plain spawn where there is no fork."""
    import multiprocessing

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["per_cli.analysis.results", "tensorboard.backend.event_processing.event_accumulator"])
    return ctx


# --------------------------------------------------------------------------------------------------------------
# grouping


def _ignored(key: str) -> bool:
    return any(key == k or (k.endswith(".") and key.startswith(k)) for k in IGNORED_KEYS)


def swept_keys(runs: Sequence[Run]) -> list[str]:
    """Config keys with more than one value among ``runs`` (runs without a config are not compared)."""
    configs = [r.config for r in runs if r.config]
    keys = sorted({k for c in configs for k in c if not _ignored(k) and k not in ("env.id", "replay.kind")})
    return [k for k in keys if len({repr(c.get(k)) for c in configs}) > 1]


def group_runs(runs: Sequence[Run]) -> list[Group]:
    """Groups of runs over seeds: same env, replay kind and values of the keys swept within that pair."""
    by_kind: dict[tuple[str, str], list[Run]] = {}
    for run in runs:
        by_kind.setdefault((run.env, run.replay), []).append(run)
    groups: dict[tuple, Group] = {}
    for (env, replay), members in by_kind.items():
        keys = swept_keys(members)
        for run in members:
            settings = tuple((k, run.config.get(k)) for k in keys)
            key = (env, replay, repr(settings))
            if key not in groups:
                groups[key] = Group(env, replay, settings, [])
            groups[key].runs.append(run)
    return sorted(groups.values(), key=lambda g: (g.env, g.replay, _sort_key(g.settings)))


def _sort_key(settings: tuple[tuple[str, Any], ...]) -> tuple:
    return tuple(
        (k, (0, v) if isinstance(v, int | float) and not isinstance(v, bool) else (1, repr(v))) for k, v in settings
    )


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
    lasts = [k.rsplit(".", 1)[-1] for k, _ in settings]
    return [
        f"{last if lasts.count(last) == 1 else key}={format_value(value)}"
        for (key, value), last in zip(settings, lasts, strict=True)
    ]


# --------------------------------------------------------------------------------------------------------------
# curves and tables


def dedup_steps(steps: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique steps, averaging values logged at the same step (a burst of updates at one env step)."""
    keep = np.isfinite(values)
    steps, values = steps[keep], values[keep]
    if len(steps) == 0:
        return steps.astype(np.float64), values
    order = np.argsort(steps, kind="stable")
    steps, values = steps[order], values[order]
    unique, start = np.unique(steps, return_index=True)
    if len(unique) == len(steps):
        return steps.astype(np.float64), values
    sums = np.add.reduceat(values, start)
    counts = np.diff(np.append(start, len(steps)))
    return unique.astype(np.float64), sums / counts


def trailing_mean(values: np.ndarray, window: int) -> np.ndarray:
    """Mean of the last ``window`` values at each point (fewer at the start)."""
    if window <= 1 or len(values) == 0:
        return values
    csum = np.cumsum(np.insert(values, 0, 0.0))
    idx = np.arange(1, len(values) + 1)
    lo = np.maximum(idx - window, 0)
    return (csum[idx] - csum[lo]) / (idx - lo)


def curve_on_grid(
    steps: np.ndarray, values: np.ndarray, grid: np.ndarray, smooth: int = 1, end: float | None = None
) -> np.ndarray:
    """The (smoothed) curve interpolated on ``grid``; NaN outside the steps the run logged. ``end``: the last
    step the run reached (a completed run's ``total_steps``): its last value holds until there."""
    x, y = dedup_steps(steps, values)
    out = np.full(len(grid), np.nan)
    if len(x) == 0:
        return out
    y = trailing_mean(y, smooth)
    if end is not None and end > x[-1]:
        x, y = np.append(x, float(end)), np.append(y, y[-1])
    inside = (grid >= x[0]) & (grid <= x[-1])
    out[inside] = np.interp(grid[inside], x, y)
    return out


def steps_to_threshold(steps: np.ndarray, returns: np.ndarray, threshold: float, window: int) -> float:
    """First env step at which the mean return of the last ``window`` episodes reaches ``threshold``; inf if
    it never does."""
    x, y = dedup_steps(steps, returns)
    hit = np.flatnonzero(trailing_mean(y, window) >= threshold)
    return float(x[hit[0]]) if len(hit) else math.inf


def default_threshold(env_id: str) -> float | None:
    """The env's registered ``reward_threshold`` (CartPole-v1: 475), if Gymnasium knows one."""
    import gymnasium as gym

    try:
        return gym.spec(env_id).reward_threshold
    except Exception:  # noqa: BLE001 - unregistered or optional envs simply have none
        return None


@dataclass
class Row:
    env: str
    replay: str
    settings: str
    seeds: int
    running: int
    failed: int
    final_return_iqm: float
    final_return_ci_low: float
    final_return_ci_high: float
    final_return_mean: float
    eval_return_mean: float
    threshold: float | None
    steps_to_threshold: float | None  # median over the completed seeds; inf: most never reached it
    reached: int  # completed seeds that reached the threshold


TABLE_COLUMNS = list(Row.__dataclass_fields__)


def summarize(
    groups: Sequence[Group], thresholds: dict[str, float | None], window: int, *, reps: int = 10_000, seed: int = 0
) -> list[Row]:
    rows = []
    for g in groups:
        finals = np.array([r.final_return for r in g.completed if r.final_return is not None])
        evals = [r.summary.get("eval_return_mean") for r in g.completed]
        evals = [e for e in evals if e is not None]
        point, lo, hi = stratified_bootstrap_ci([finals], iqm, reps=reps, seed=seed) if len(finals) else (math.nan,) * 3
        threshold = thresholds.get(g.env)
        median_steps, reached = None, 0
        if threshold is not None:
            hits = [
                steps_to_threshold(*r.scalars[RETURN_TAG], threshold, window)
                for r in g.completed
                if RETURN_TAG in r.scalars
            ]
            reached = sum(math.isfinite(h) for h in hits)
            median_steps = float(np.median(hits)) if hits else None
        rows.append(
            Row(
                env=g.env,
                replay=g.replay,
                settings=g.settings_label,
                seeds=len(finals),
                running=g.count("running"),
                failed=g.count("failed"),
                final_return_iqm=point,
                final_return_ci_low=lo,
                final_return_ci_high=hi,
                final_return_mean=float(finals.mean()) if len(finals) else math.nan,
                eval_return_mean=float(np.mean(evals)) if evals else math.nan,
                threshold=threshold,
                steps_to_threshold=median_steps,
                reached=reached,
            )
        )
    return rows


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return "inf" if math.isinf(value) else f"{value:.6g}"
    return str(value)


def table_csv(rows: Sequence[Row]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(TABLE_COLUMNS)
    for row in rows:
        writer.writerow([_cell(getattr(row, c)) for c in TABLE_COLUMNS])
    return out.getvalue()


def _num(value: float | None, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.{digits}f}"


def table_markdown(rows: Sequence[Row], failed: Sequence[Run], window: int, root: Path) -> str:
    with_settings = any(r.settings for r in rows)
    head = ["env", "replay", *(["settings"] if with_settings else []), "seeds", "final return IQM [95% CI]",
            "mean", "eval mean", "steps to threshold"]  # fmt: skip
    lines = [
        f"# Results: {root}",
        "",
        "Final return: mean return of a run's last 20 training episodes (summary.json `final_return_mean`), "
        "over completed runs. IQM: interquartile mean over seeds; CI: 95% stratified percentile bootstrap "
        "(Agarwal et al. 2021). Steps to threshold: median over seeds of the first env step at which the mean "
        f"return of the last {window} episodes reaches the threshold (reached/seeds in brackets).",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "|".join("---" if i < 2 + with_settings else "---:" for i in range(len(head))) + "|",
    ]
    for r in rows:
        seeds = f"{r.seeds}" + "".join(
            f" (+{n} {what})" for n, what in ((r.running, "running"), (r.failed, "failed")) if n
        )
        ci = f"{_num(r.final_return_iqm)} [{_num(r.final_return_ci_low)}, {_num(r.final_return_ci_high)}]"
        if r.threshold is None:
            steps = "–"
        else:
            median = r.steps_to_threshold
            shown = "–" if median is None else ("not reached" if math.isinf(median) else f"{median:,.0f}")
            steps = f"{shown} (≥ {r.threshold:g}: {r.reached}/{r.seeds})"
        cells = [r.env, r.replay, *([r.settings or "–"] if with_settings else []), seeds, ci,
                 _num(r.final_return_mean), _num(r.eval_return_mean), steps]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    if failed:
        lines += ["", "## Failed runs (left out of the curves and the statistics)", ""]
        lines += [f"- `{r.name}`: {(r.error or 'no error recorded').splitlines()[0]}" for r in failed]
    return "\n".join(lines) + "\n"
