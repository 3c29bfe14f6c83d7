"""What each group's batches looked like: per group, the mean over its completed runs of each run's mean batch measure,
with a 95% bootstrap CI over seeds; ``measures.md`` / ``measures.csv`` of ``per plot``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from per_cli.analysis.groups import Group
from per_cli.analysis.runs import Run
from per_cli.analysis.stats import MIN_INTERVAL_SEEDS, interval
from per_cli.analysis.tables import with_ci
from per_cli.analysis.text import heading, markdown_table
from per_cli.rundir.readers import LENGTH_TAG

MEASURE_TAGS = {
    "iid/state_diversity": "state diversity",
    "iid/episode_diversity": "episode diversity",
    "replay/correlation_count": "correlation count (notebook)",
    "replay/sample_age": "sample age",
    "td_error/mean": "mean |TD error|",
    "replay/is_weight_mean": "IS weight mean",
}
CI_REPS = 2_000


@dataclass
class MeasureRow:
    env: str
    replay: str
    settings: str
    tag: str
    runs: int  # completed runs that logged the tag
    mean: float  # mean over runs of the run means (NaN when none logged it)
    ci_low: float
    ci_high: float


def run_mean(run: Run, tag: str) -> float | None:
    """The run's mean of ``tag`` over the whole run (None if never logged): from metrics.csv, each episode's
    value weighted by its length in env steps (its updates); from TensorBoard, each logged value once."""
    if run.source != "metrics.csv" or LENGTH_TAG not in run.scalars or tag not in run.scalars:
        return run.mean_of(tag)
    steps, values = run.scalars[tag]
    end_steps, lengths = run.scalars[LENGTH_TAG]
    at = np.searchsorted(end_steps, steps)
    matched = (at < len(end_steps)) & (end_steps[np.minimum(at, len(end_steps) - 1)] == steps) & np.isfinite(values)
    weights = lengths[at[matched]].astype(np.float64)
    if not matched.any() or weights.sum() <= 0:
        return run.mean_of(tag)
    return float(np.average(values[matched], weights=weights))


def measure_rows(groups: Sequence[Group]) -> list[MeasureRow]:
    """One row per group and measure tag that at least one of its completed runs logged (no CI below
    MIN_INTERVAL_SEEDS runs)."""
    rows = []
    for g in groups:
        for tag in MEASURE_TAGS:
            values = [v for r in g.completed if (v := run_mean(r, tag)) is not None]
            if values:
                mean, lo, hi = interval(values, np.mean, reps=CI_REPS)
                rows.append(MeasureRow(g.env, g.replay, g.settings_label, tag, len(values), mean, lo, hi))
    return rows


def measures_markdown(rows: Sequence[MeasureRow], made: str = "") -> str:
    """Per env, a table with a row per group and a column per measure: mean [95% CI] over its runs; ``made``:
    the commit and command."""
    lines = [
        *heading("# What the batches looked like", made),
        "Per group: the mean over its completed runs of each run's mean of the batch measure over the whole run, "
        "weighted by what it averages (metrics.csv: each episode's mean over its updates, weighted by the episode's "
        "env steps; TensorBoard: each log window's value once); in brackets a 95% bootstrap CI over the runs, none "
        f"below {MIN_INTERVAL_SEEDS} runs. Definitions: docs/metrics.md.",
    ]
    for env in dict.fromkeys(r.env for r in rows):
        env_rows = [r for r in rows if r.env == env]
        tags = [t for t in MEASURE_TAGS if any(r.tag == t for r in env_rows)]
        names = [MEASURE_TAGS[t].replace("|", "\\|") for t in tags]  # (a bare | would split the column)
        table = []
        for replay, settings in dict.fromkeys((r.replay, r.settings) for r in env_rows):
            cells = {r.tag: r for r in env_rows if (r.replay, r.settings) == (replay, settings)}
            table.append([replay, settings or "–", *(_cell(cells.get(t)) for t in tags)])
        lines += ["", f"## {env}", "", *markdown_table(["replay", "settings", *names], table, 2)]
    return "\n".join(lines) + "\n"


def _cell(row: MeasureRow | None) -> str:
    if row is None:
        return "–"
    return with_ci(row.mean, row.ci_low, row.ci_high, 0 if abs(row.mean) >= 100 else 3, row.runs)
