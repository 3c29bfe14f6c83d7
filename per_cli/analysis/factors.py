"""How much of the variance in final return each swept factor explains: ANOVA η² over a full factorial design, with
bootstrap CIs over seeds."""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from per_cli.analysis.groups import Group, format_value, is_numeric, kind_rank
from per_cli.analysis.runs import Run
from per_cli.analysis.stats import CI_PERCENTILES, MIN_INTERVAL_SEEDS, iqm, stratified_bootstrap_ci
from per_cli.analysis.tables import no_interval, rows_csv
from per_cli.analysis.text import heading, markdown_table

REPLAY_FACTOR = "replay"
CI_REPS = 2_000  # bootstrap resamples of a marginal effect's CI


@dataclass
class Design:
    """A balanced full factorial of one env: ``y[level of factor 1, ..., level of factor k, seed]``."""

    env: str
    factors: list[str]
    levels: list[list[Any]]
    seeds: list[Any]
    y: np.ndarray
    dropped: int = 0  # completed runs left out to balance the design

    def numeric(self, i: int) -> bool:
        """Whether factor i's levels are numbers (a trend may join them) rather than categories (the replay
        kind, a string, a bool, None among numbers: no order between them means anything)."""
        return self.factors[i] != REPLAY_FACTOR and is_numeric(self.levels[i])

    def describe(self) -> str:
        """The design in words, e.g. ``replay kind only (5 levels, categorical; no swept key)``."""
        parts = [
            f"{'replay kind' if f == REPLAY_FACTOR else f} ({len(lv)} levels, "
            f"{'numeric' if self.numeric(i) else 'categorical'})"
            for i, (f, lv) in enumerate(zip(self.factors, self.levels, strict=True))
        ]
        if self.factors == [REPLAY_FACTOR]:
            return f"{parts[0]} only: no swept key, so η² is the share of the variance between the kinds"
        return f"{len(parts)}-factor full factorial: " + " × ".join(parts)


@dataclass
class EffectShare:
    env: str
    effect: str  # "replay.alpha", "replay.alpha × replay.window" or "residual"
    eta_sq: float
    ci_low: float
    ci_high: float
    levels: int  # levels of the effect (product for an interaction; runs for the residual)


@dataclass
class FactorReport:
    designs: list[Design] = field(default_factory=list)
    shares: list[EffectShare] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _level_of(run: Run, factor: str) -> Any:
    return run.replay if factor == REPLAY_FACTOR else run.config.get(factor)


def _sorted_levels(factor: str, values: Sequence[Any]) -> list[Any]:
    """Numbers ascending; replay labels in registry order (:func:`kind_rank`); other categories by their repr."""
    if factor == REPLAY_FACTOR:
        return sorted(values, key=kind_rank)
    return sorted(values) if is_numeric(values) else sorted(values, key=repr)


def build_design(env: str, groups: Sequence[Group]) -> tuple[Design | None, str | None]:
    """The balanced design of one env's groups, or (None, why not)."""
    factors = ([REPLAY_FACTOR] if len({g.replay for g in groups}) > 1 else []) + sorted(
        {k for g in groups for k, _ in g.settings}
    )
    if not factors:
        return None, None
    runs = [r for g in groups for r in g.completed if r.final_return is not None]
    if not runs:  # e.g. runs stopped before their budget (interrupted): their curves are plotted, no shares
        return None, f"{env}: no completed run of {', '.join(factors)}; no variance shares"
    levels = [_sorted_levels(f, list({repr(_level_of(r, f)): _level_of(r, f) for r in runs}.values())) for f in factors]
    cells: dict[tuple, dict[Any, float]] = {}
    for r in runs:
        key = tuple(repr(_level_of(r, f)) for f in factors)
        cells.setdefault(key, {})[r.seed] = r.final_return
    wanted = list(itertools.product(*[[repr(v) for v in lv] for lv in levels]))
    missing = [c for c in wanted if c not in cells]
    if missing:
        return None, f"{env}: not a full factorial of {', '.join(factors)} ({len(missing)} of {len(wanted)} cells " \
                     "have no completed run); no variance shares"  # fmt: skip
    seeds = sorted(set.intersection(*[set(c) for c in cells.values()]), key=repr)
    if len(seeds) < 2:
        return None, f"{env}: fewer than 2 seeds completed in every cell of {', '.join(factors)}; no variance shares"
    y = np.array([[cells[c][s] for s in seeds] for c in wanted], dtype=np.float64)
    y = y.reshape(*[len(lv) for lv in levels], len(seeds))
    dropped = len(runs) - y.size
    return Design(env, factors, levels, seeds, y, dropped), None


