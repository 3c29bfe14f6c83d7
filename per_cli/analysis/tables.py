"""The summary table of ``per plot``, as CSV and Markdown: per group, IQMs over seeds with 95% stratified bootstrap
CIs of the final return and of the whole curve's measures (AUC, peak, drop), means, and steps to a threshold."""

from __future__ import annotations

import csv
import dataclasses
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from per_cli.analysis.curves import steps_to_threshold
from per_cli.analysis.envname import registered_spec
from per_cli.analysis.groups import Group, is_numeric
from per_cli.analysis.runs import Run
from per_cli.analysis.stats import MIN_INTERVAL_SEEDS, interval
from per_cli.analysis.text import heading, markdown_table, num
from per_cli.rundir.readers import RETURN_TAG
from per_cli.rundir.returns import return_measures

NOT_COUNTED = ("running", "interrupted", "failed", "unreadable")  # statuses shown beside the seed count
CURVE_MEASURES = ("auc", "peak", "drop")  # summary.json's return_auc, return_peak, return_drop


def default_threshold(env_id: str, episode_limit: int | None = None) -> float | None:
    """The env's registered ``reward_threshold`` (CartPole-v1: 475), if Gymnasium knows one; under another episode
    limit, that of the registered version with that limit and the same dynamics (CartPole-v1 cut at 200 steps:
    CartPole-v0's 195), else None."""
    import gymnasium as gym

    spec = registered_spec(env_id)
    if spec is None:
        return None
    if episode_limit is None or episode_limit == spec.max_episode_steps:
        return spec.reward_threshold
    same = [s for s in gym.registry.values() if s.entry_point == spec.entry_point and s.kwargs == spec.kwargs]
    return next((s.reward_threshold for s in same if s.max_episode_steps == episode_limit), None)


@dataclass
class Row:
    env: str
    replay: str
    settings: str
    seeds: int
    running: int
    interrupted: int
    failed: int
    unreadable: int
    final_return_iqm: float
    final_return_ci_low: float  # NaN below MIN_INTERVAL_SEEDS seeds: too few for a bootstrap interval
    final_return_ci_high: float
    final_return_mean: float
    eval_return_mean: float
    eval_return_iqm: float  # the seeds' final greedy evaluations (summary.json eval_return_mean of each run)
    eval_return_ci_low: float
    eval_return_ci_high: float
    threshold: float | None
    steps_to_threshold: float | None  # median over the completed seeds; inf: most never reached it
    reached: int  # completed seeds that reached the threshold
    return_auc_iqm: float  # IQM over seeds of each run's mean return over all its episodes
    return_auc_ci_low: float
    return_auc_ci_high: float
    return_peak_iqm: float  # of each run's best mean of 20 consecutive episodes
    return_peak_ci_low: float
    return_peak_ci_high: float
    return_drop_iqm: float  # of each run's peak minus its final return
    return_drop_ci_low: float
    return_drop_ci_high: float
    curve_runs: int  # completed runs with those measures
    curve_from_logs: int  # of them, computed from the logged returns (summary.json predates the keys)


def _iqm_fields(prefix: str, values: Sequence[float], reps: int, seed: int) -> dict[str, float]:
    point, lo, hi = interval(values, reps=reps, seed=seed)
    return {f"{prefix}_iqm": point, f"{prefix}_ci_low": lo, f"{prefix}_ci_high": hi}


def _curve_measures(g: Group, reps: int, seed: int) -> dict[str, float | int]:
    """The Row fields of the group's whole-curve measures: each completed run's summary.json values, else those of
    its logged returns by the same definition (:func:`~per_cli.rundir.returns.return_measures`)."""
    measures, from_logs = [], 0
    for r in g.completed:
        values = [r.summary.get(f"return_{name}") for name in CURVE_MEASURES]
        if not is_numeric(values):
            returns = r.scalars.get(RETURN_TAG)
            if returns is None or not len(returns.values):
                continue
            values, from_logs = list(return_measures(returns.values).values()), from_logs + 1
        measures.append([float(v) for v in values])
    out: dict[str, float | int] = {"curve_runs": len(measures), "curve_from_logs": from_logs}
    for i, name in enumerate(CURVE_MEASURES):
        out |= _iqm_fields(f"return_{name}", [m[i] for m in measures], reps, seed)
    return out


