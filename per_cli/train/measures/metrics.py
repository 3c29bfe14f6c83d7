"""What the study measures about each update and each episode.

* TD-error statistics of |δ| over the sampled batch (the δ that updates priorities), and the unweighted TD
  loss: the mean of the engine's per-sample losses without IS weights (``UpdateResults.losses``, as the update's
  value counts them: for PAL divided by its λ), so that prioritized and unprioritized kinds compare. The measures
  read δ and the losses from the engine's result; the TD target and the loss are the engines' alone.
* Correlation count: the number of pairs i < j of sampled states whose Pearson correlation |r| exceeds a
  threshold (the seed notebook's i.i.d.-ness measure, kept as the notebook defines it; it is blind to
  dependence in time, see docs/metrics.md). States are flattened; a constant state has no defined
  correlation and counts as uncorrelated.
* The i.i.d. measures that do separate consecutive from independent batches: state diversity and episode
  diversity (``per_cli.train.measures.iid``).
* Sample age: transitions added since each sampled one, averaged over the batch.
"""

from __future__ import annotations

from collections import defaultdict

import numba
import numpy as np

from per_cli.train.measures.iid import pairwise_sum


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

    def add(self, values: dict[str, float]) -> None:
        for key, value in values.items():
            self._sums[key] += value
            self._counts[key] += 1

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

    def __bool__(self) -> bool:
        return bool(self._counts)

    def state_dict(self) -> dict[str, dict]:
        """The sums and counts by name (copies, in the order the names came: ``pop``'s order)."""
        return {"sums": dict(self._sums), "counts": dict(self._counts)}

    @classmethod
    def from_state_dict(cls, state: dict[str, dict]) -> RunningMeans:
        means = cls()
        means._sums.update(state["sums"])
        means._counts.update(state["counts"])
        return means


# the per-update TD measures by their tags, in the order :func:`_td_kernel` returns them (:func:`td_measures`' keys)
TD_TAGS = (
    "td_error/mean", "td_error/median", "td_error/max", "td_error/std", "losses/td_loss_unweighted",
    "replay/is_weight_mean",
)  # fmt: skip


def td_measures(raw_td: np.ndarray, losses: np.ndarray, weights: np.ndarray) -> dict[str, np.ndarray]:
    """Per update (row) of the TD errors ``raw_td`` (U, B), the engine's per-sample losses without IS weights
    ``losses`` (U, B) and the IS ``weights`` (U, B), by tag (:data:`TD_TAGS`): |δ|'s mean, median, max and std,
    the unweighted TD loss (the losses' mean, in float64) and the weights' mean. Rows that :func:`exact_td` accepts
    go through one compiled pass (:func:`_td_kernel`), others through numpy's reductions: the same arithmetic (the
    tests compare them)."""
    if exact_td(raw_td, losses, weights):
        ordered = np.abs(raw_td)
        ordered.sort(axis=1)  # numpy's sort, in place
        return dict(zip(TD_TAGS, _td_kernel(raw_td, ordered, losses, weights), strict=True))
    return _numpy_td_measures(raw_td, losses, weights)


def exact_td(raw_td: np.ndarray, losses: np.ndarray, weights: np.ndarray) -> bool:
    """Whether :func:`td_measures` computes these rows in its compiled pass (each row's values its own): C float32
    TD errors, losses and weights of one shape (U, B), B <= 128 (:func:`~per_cli.train.measures.iid.pairwise_sum`'s
    rows). Shapes and dtypes decide."""
    exact = raw_td.ndim == 2 and raw_td.dtype == np.float32 and raw_td.flags.c_contiguous and raw_td.shape[1] <= 128
    return exact and all(
        a.dtype == np.float32 and a.flags.c_contiguous and a.shape == raw_td.shape for a in (losses, weights)
    )


def _numpy_td_measures(raw_td: np.ndarray, losses: np.ndarray, weights: np.ndarray) -> dict[str, np.ndarray]:
    td = np.abs(raw_td)
    values = (td.mean(axis=1), np.median(td, axis=1), td.max(axis=1), td.std(axis=1),
              np.asarray(losses, dtype=np.float64).mean(axis=1), weights.mean(axis=1))  # fmt: skip
    return dict(zip(TD_TAGS, values, strict=True))


@numba.njit(cache=True, nogil=True)  # no fastmath: NaN, the float32 roundings and the order are numpy's
def _td_kernel(raw_td, ordered, losses, weights):
    """``_numpy_td_measures`` for float32 (U, B), B <= 128, with numpy's arithmetic: pairwise float32 sums
    (:func:`pairwise_sum`), means as float32(float64(sum) / B), the median from ``ordered`` (each row of |δ|
    sorted), NaN propagated; the unweighted loss the float64 mean of ``losses``. Returns :data:`TD_TAGS`' values, in
    its order."""
    u, b = raw_td.shape
    mean, median, top = np.empty(u, np.float32), np.empty(u, np.float32), np.empty(u, np.float32)
    std, weight_mean = np.empty(u, np.float32), np.empty(u, np.float32)
    unweighted = np.empty(u, np.float64)
    td, squares, wide = np.empty(b, np.float32), np.empty(b, np.float32), np.empty(b, np.float64)
    zero32 = np.float32(0.0)
    for k in range(u):
        nan = False
        largest = zero32
        for j in range(b):
            value = abs(raw_td[k, j])
            td[j] = value
            nan = nan or np.isnan(value)
            largest = max(largest, value)
            wide[j] = np.float64(losses[k, j])
        m = np.float32(np.float64(pairwise_sum(td, b, zero32)) / b)
        mean[k] = m
        for j in range(b):
            x = td[j] - m
            squares[j] = x * x
        std[k] = np.sqrt(np.float32(np.float64(pairwise_sum(squares, b, zero32)) / b))
        unweighted[k] = pairwise_sum(wide, b, 0.0) / b
        weight_mean[k] = np.float32(np.float64(pairwise_sum(weights[k], b, zero32)) / b)
        if nan:
            top[k], median[k] = np.nan, np.nan
            continue
        top[k] = largest
        if b % 2:
            median[k] = ordered[k, b // 2]
        else:
            median[k] = np.float32(np.float64((zero32 + ordered[k, b // 2 - 1]) + ordered[k, b // 2]) / 2)
    return mean, median, top, std, unweighted, weight_mean  # (TD_TAGS' order)


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