def effects(y: np.ndarray, k: int) -> dict[tuple[int, ...], np.ndarray]:
    """η² of every main effect and two-way interaction of a balanced design ``y`` of shape ``(*batch, L_1, ..., L_k,
    R)``: ``{(i,): η²_i, (i, j): η²_ij}``, each with the batch shape (NaN where the total variance is 0)."""
    batch = y.ndim - k - 1
    fac_axes = tuple(batch + i for i in range(k))
    obs_axes = (*fac_axes, y.ndim - 1)

    def mean_over_all_but(keep: tuple[int, ...]) -> np.ndarray:
        return y.mean(axis=tuple(a for i, a in enumerate(fac_axes) if i not in keep) + (y.ndim - 1,), keepdims=True)

    grand = y.mean(axis=obs_axes, keepdims=True)
    total = ((y - grand) ** 2).sum(axis=obs_axes)

    def share(deviation: np.ndarray) -> np.ndarray:
        ss = (np.broadcast_to(deviation, y.shape) ** 2).sum(axis=obs_axes)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(total > 0, ss / np.where(total > 0, total, 1.0), np.nan)

    main = {i: mean_over_all_but((i,)) - grand for i in range(k)}
    out: dict[tuple[int, ...], np.ndarray] = {(i,): share(main[i]) for i in range(k)}
    for i, j in itertools.combinations(range(k), 2):
        out[(i, j)] = share(mean_over_all_but((i, j)) - main[i] - main[j] - grand)
    return out