def summarize(
    groups: Sequence[Group], thresholds: dict[str, float | None], window: int, *, reps: int = 10_000, seed: int = 0
) -> list[Row]:
    rows = []
    for g in groups:
        finals = [r.final_return for r in g.completed if r.final_return is not None]
        evals = [e for r in g.completed if (e := r.summary.get("eval_return_mean")) is not None]
        threshold = thresholds.get(g.env)
        median_steps, reached = None, 0
        if threshold is not None:
            hits = [steps_to_threshold(*r.scalars[RETURN_TAG], threshold, window)
                    for r in g.completed if RETURN_TAG in r.scalars]  # fmt: skip
            reached = sum(math.isfinite(h) for h in hits)
            median_steps = float(np.median(hits)) if hits else None
        rows.append(
            Row(
                env=g.env,
                replay=g.replay,
                settings=g.settings_label,
                seeds=len(finals),
                **{status: sum(r.status == status for r in g.runs) for status in NOT_COUNTED},
                **_iqm_fields("final_return", finals, reps, seed),
                final_return_mean=float(np.mean(finals)) if finals else math.nan,
                eval_return_mean=float(np.mean(evals)) if evals else math.nan,
                **_iqm_fields("eval_return", evals, reps, seed),
                threshold=threshold,
                steps_to_threshold=median_steps,
                reached=reached,
                **_curve_measures(g, reps, seed),
            )  # fmt: skip
        )
    return rows


def cell(value: Any) -> str:
    """A CSV cell: blank for None and NaN, ``inf`` for infinity, 6 significant digits."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return "inf" if math.isinf(value) else f"{value:.6g}"
    return str(value)


def rows_csv(rows: Sequence[Any], cls: type) -> str:
    """Rows of the dataclass ``cls`` as CSV: a header of its fields, then each row's values as :func:`cell` writes."""
    columns = [f.name for f in dataclasses.fields(cls)]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([cell(getattr(row, c)) for c in columns] for row in rows)
    return out.getvalue()


def no_interval(seeds: int) -> str:
    """What a cell says instead of an interval below :data:`MIN_INTERVAL_SEEDS` seeds: ``no interval (n = 3)``."""
    return f"no interval (n = {seeds})"


def with_ci(point: float, lo: float, hi: float, digits: int = 1, seeds: int | None = None) -> str:
    """``202.9 [190.1, 210.4]``; ``seeds`` (the fewest behind the interval) below :data:`MIN_INTERVAL_SEEDS`: the
    point and ``no interval (n = 3)``; only the point without an interval."""
    text = num(point, digits, "–")
    if seeds is not None and seeds < MIN_INTERVAL_SEEDS and not math.isnan(point):
        return f"{text}, {no_interval(seeds)}"
    if math.isnan(lo) or math.isnan(hi):
        return text
    return f"{text} [{num(lo, digits)}, {num(hi, digits)}]"


def _steps_cell(r: Row) -> str:
    if r.threshold is None:
        return "–"
    median = r.steps_to_threshold
    shown = "–" if median is None else ("not reached" if math.isinf(median) else f"{median:,.0f}")
    return f"{shown} (≥ {r.threshold:g}: {r.reached}/{r.seeds})"


def final_return_meaning(final_episodes: int | None) -> str:
    """What a run's final return is, for captions: the summaries' last 20 episodes, or ``--final-episodes N``."""
    if final_episodes is None:
        return "mean return of a run's last 20 training episodes (summary.json `final_return_mean`)"
    return f"mean return of a run's last {final_episodes} logged training episodes (`{RETURN_TAG}`; `--final-episodes`)"


