"""Each replay kind against a baseline kind (``uniform``), per env: how likely a run of it ends above a run of the
baseline, by how much, and whether that is more than seed noise."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from per_cli.analysis.groups import Group
from per_cli.analysis.stats import CI_PERCENTILES, DEFAULT_REPS, MIN_INTERVAL_SEEDS, holm, iqm, smallest_p
from per_cli.analysis.tables import with_ci
from per_cli.analysis.text import heading, markdown_table

BASELINE = "uniform"


@dataclass
class Comparison:
    env: str
    replay: str
    settings: str
    baseline: str
    seeds: int
    baseline_seeds: int
    p_improvement: float  # P(X > Y) + P(X = Y) / 2
    p_improvement_ci_low: float
    p_improvement_ci_high: float
    iqm_difference: float  # IQM(X) - IQM(Y)
    iqm_difference_ci_low: float
    iqm_difference_ci_high: float
    mann_whitney_p: float
    mann_whitney_p_holm: float  # Holm-adjusted over every row of the table with a p
    mann_whitney_p_min: float  # the smallest two-sided p reachable at these group sizes (3 vs 3: 0.1)


ALPHA = 0.05  # the level at which an adjusted p is marked
EXACT_SPLITS = 20_000  # C(n_x + n_y, n_x) up to which the p is the exact permutation p (8 vs 8: 12,870)


def probability_of_improvement(x: np.ndarray, y: np.ndarray) -> np.ndarray | float:
    """P(X > Y) + ½·P(X = Y) along the last axis of ``x`` and ``y`` (equal leading shapes): the Mann–Whitney
    U of ``x`` over len(x)·len(y), from the average ranks of the pooled scores (ties share their rank)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    nx, ny = x.shape[-1], y.shape[-1]
    ranks = sps.rankdata(np.concatenate([x, y], axis=-1), axis=-1)
    u = ranks[..., :nx].sum(axis=-1) - nx * (nx + 1) / 2
    result = u / (nx * ny)
    return float(result) if np.ndim(result) == 0 else result