def bootstrap_effects(design: Design, reps: int, seed: int) -> dict[tuple[int, ...], np.ndarray]:
    """``reps`` η² of every effect from designs whose replicates are resampled with replacement in each cell
    (in chunks of about 2M values, so that 100 seeds × many cells stay small in memory)."""
    rng = np.random.default_rng(seed)
    k, r = len(design.factors), design.y.shape[-1]
    chunk = max(1, min(reps, 2_000_000 // design.y.size))
    parts: list[dict[tuple[int, ...], np.ndarray]] = []
    for done in range(0, reps, chunk):
        idx = rng.integers(0, r, size=(min(chunk, reps - done), *design.y.shape))
        parts.append(effects(np.take_along_axis(np.broadcast_to(design.y, idx.shape), idx, axis=-1), k))
    return {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}


def variance_shares(design: Design, *, reps: int = 10_000, seed: int = 0) -> list[EffectShare]:
    """Each effect's η² with a percentile bootstrap CI, then the residual's share."""
    point = effects(design.y, len(design.factors))
    boot = bootstrap_effects(design, reps, seed)
    shares = []
    for key, value in point.items():
        lo, hi = np.nanpercentile(boot[key], CI_PERCENTILES)
        levels = math.prod(len(design.levels[i]) for i in key)
        name = " × ".join(design.factors[i] for i in key)
        shares.append(EffectShare(design.env, name, float(value), float(lo), float(hi), levels))
    rest = 1.0 - sum(point.values())
    boot_rest = 1.0 - sum(boot.values())
    lo, hi = np.nanpercentile(boot_rest, CI_PERCENTILES)
    shares.append(EffectShare(design.env, "residual", float(rest), float(lo), float(hi), design.y.size))
    return shares


def marginal(design: Design, i: int, reps: int = CI_REPS, seed: int = 0) -> list[tuple[float, float, float]]:
    """(IQM, CI low, CI high) of the final return at each level of factor i: the runs of every cell of the other
    factors pooled, resampled within each cell (a stratified bootstrap over seeds)."""
    return [
        stratified_bootstrap_ci(level.reshape(-1, level.shape[-1]), iqm, reps=reps, seed=seed)  # a stratum per cell
        for level in np.moveaxis(design.y, i, 0)
    ]


def analyse(by_env: dict[str, list[Group]], *, reps: int = 10_000, seed: int = 0) -> FactorReport:
    """Designs and variance shares of every env with at least one factor."""
    report = FactorReport()
    for env, groups in by_env.items():
        design, why = build_design(env, groups)
        if why:
            report.notes.append(why)
        if design is None:
            continue
        report.designs.append(design)
        if np.ptp(design.y) == 0:  # e.g. no run learned: η² is 0/0
            report.notes.append(f"{env}: every run's final return is {format_value(design.y.flat[0])}; "
                                "there is no variance to explain")  # fmt: skip
            continue
        report.shares += variance_shares(design, reps=reps, seed=seed)
        if design.dropped:
            report.notes.append(f"{env}: {design.dropped} completed runs left out to balance the design "
                                f"(seeds kept: {len(design.seeds)})")  # fmt: skip
    return report


def factors_csv(report: FactorReport) -> str:
    """A row per effect share; no CI below :data:`MIN_INTERVAL_SEEDS` seeds per cell."""
    seeds = {d.env: len(d.seeds) for d in report.designs}
    shares = [
        s if seeds.get(s.env, 0) >= MIN_INTERVAL_SEEDS else dataclasses.replace(s, ci_low=math.nan, ci_high=math.nan)
        for s in report.shares
    ]
    return rows_csv(shares, EffectShare)


def factors_markdown(report: FactorReport, final: str = "mean of the last 20 training episodes", made: str = "") -> str:
    """The η² tables; ``final`` says what a run's final return is; ``made``: the commit and command."""
    lines = [
        *heading("# Variance in final return explained by each factor", made),
        "η² = SS_effect / SS_total of a balanced full-factorial ANOVA over the completed runs of each env (final "
        f"return: {final}). Residual: seed-to-seed variance and higher-order "
        "interactions. 95% CI: percentile bootstrap resampling seeds within each cell. A factor with L levels "
        "and no effect still gets η² ≈ (L − 1)/(N − 1) on N runs.",
    ]
    for design in report.designs:
        levels = "; ".join(
            f"{f}: {', '.join(format_value(v) for v in lv)}"
            for f, lv in zip(design.factors, design.levels, strict=True)
        )
        lines += ["", f"## {design.env}", "", f"Design: {design.describe()}; {len(design.seeds)} seeds per cell; "
                  f"levels: {levels}", ""]  # fmt: skip
        shares = [s for s in report.shares if s.env == design.env]
        if not shares:
            lines.append(f"Every run's final return is {format_value(design.y.flat[0])}: no variance to explain.")
        else:
            table = [[s.effect, f"{s.eta_sq:.3f}", _interval(design, s.ci_low, s.ci_high, 3)] for s in shares]
            lines += markdown_table(["effect", "η²", "95% CI"], table, 1)
        lines += _marginal_lines(design)
    if report.notes:
        lines += ["", *[f"Note: {n}" for n in report.notes]]
    return "\n".join(lines) + "\n"


def _marginal_lines(design: Design) -> list[str]:
    """Each factor's final-return IQM at each of its levels, with its 95% CI (``factors_marginal_<env>.png``)."""
    if design.factors == [REPLAY_FACTOR]:
        head = ("Final-return IQM of each replay kind; 95% bootstrap CI resampling seeds (comparisons.md sets each "
                "kind against uniform).")  # fmt: skip
    else:
        head = ("Marginal effect of each factor: final-return IQM at each level, the other factors pooled; 95% "
                "stratified bootstrap CI resampling seeds within each cell.")  # fmt: skip
    table = []
    for i, (factor, levels) in enumerate(zip(design.factors, design.levels, strict=True)):
        for level, (mid, lo, hi) in zip(levels, marginal(design, i), strict=True):
            table.append([factor, format_value(level), f"{mid:.1f}", _interval(design, lo, hi, 1)])
    return ["", head, "", *markdown_table(["factor", "level", "IQM", "95% CI"], table, 2)]


def _interval(design: Design, lo: float, hi: float, digits: int) -> str:
    """``[lo, hi]``, or ``no interval (n = 3)`` below :data:`MIN_INTERVAL_SEEDS` seeds per cell."""
    seeds = len(design.seeds)
    return no_interval(seeds) if seeds < MIN_INTERVAL_SEEDS else f"[{lo:.{digits}f}, {hi:.{digits}f}]"
