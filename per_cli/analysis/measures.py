"""What each group's batches looked like: per group, the mean over its completed runs of each run's mean batch
measure, with a 95% bootstrap CI over seeds; ``measures.md`` / ``measures.csv`` of ``per plot``.

This is the table behind "did the knob move the thing it is meant to move?": the i.i.d. measures and the
notebook's correlation count side by side (a measure that does not change between `none` and `uniform`, or
across replay windows, cannot stand for i.i.d.-ness), the sample age, and the TD-error focus (mean |δ| and the
IS-weight mean). A run's mean is the mean of every logged value of the tag (per episode in metrics.csv, per log
window in TensorBoard), as the hypothesis figure uses it.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from per_cli.analysis.groups import Group
from per_cli.analysis.stats import stratified_bootstrap_ci

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


def measure_rows(groups: Sequence[Group]) -> list[MeasureRow]:
    """One row per group and measure tag that at least one of its completed runs logged."""
    rows = []
    for g in groups:
        for tag in MEASURE_TAGS:
            values = [v for r in g.completed if (v := r.mean_of(tag)) is not None]
            if not values:
                continue
            mean, lo, hi = stratified_bootstrap_ci([np.array(values)], np.mean, reps=CI_REPS)
            rows.append(MeasureRow(g.env, g.replay, g.settings_label, tag, len(values), mean, lo, hi))
    return rows


def measures_csv(rows: Sequence[MeasureRow]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["env", "replay", "settings", "tag", "runs", "mean", "ci_low", "ci_high"])
    for r in rows:
        writer.writerow([r.env, r.replay, r.settings, r.tag, r.runs, f"{r.mean:.6g}", f"{r.ci_low:.6g}",
                         f"{r.ci_high:.6g}"])  # fmt: skip
    return out.getvalue()


def measures_markdown(rows: Sequence[MeasureRow], made: str = "") -> str:
    """Per env, a table with a row per group and a column per measure: mean [95% CI] over its runs; ``made``:
    the commit and command."""
    lines = [
        "# What the batches looked like",
        "",
        *([made, ""] if made else []),
        "Per group: the mean over its completed runs of each run's mean of the batch measure (every logged value "
        "of the run); in brackets a 95% bootstrap CI over the runs. Definitions: docs/metrics.md.",
    ]
    for env in dict.fromkeys(r.env for r in rows):
        env_rows = [r for r in rows if r.env == env]
        tags = [t for t in MEASURE_TAGS if any(r.tag == t for r in env_rows)]
        lines += ["", f"## {env}", "", "| replay | settings | " + " | ".join(MEASURE_TAGS[t] for t in tags) + " |",
                  "|---|---|" + "---:|" * len(tags)]  # fmt: skip
        for key in dict.fromkeys((r.replay, r.settings) for r in env_rows):
            cells = {r.tag: r for r in env_rows if (r.replay, r.settings) == key}
            lines.append(f"| {key[0]} | {key[1] or '–'} | " + " | ".join(_cell(cells.get(t)) for t in tags) + " |")
    return "\n".join(lines) + "\n"


def _cell(row: MeasureRow | None) -> str:
    if row is None:
        return "–"
    digits = 0 if abs(row.mean) >= 100 else 3
    return f"{row.mean:.{digits}f} [{row.ci_low:.{digits}f}, {row.ci_high:.{digits}f}]"