def compare_pair(x: np.ndarray, y: np.ndarray, *, reps: int = DEFAULT_REPS, seed: int = 0) -> dict[str, float]:
    """Scores ``x`` against baseline scores ``y``: the probability of improvement and the IQM difference with 95%
    percentile bootstrap CIs (NaN below :data:`MIN_INTERVAL_SEEDS` scores), the two-sided Mann–Whitney p (exact up to
    :data:`EXACT_SPLITS` splits; NaN below two scores) and the smallest p reachable at these sizes."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    out = {"p_improvement": probability_of_improvement(x, y), "iqm_difference": float(iqm(x) - iqm(y)),
           "mann_whitney_p_min": smallest_p(len(x), len(y)), "mann_whitney_p": math.nan}  # fmt: skip
    out |= {f"{key}_ci_{end}": math.nan for key in ("p_improvement", "iqm_difference") for end in ("low", "high")}
    if len(x) < 2 or len(y) < 2:
        return out
    exact = math.comb(len(x) + len(y), len(x)) <= EXACT_SPLITS
    method = sps.PermutationMethod(n_resamples=np.inf) if exact else "auto"
    out["mann_whitney_p"] = float(sps.mannwhitneyu(x, y, alternative="two-sided", method=method).pvalue)
    if len(x) < MIN_INTERVAL_SEEDS or len(y) < MIN_INTERVAL_SEEDS:
        return out
    rng = np.random.default_rng(seed)
    bx = x[rng.integers(0, len(x), size=(reps, len(x)))]
    by = y[rng.integers(0, len(y), size=(reps, len(y)))]
    for key, samples in (
        ("p_improvement", probability_of_improvement(bx, by)),
        ("iqm_difference", iqm(bx, axis=-1) - iqm(by, axis=-1)),
    ):
        out[f"{key}_ci_low"], out[f"{key}_ci_high"] = (float(v) for v in np.percentile(samples, CI_PERCENTILES))
    return out


def _finals(group: Group) -> np.ndarray:
    return np.array([r.final_return for r in group.completed if r.final_return is not None], dtype=np.float64)


def compare_groups(groups: Sequence[Group]) -> list[Comparison]:
    """Every group that has a :data:`BASELINE` group of the same env and settings, against it, in ``groups``'
    order (groups without completed runs are left out)."""
    base = {(g.env, g.settings): g for g in groups if g.replay == BASELINE}
    rows = []
    for g in groups:
        ref = base.get((g.env, g.settings))
        if g.replay == BASELINE or ref is None:
            continue
        x, y = _finals(g), _finals(ref)
        if not len(x) or not len(y):
            continue
        rows.append(Comparison(g.env, g.replay, g.settings_label, BASELINE, len(x), len(y), **compare_pair(x, y),
                               mann_whitney_p_holm=math.nan))  # fmt: skip
    for row, adjusted in zip(rows, holm([r.mann_whitney_p for r in rows]), strict=True):
        row.mann_whitney_p_holm = float(adjusted)
    return rows


def p_text(p: float, exact: bool = False) -> str:
    """``0.032``, ``< 0.001``; ``exact``: three significant digits however small (``2.37e-06``)."""
    if math.isnan(p):
        return "–"
    if exact:
        return f"{p:.3g}"
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def marked(text: str, adjusted_p: float, alpha: float = ALPHA) -> str:
    """``text`` in bold where the Holm-adjusted p is below ``alpha``: the one mark of a difference."""
    return f"**{text}**" if adjusted_p < alpha else text


def p_cells(p: float, adjusted: float, n_x: int, n_y: int, exact: bool = False) -> tuple[str, str]:
    """The raw p (with the smallest reachable p below MIN_INTERVAL_SEEDS seeds: a test that cannot reach 0.05
    says so) and the adjusted p, bold below :data:`ALPHA` (``exact``: as :func:`p_text`)."""
    raw = p_text(p, exact)
    if min(n_x, n_y) < MIN_INTERVAL_SEEDS and n_x and n_y:
        raw += f" (smallest reachable p at {n_x} vs {n_y}: {smallest_p(n_x, n_y):.3g})"
    return raw, marked(p_text(adjusted, exact), adjusted)


def comparisons_markdown(rows: Sequence[Comparison], final: str, made: str = "") -> str:
    """The table, per env; ``final``: what a run's final return is (for the header); ``made``: its commit and
    command."""
    with_settings = any(r.settings for r in rows)
    head = ["env", "replay", *(["settings"] if with_settings else []), "seeds", f"P(kind > {BASELINE}) [95% CI]",
            f"IQM − IQM({BASELINE}) [95% CI]", "Mann–Whitney p", "Holm-adjusted p"]  # fmt: skip
    family = sum(math.isfinite(r.mann_whitney_p) for r in rows)
    lines = [
        *heading(f"# Each kind against `{BASELINE}`", made),
        f"Final return: {final}. P(kind > {BASELINE}): the probability that a run of the kind ends above a run of "
        f"`{BASELINE}`, ties counting half (Agarwal et al. 2021's probability of improvement; 0.5 = no "
        "difference). IQM difference in return units. 95% CIs: percentile bootstrap resampling each group's "
        f"seeds, none below {MIN_INTERVAL_SEEDS} seeds (a bootstrap of so few runs is degenerate); p: two-sided "
        "Mann–Whitney U test (scipy), with the smallest p the test can reach where a group has fewer than "
        f"{MIN_INTERVAL_SEEDS} seeds. Holm-adjusted p: Holm (1979) over this table's family, its {family} tests "
        f"(every row with a p); bold: adjusted p < {ALPHA}.",
        "",
    ]
    table = []
    for r in rows:
        fewest = min(r.seeds, r.baseline_seeds)
        difference = with_ci(r.iqm_difference, r.iqm_difference_ci_low, r.iqm_difference_ci_high, 1, fewest)
        table.append([r.env, r.replay, *([r.settings or "–"] if with_settings else []),
                      f"{r.seeds} vs {r.baseline_seeds}",
                      with_ci(r.p_improvement, r.p_improvement_ci_low, r.p_improvement_ci_high, 2, fewest),
                      marked(difference, r.mann_whitney_p_holm),
                      *p_cells(r.mann_whitney_p, r.mann_whitney_p_holm, r.seeds, r.baseline_seeds)])  # fmt: skip
    return "\n".join(lines + markdown_table(head, table, 2 + with_settings)) + "\n"