CURVE_MEANING = (
    "AUC: the mean return over all of a run's training episodes (each episode counts once; summary.json "
    "`return_auc`); peak: its best mean over 20 consecutive episodes (all of them when it has fewer; "
    "`return_peak`); drop: peak minus the final return of its last 20 episodes (`return_drop`; 0: it ended at "
    "its best). Each is the IQM over seeds with its 95% CI."
)


def _curve_note(rows: Sequence[Row]) -> str:
    """How many runs' curve measures came from their logged returns, or are missing (old summaries)."""
    runs = sum(r.seeds for r in rows)
    logged = sum(r.curve_from_logs for r in rows)
    missing = sum(max(r.seeds - r.curve_runs, 0) for r in rows)
    if not logged and not missing:
        return ""
    parts = [f"{logged} of {runs} runs' summary.json predate AUC, peak and drop: theirs come from the logged episode "
             "returns (metrics.csv or event files), by the same definition"] if logged else []  # fmt: skip
    if missing:
        parts.append(f"{missing} runs have neither, and are left out of those columns (— where a group has none)")
    return "; ".join(parts) + "."


def table_markdown(
    rows: Sequence[Row], left_out: Sequence[Run], window: int, root: Path, final_episodes: int | None = None,
    made: str = "",
) -> str:  # fmt: skip
    """The Markdown table; ``left_out``: failed and unreadable runs, listed under it with their errors; ``made``:
    the commit and command that made it (:func:`per_cli.analysis.provenance.made_by`)."""
    with_settings = any(r.settings for r in rows)
    head = ["env", "replay", *(["settings"] if with_settings else []), "seeds", "final return IQM [95% CI]",
            "mean", "AUC IQM [95% CI]", "peak IQM [95% CI]", "drop IQM [95% CI]", "eval IQM [95% CI]",
            "steps to threshold"]  # fmt: skip
    note = _curve_note(rows)
    lines = [
        *heading(f"# Results: {root}", made),
        f"Final return: {final_return_meaning(final_episodes)}, over completed runs. {CURVE_MEANING} "
        "IQM: interquartile mean over seeds; CI: 95% stratified percentile bootstrap over seeds "
        f"(Agarwal et al. 2021), none below {MIN_INTERVAL_SEEDS} seeds (`no interval (n = …)`: a bootstrap of so "
        "few runs is degenerate). Eval: each run's final greedy evaluation "
        "(summary.json `eval_return_mean`), its IQM over seeds. Steps to threshold: median over seeds of the "
        f"first env step at which the mean return of the last {window} episodes reaches the threshold "
        "(reached/seeds in brackets).",
        *(["", note] if note else []),
        "",
    ]
    table = []
    for r in rows:
        seeds = f"{r.seeds}" + "".join(f" (+{getattr(r, s)} {s})" for s in NOT_COUNTED if getattr(r, s))
        ci = with_ci(r.final_return_iqm, r.final_return_ci_low, r.final_return_ci_high, seeds=r.seeds)
        curve = [with_ci(getattr(r, f"return_{m}_iqm"), getattr(r, f"return_{m}_ci_low"),
                         getattr(r, f"return_{m}_ci_high"), seeds=r.curve_runs) if r.curve_runs else "—"
                 for m in CURVE_MEASURES]  # fmt: skip
        table.append([r.env, r.replay, *([r.settings or "–"] if with_settings else []), seeds, ci,
                      num(r.final_return_mean, 1, "–"), *curve,
                      with_ci(r.eval_return_iqm, r.eval_return_ci_low, r.eval_return_ci_high, seeds=r.seeds),
                      _steps_cell(r)])  # fmt: skip
    lines += markdown_table(head, table, 2 + with_settings)
    if left_out:
        lines += ["", "## Failed or unreadable runs (left out of the curves and the statistics)", ""]
        lines += [f"- `{r.name}` ({r.status}): {(r.error or 'no error recorded').splitlines()[0]}" for r in left_out]
    return "\n".join(lines) + "\n"
