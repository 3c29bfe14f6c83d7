"""numpy's reductions over each row of an (S, B) array, compiled: the arithmetic of the per-update measures.

Each kernel gives, row by row, the bits numpy's own reduction gives (pairwise sums, a mean rounded once, NaN
propagates; the tests compare them). Compiled because numpy's per-call cost dominates a small batch's reduction."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)  # no fastmath: the order and the roundings are numpy's
def pairwise_sum(a, n, zero):
    """numpy's sum of ``a[:n]`` in the type of ``zero``: fewer than 8 numbers one after another from zero; up to
    128, 8 running sums after 8 numbers (scalars, not an 8-array: cheaper per call); more, the halves' sums (the
    first half a multiple of 8 long) added."""
    if n < 8:
        total = zero
        for i in range(n):
            total += a[i]
        return total
    if n > 128:
        half = n // 2
        half -= half % 8
        return pairwise_sum(a[:half], half, zero) + pairwise_sum(a[half:], n - half, zero)
    r0, r1, r2, r3, r4, r5, r6, r7 = a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]
    i = 8
    while i < n - n % 8:
        r0 += a[i]
        r1 += a[i + 1]
        r2 += a[i + 2]
        r3 += a[i + 3]
        r4 += a[i + 4]
        r5 += a[i + 5]
        r6 += a[i + 6]
        r7 += a[i + 7]
        i += 8
    total = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        total += a[i]
        i += 1
    return total


@numba.njit(cache=True, nogil=True)
def row_means(x):
    """Each row's mean (S,) of float ``x`` (S, B), in its dtype, as numpy's ``x.mean(axis=1)``."""
    s, b = x.shape
    out = np.empty(s, dtype=x.dtype)
    zero = np.zeros(1, dtype=x.dtype)[0]
    for k in range(s):
        out[k] = pairwise_sum(x[k], b, zero) / b  # (stored: rounded once to the dtype)
    return out


@numba.njit(cache=True, nogil=True)
def row_means64(x):
    """Each row's mean (S,) of ``x`` (S, B) (floats or integers), as numpy's ``x.astype(np.float64).mean(axis=1)``."""
    s, b = x.shape
    out = np.empty(s, dtype=np.float64)
    row = np.empty(b, dtype=np.float64)
    for k in range(s):
        for j in range(b):
            row[j] = x[k, j]
        out[k] = pairwise_sum(row, b, 0.0) / b
    return out


@numba.njit(cache=True, nogil=True)
def row_stds(x):
    """Each row's standard deviation (S,) of float ``x`` (S, B), in its dtype, as numpy's ``x.std(axis=1)``: the
    mean rounded to the dtype, the squared deviations' mean, its square root."""
    s, b = x.shape
    out = np.empty(s, dtype=x.dtype)
    squares = np.empty(b, dtype=x.dtype)
    mean = np.empty(1, dtype=x.dtype)  # (a value rounded to the dtype)
    zero = np.zeros(1, dtype=x.dtype)[0]
    for k in range(s):
        mean[0] = pairwise_sum(x[k], b, zero) / b
        for j in range(b):
            deviation = x[k, j] - mean[0]
            squares[j] = deviation * deviation
        mean[0] = pairwise_sum(squares, b, zero) / b
        out[k] = np.sqrt(mean[0])
    return out


@numba.njit(cache=True, nogil=True)
def sorted_medians(ordered):
    """Each row's median (S,) of float ``ordered`` (S, B), each row sorted by numpy (NaN last), in its dtype, as
    numpy's ``np.median(x, axis=1)`` of the unsorted rows: NaN where a row holds NaN; for even B the two middle
    values' mean (summed from zero, divided by 2)."""
    s, b = ordered.shape
    out = np.empty(s, dtype=ordered.dtype)
    pair = np.zeros(1, dtype=ordered.dtype)
    for k in range(s):
        if np.isnan(ordered[k, b - 1]):
            out[k] = np.nan
        elif b % 2:
            out[k] = ordered[k, b // 2]
        else:
            pair[0] = 0.0
            pair[0] += ordered[k, b // 2 - 1]
            pair[0] += ordered[k, b // 2]
            out[k] = pair[0] / 2
    return out
