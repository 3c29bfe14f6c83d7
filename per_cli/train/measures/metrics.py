"""The notebook's correlation count, and the running means of logged scalars.

The correlation count is the number of pairs i < j of sampled states whose Pearson |r| exceeds a threshold, kept
as the seed notebook defines it (blind to dependence in time: docs/metrics.md); a constant state counts as
uncorrelated. The per-update measures are ``update_measures.MEASURES``; the i.i.d. measures are ``iid``'s."""

from __future__ import annotations

from collections import defaultdict

import numba
import numpy as np


def correlation_count(states: np.ndarray, threshold: float = 0.8) -> int:
    """Pairs i < j of rows of ``states`` (flattened) with |Pearson r| > ``threshold``."""
    return int(batched_correlation_counts(states[None], threshold)[0])


def totals(values: dict[str, np.ndarray]) -> dict[str, tuple[float, int]]:
    """(sum, count) of each array of per-update ``values``."""
    add = np.add.reduce  # np.sum's own reduction, without its Python dispatch
    return {key: (float(add(array, axis=None)), len(array)) for key, array in values.items()}


class RunningMeans:
    """Sums of named scalars since the last ``pop``; ``pop`` returns their means and starts over. ``state_dict``
    gives the sums and counts as plain dicts; ``from_state_dict`` rebuilds the same means."""

    def __init__(self) -> None:
        self._sums: dict[str, float] = defaultdict(float)
        self._counts: dict[str, int] = defaultdict(int)

    def add_totals(self, sums: dict[str, tuple[float, int]]) -> None:
        """Add ``totals(values)``: computed once when several means take the same values."""
        for key, (total, count) in sums.items():
            self._sums[key] += total
            self._counts[key] += count

    def pop(self) -> dict[str, float]:
        means = {k: self._sums[k] / self._counts[k] for k in self._sums}
        self._sums.clear()
        self._counts.clear()
        return means

    def state_dict(self) -> dict[str, dict]:
        """The sums and counts by name (copies, in the order the names came: ``pop``'s order)."""
        return {"sums": dict(self._sums), "counts": dict(self._counts)}

    @classmethod
    def from_state_dict(cls, state: dict[str, dict]) -> RunningMeans:
        means = cls()
        means._sums.update(state["sums"])
        means._counts.update(state["counts"])
        return means


# states are processed this many bytes (as float32) at a time: bounded memory for image batches
_CHUNK_BYTES = 16 << 20


def batched_correlation_counts(states: np.ndarray, threshold: float) -> np.ndarray:
    """``correlation_count`` for each batch in ``states`` of shape (U, B, ...) at once: centred flattened
    states, their Gram matrix, scaled by the inverse norms into correlations (:func:`_count_above`). A constant
    state centres to exactly zero, so its correlations are 0: uncorrelated, no division by zero."""
    u, b = states.shape[:2]
    flat = states.reshape(u, b, -1)
    chunk = max(1, _CHUNK_BYTES // (4 * b * flat.shape[2]))
    above = np.float32(threshold)
    if u <= chunk:  # (one chunk, as every vector state's update is: no slicing)
        return _count_above(gram(_centred(flat)), above)
    counts = np.empty(u, dtype=np.int64)
    for lo in range(0, u, chunk):
        counts[lo : lo + chunk] = _count_above(gram(_centred(flat[lo : lo + chunk])), above)
    return counts


def _centred(flat: np.ndarray) -> np.ndarray:
    """Flattened states (U, B, d) as float32, each state minus its mean (accumulated in float64, rounded to
    float32): by :func:`_centred_short_rows` for d < 8, else by numpy in a copy."""
    if flat.shape[2] < _SHORT_ROW:
        return _centred_short_rows(np.ascontiguousarray(flat, dtype=np.float32))
    x = flat.astype(np.float32)  # a copy, centred in place
    x -= x.mean(axis=2, keepdims=True, dtype=np.float64).astype(np.float32)
    return x


def gram(x: np.ndarray) -> np.ndarray:
    """The Gram matrices ``x xᵀ`` of float32 ``x`` (U, B, d), by BLAS: short rows (d < 8) times a contiguous
    copy of the transpose (an ``sgemm`` rather than numpy's ``ssyrk``), longer ones by numpy's own product.
    Both equal to float32 rounding (the tests compare them)."""
    if x.shape[2] < _SHORT_ROW:
        return x @ np.ascontiguousarray(x.transpose(0, 2, 1))
    return x @ x.transpose(0, 2, 1)


# numpy adds fewer than 8 numbers one after another (its pairwise summation starts at 8): a compiled loop
# reproduces such a row's float64 mean exactly; longer rows (images) are centred by numpy itself
_SHORT_ROW = 8


@numba.njit(cache=True, nogil=True)
def _centred_short_rows(x):
    """``x - x.mean(axis=2, dtype=float64).astype(float32)`` for rows of fewer than 8 numbers, as numpy
    computes it (left-to-right float64 sum, divided by the count, rounded to float32), in one pass."""
    out = np.empty_like(x)
    u, b, d = x.shape
    for k in range(u):
        for i in range(b):
            total = np.float64(x[k, i, 0])
            for f in range(1, d):
                total += np.float64(x[k, i, f])
            mean = np.float32(total / d)
            for f in range(d):
                out[k, i, f] = x[k, i, f] - mean
    return out


@numba.njit(cache=True, nogil=True)  # no fastmath: NaN comparisons and the float32 rounding must stay IEEE's
def _count_above(gram, threshold):
    """Per Gram matrix G of ``gram`` (U, B, B) float32: pairs i < j with |G_ij · s_i · s_j| > ``threshold``
    (float32), s_i = 1/√G_ii (float32), 0 where G_ii is not positive (a constant state). Each row is counted
    over all its columns with j > i in the condition: a branch-free loop that LLVM vectorizes."""
    u, b = gram.shape[0], gram.shape[1]
    counts = np.empty(u, dtype=np.int64)
    inv = np.empty(b, dtype=np.float32)
    one, zero = np.float32(1.0), np.float32(0.0)
    hit, miss = np.int32(1), np.int32(0)
    for k in range(u):
        for i in range(b):
            d = gram[k, i, i]
            inv[i] = one / np.sqrt(d) if d > zero else zero
        c = 0
        for i in range(b):
            row, s_i = gram[k, i], inv[i]
            in_row = miss
            for j in range(b):
                in_row += hit if (abs(row[j] * s_i * inv[j]) > threshold) and j > i else miss
            c += in_row
        counts[k] = c
    return counts
