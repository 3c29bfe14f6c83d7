"""The summary table of ``per plot``: per group, the IQM of the final return over seeds with a 95% stratified
bootstrap CI (none for a single seed), means, and steps to a return threshold; as CSV and Markdown."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from per_cli.analysis.curves import steps_to_threshold
from per_cli.analysis.groups import Group
from per_cli.analysis.readers import RETURN_TAG
from per_cli.analysis.runs import Run
from per_cli.analysis.stats import iqm, stratified_bootstrap_ci
from per_cli.analysis.text import num

NOT_COUNTED = ("running", "interrupted", "failed", "unreadable")  # statuses shown beside the seed count


def default_threshold(env_id: str, episode_limit: int | None = None) -> float | None:
    """The env's registered ``reward_threshold`` (CartPole-v1: 475), if Gymnasium knows one.

    Runs with another episode limit (``env.max_episode_steps``) than the id's take the threshold of the
    registered version with that limit and the same dynamics: CartPole-v1 cut at 200 steps is CartPole-v0,
    solved at 195, where 475 could never be reached. With no such version there is no default."""
    import gymnasium as gym

    try:
        spec = gym.spec(env_id)
    except Exception:  # noqa: BLE001 - unregistered or optional envs simply have none
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
    final_return_ci_low: float  # NaN for fewer than two seeds: one seed has no interval
    final_return_ci_high: float
    final_return_mean: float
    eval_return_mean: float
    eval_return_iqm: float  # the seeds' final greedy evaluations (summary.json eval_return_mean of each run)
    eval_return_ci_low: float
    eval_return_ci_high: float
    threshold: float | None
    steps_to_threshold: float | None  # median over the completed seeds; inf: most never reached it
    reached: int  # completed seeds that reached the threshold


TABLE_COLUMNS = list(Row.__dataclass_fields__)


def iqm_ci(scores: np.ndarray, *, reps: int = 10_000, seed: int = 0) -> tuple[float, float, float]:
    """(IQM, CI low, CI high); the CI is NaN for fewer than two scores, everything NaN for none."""
    if len(scores) == 0:
        return (math.nan,) * 3
    if len(scores) == 1:
        return float(scores[0]), math.nan, math.nan
    return stratified_bootstrap_ci([scores], iqm, reps=reps, seed=seed)


def summarize(
    groups: Sequence[Group], thresholds: dict[str, float | None], window: int, *, reps: int = 10_000, seed: int = 0
) -> list[Row]:
    rows = []
    for g in groups:
        finals = np.array([r.final_return for r in g.completed if r.final_return is not None])
        evals = [e for r in g.completed if (e := r.summary.get("eval_return_mean")) is not None]
        point, lo, hi = iqm_ci(finals, reps=reps, seed=seed)
        eval_point, eval_lo, eval_hi = iqm_ci(np.array(evals, dtype=np.float64), reps=reps, seed=seed)
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
                **{status: g.count(status) for status in NOT_COUNTED},
                final_return_iqm=point,
                final_return_ci_low=lo,
                final_return_ci_high=hi,
                final_return_mean=float(finals.mean()) if len(finals) else math.nan,
                eval_return_mean=float(np.mean(evals)) if evals else math.nan,
                eval_return_iqm=eval_point,
                eval_return_ci_low=eval_lo,
                eval_return_ci_high=eval_hi,
                threshold=threshold,
                steps_to_threshold=median_steps,
                reached=reached,
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


def rows_csv(rows: Sequence[Any], columns: Sequence[str]) -> str:
    """Dataclass rows as CSV: a header of ``columns``, then each row's attributes as :func:`cell` writes them."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([cell(getattr(row, c)) for c in columns])
    return out.getvalue()


def table_csv(rows: Sequence[Row]) -> str:
    return rows_csv(rows, TABLE_COLUMNS)


# a bootstrap interval over fewer seeds than this per group is too narrow to trust (2 seeds give intervals
# such as [0.00, 0.00]): every table marks it in the cell itself
MIN_RELIABLE_SEEDS = 5
UNRELIABLE = "(unreliable: n < 5)"


def with_ci(point: float, lo: float, hi: float, digits: int = 1, seeds: int | None = None) -> str:
    """``202.9 [190.1, 210.4]``; only ``202.9`` where there is no interval (one seed); ``seeds``: the fewest
    seeds of the groups behind the interval, marked :data:`UNRELIABLE` below :data:`MIN_RELIABLE_SEEDS`."""
    text = num(point, digits, "–")
    if math.isnan(lo) or math.isnan(hi):
        return text
    mark = f" {UNRELIABLE}" if seeds is not None and seeds < MIN_RELIABLE_SEEDS else ""
    return f"{text} [{num(lo, digits)}, {num(hi, digits)}]{mark}"


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


def table_markdown(
    rows: Sequence[Row], left_out: Sequence[Run], window: int, root: Path, final_episodes: int | None = None
) -> str:
    """The Markdown table; ``left_out``: failed and unreadable runs, listed under it with their errors;
    ``final_episodes``: what the final return was taken over (None: the summaries' last 20 episodes)."""
    with_settings = any(r.settings for r in rows)
    head = ["env", "replay", *(["settings"] if with_settings else []), "seeds", "final return IQM [95% CI]",
            "mean", "eval IQM [95% CI]", "steps to threshold"]  # fmt: skip
    lines = [
        f"# Results: {root}",
        "",
        f"Final return: {final_return_meaning(final_episodes)}, over completed runs. "
        "IQM: interquartile mean over seeds; CI: 95% stratified percentile bootstrap over seeds "
        "(Agarwal et al. 2021), none for a single seed. Eval: each run's final greedy evaluation "
        "(summary.json `eval_return_mean`), its IQM over seeds. Steps to threshold: median over seeds of the "
        f"first env step at which the mean return of the last {window} episodes reaches the threshold "
        "(reached/seeds in brackets).",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "|".join("---" if i < 2 + with_settings else "---:" for i in range(len(head))) + "|",
    ]
    for r in rows:
        seeds = f"{r.seeds}" + "".join(f" (+{getattr(r, s)} {s})" for s in NOT_COUNTED if getattr(r, s))
        ci = with_ci(r.final_return_iqm, r.final_return_ci_low, r.final_return_ci_high, seeds=r.seeds)
        cells = [r.env, r.replay, *([r.settings or "–"] if with_settings else []), seeds, ci,
                 num(r.final_return_mean, 1, "–"),
                 with_ci(r.eval_return_iqm, r.eval_return_ci_low, r.eval_return_ci_high, seeds=r.seeds),
                 _steps_cell(r)]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    if left_out:
        lines += ["", "## Failed or unreadable runs (left out of the curves and the statistics)", ""]
        lines += [f"- `{r.name}` ({r.status}): {(r.error or 'no error recorded').splitlines()[0]}" for r in left_out]
    return "\n".join(lines) + "\n"
