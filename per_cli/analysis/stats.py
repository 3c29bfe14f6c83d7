"""Interval estimates over a few seeds (Agarwal et al. 2021, "Deep RL at the Edge of the Statistical Precipice")."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

DEFAULT_REPS = 10_000
MIN_INTERVAL_SEEDS = 5  # fewer seeds in a group: no bootstrap interval, only the point and the n
_TAIL = (1.0 - 0.95) / 2 * 100  # percent of the bootstrap values below a 95% interval, and above it
CI_PERCENTILES = [_TAIL, 100 - _TAIL]  # the bounds of every percentile bootstrap interval


def iqm(scores: np.ndarray, axis: int = -1) -> np.ndarray | float:
    """Interquartile mean along ``axis`` (NaN for no scores)."""
    x = np.sort(np.asarray(scores, dtype=np.float64), axis=axis)
    n = x.shape[axis]
    if n == 0:
        return np.nan if x.ndim == 1 else np.full(np.delete(x.shape, axis % x.ndim), np.nan)
    cut = n // 4
    middle = np.take(x, np.arange(cut, n - cut), axis=axis)
    result = middle.mean(axis=axis)
    return float(result) if np.ndim(result) == 0 else result


def stratified_bootstrap_ci(
    strata: Sequence[np.ndarray],
    statistic: Callable[..., np.ndarray] = iqm,
    *,
    reps: int = DEFAULT_REPS,
    seed: int = 0,
) -> tuple[float, float, float]:
    """(point estimate, CI low, CI high) of ``statistic`` (reducing the last axis) over the scores of all strata;
    each bootstrap sample resamples every stratum with replacement."""
    strata = [np.asarray(s, dtype=np.float64).ravel() for s in strata]
    strata = [s for s in strata if len(s)]
    if not strata:
        return (np.nan, np.nan, np.nan)
    point = float(statistic(np.concatenate(strata), axis=-1))
    rng = np.random.default_rng(seed)
    samples = np.concatenate([s[rng.integers(0, len(s), size=(reps, len(s)))] for s in strata], axis=1)
    lo, hi = np.percentile(statistic(samples, axis=-1), CI_PERCENTILES)
    return point, float(lo), float(hi)


def interval(scores: Sequence[float], statistic: Callable[..., np.ndarray] = iqm, *, reps: int = DEFAULT_REPS,
             seed: int = 0) -> tuple[float, float, float]:  # fmt: skip
    """(point, CI low, CI high) of one group's ``scores``: the CI NaN below :data:`MIN_INTERVAL_SEEDS` scores (a
    percentile bootstrap of 3 runs is degenerate), everything NaN for none."""
    scores = np.asarray(scores, dtype=np.float64)
    if len(scores) == 0:
        return np.nan, np.nan, np.nan
    if len(scores) < MIN_INTERVAL_SEEDS:
        return float(statistic(scores, axis=-1)), np.nan, np.nan
    return stratified_bootstrap_ci([scores], statistic, reps=reps, seed=seed)


def mean_band(curves: np.ndarray, *, reps: int = 2_000, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean and bootstrap CI of the mean across seeds at each grid point of ``curves`` (seeds, points), NaN where a
    seed has no value; the band is NaN where fewer than two seeds are present."""
    curves = np.atleast_2d(np.asarray(curves, dtype=np.float64))
    present = ~np.isnan(curves)
    count = present.sum(axis=0)
    mean = np.full(curves.shape[1], np.nan)
    np.divide(np.where(present, curves, 0.0).sum(axis=0), count, out=mean, where=count > 0)
    lo = np.full_like(mean, np.nan)
    hi = np.full_like(mean, np.nan)
    rng = np.random.default_rng(seed)
    # points covered by the same seeds share their resamples, each drawn as multinomial counts per seed: the means
    # are one matrix product, in (reps × seeds) + (reps × points) memory, not (reps × seeds × points)
    patterns, which = np.unique(present.T, axis=0, return_inverse=True)
    for p, pattern in enumerate(patterns):
        seeds = np.flatnonzero(pattern)
        if len(seeds) < 2:
            continue
        cols = np.flatnonzero(which.ravel() == p)
        values = curves[np.ix_(seeds, cols)]  # (k, points)
        counts = rng.multinomial(len(seeds), np.full(len(seeds), 1.0 / len(seeds)), size=reps)
        means = counts @ values / len(seeds)  # (reps, points)
        lo[cols], hi[cols] = np.percentile(means, CI_PERCENTILES, axis=0)
    return mean, lo, hi


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rank correlation of paired samples (ties: average ranks); NaN for fewer than 3 pairs or a
    constant side."""
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return np.nan
    from scipy.stats import spearmanr

    return float(spearmanr(x, y).statistic)


def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm-adjusted p of a family, in the given order: with the m finite p sorted ascending, the k-th adjusted
    p is max over j <= k of min(1, (m - j + 1) * p_(j)). NaN p (tests not run) stay NaN and do not count in m."""
    p = np.asarray(pvalues, dtype=np.float64).ravel()
    out = np.full(len(p), np.nan)
    finite = np.flatnonzero(np.isfinite(p))
    m = len(finite)
    if m == 0:
        return out
    order = finite[np.argsort(p[finite], kind="stable")]
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    out[order] = np.maximum.accumulate(scaled)
    return out


def smallest_p(n1: int, n2: int) -> float:
    """The smallest two-sided p an exact Mann–Whitney test of ``n1`` against ``n2`` scores can reach: every
    score of one group above every score of the other, 2 / C(n1 + n2, n1) (at most 1)."""
    if n1 < 1 or n2 < 1:
        return np.nan
    return min(1.0, 2.0 / math.comb(n1 + n2, n1))
