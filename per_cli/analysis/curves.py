"""Curves of logged scalars: deduplicated, smoothed, put on a common step grid, cut where too few runs remain, and
the first step at which they reach a threshold."""

from __future__ import annotations

import math

import numpy as np


def dedup_steps(steps: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique steps, averaging values logged at the same step (a burst of updates at one env step)."""
    keep = np.isfinite(values)
    steps, values = steps[keep], values[keep]
    order = np.argsort(steps, kind="stable")
    steps, values = steps[order], values[order]
    unique, start = np.unique(steps, return_index=True)
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


def enough_runs(curves: np.ndarray, fraction: float = 0.5) -> np.ndarray:
    """Per grid point, whether at least ``fraction`` of the group's runs (rows of ``curves``, NaN where a run has no
    value) are present: a tail drawn over the few runs that ended last would be biased."""
    curves = np.atleast_2d(np.asarray(curves, dtype=np.float64))
    return np.isfinite(curves).sum(axis=0) >= fraction * curves.shape[0]
