"""How far a batch is from independent draws from the memory: the study's i.i.d. measures (docs/metrics.md).

State diversity is the batch's per-feature variance (:func:`batch_variances`) over the memory's, from a uniform
reference sample (:func:`variance_by_feature`): about 1 for a uniform batch, near 0 for consecutive states. Episode
diversity is distinct episodes in the batch / min(B, episodes held). Large or multi-dimensional states are measured
on a fixed ±1 projection (one seed, so values compare across runs), whose signs keep uint8 and bool products exact."""

from __future__ import annotations

from functools import lru_cache

import numba
import numpy as np

from per_cli.train.measures.reductions import pairwise_sum

MAX_RAW_FEATURES = 64
PROJECTION_DIM = 32
PROJECTION_SEED = 0x11D
REFERENCE_SIZE = 4096
# the reference's states are read this many bytes at a time (bounded raw state memory for image states)
REFERENCE_CHUNK_BYTES = 14 << 20
# flattened states are projected this many bytes (as float32) at a time: bounded memory for image batches
_CHUNK_BYTES = 16 << 20


@lru_cache(maxsize=4)
def _projection(features: int) -> np.ndarray:
    """The fixed ±1 matrix (features, PROJECTION_DIM), float32; scaled by 1/√k after the product."""
    rng = np.random.default_rng(PROJECTION_SEED)
    matrix = np.where(rng.random((features, PROJECTION_DIM)) < 0.5, -1.0, 1.0).astype(np.float32)
    matrix.setflags(write=False)
    return matrix


def _exact_in_float32(flat: np.ndarray) -> bool:
    """True when every ±1-weighted sum of a row is an integer below 2²⁴, so float32 computes it exactly."""
    if flat.dtype == np.bool_:
        bound = 1
    elif flat.dtype.kind in "iu" and flat.dtype.itemsize == 1:
        bound = 255
    else:
        return False
    return flat.shape[1] * bound < 2**24


def state_view(states: np.ndarray, obs_ndim: int) -> np.ndarray:
    """The features that state diversity is computed on, in float64: shape (..., k) for states (..., *obs).

    Vector states of at most ``MAX_RAW_FEATURES`` numbers are used as they are; anything else is flattened and
    projected by the fixed sign matrix, in chunks of at most 16 MiB of converted states.
    """
    if obs_ndim == 1 and states.shape[-1] <= MAX_RAW_FEATURES:
        return states.astype(np.float64, order="C")
    lead = states.shape[: states.ndim - obs_ndim]
    flat = states.reshape(int(np.prod(lead, dtype=np.int64)), -1)
    features = flat.shape[1]
    dtype = np.float32 if _exact_in_float32(flat) else np.float64
    matrix = _projection(features).astype(dtype, copy=False)
    out = np.empty((len(flat), PROJECTION_DIM), dtype=np.float64)
    chunk = max(1, _CHUNK_BYTES // (np.dtype(dtype).itemsize * features))
    for lo in range(0, len(flat), chunk):
        out[lo : lo + chunk] = flat[lo : lo + chunk].astype(dtype) @ matrix
    out /= np.sqrt(PROJECTION_DIM)
    return out.reshape(*lead, PROJECTION_DIM)


def reference_variance(reference: np.ndarray) -> np.ndarray:
    """Per-feature ddof-1 variance of a reference sample (n, k), n ≥ 2; NaN where the feature is constant
    (dropped from the measure). Numpy's arithmetic, in one compiled pass (:func:`variance_by_feature`)."""
    if len(reference) < 2:
        raise ValueError(f"a reference sample needs at least 2 states, got {len(reference)}")
    return variance_by_feature(np.ascontiguousarray(reference, dtype=np.float64))


@numba.njit(cache=True, nogil=True)  # no fastmath: the float64 operations and their order are numpy's
def variance_by_feature(reference):
    """Per-feature ddof-1 variance of a C float64 array (n, k), n >= 2, as numpy's ``var(axis=0, ddof=1)``
    computes it for k >= 2 (numpy reduces over the rows of such an array one row after another): per feature,
    the sum of the values in row order over n, then the squared deviations summed in row order over n - 1.
    NaN where every value equals the first (``np.ptp == 0``; a feature holding NaN or ±inf comes out NaN)."""
    n, k = reference.shape
    totals = np.zeros(k, dtype=np.float64)
    for i in range(n):
        row = reference[i]
        for f in range(k):
            totals[f] += row[f]
    means = totals / n
    squares = np.zeros(k, dtype=np.float64)
    for i in range(n):
        row = reference[i]
        for f in range(k):
            deviation = row[f] - means[f]
            squares[f] += deviation * deviation
    out = np.empty(k, dtype=np.float64)
    for f in range(k):
        first, i = reference[0, f], 1
        while i < n and reference[i, f] == first:  # (a varying feature stops at its first other value)
            i += 1
        out[f] = np.nan if i == n else squares[f] / (n - 1)
    return out


def batch_variances(views: np.ndarray) -> np.ndarray:
    """Each batch's per-feature ddof-1 variance (U, k), float64, of viewed states ``views`` (U, B, k) (any real
    dtype; :func:`state_view` gives float64): :func:`feature_variances`, the one implementation for every shape.
    NaN for batches of one (no variance: state diversity stays blank, as ``preflight.notes`` says)."""
    if views.shape[1] < 2:
        return np.full((views.shape[0], views.shape[2]), np.nan)
    return feature_variances(np.ascontiguousarray(views))


def state_diversity(variances: np.ndarray, ref_var: np.ndarray) -> np.ndarray:
    """Per batch, from its feature variances ``variances`` (U, k) (:func:`batch_variances`), the mean over the
    reference's non-constant features of the batch's variance over the reference's (:func:`diversity_from_variances`):
    its mean pairwise squared standardized distance over 2d. NaN for every batch when the reference has no
    varying feature."""
    ref_var = np.asarray(ref_var, dtype=np.float64)
    keep = np.flatnonzero(~np.isnan(ref_var))
    if not len(keep):
        return np.full(len(variances), np.nan)
    return diversity_from_variances(np.ascontiguousarray(variances, dtype=np.float64), ref_var, keep)


@numba.njit(cache=True, nogil=True)  # no fastmath: the float64 operations and their order are fixed (below)
def feature_variances(states):
    """Per batch of real states (U, B, k), B >= 2, each feature's ddof-1 variance over the batch, (U, k) float64.

    Values are shifted by the batch's first (identical states give exactly 0) and summed in numpy's pairwise order
    (:func:`pairwise_sum`), so small batches give numpy's ``var(axis=1, ddof=1)`` bits. Needs no reference."""
    u, b, k = states.shape
    out = np.empty((u, k), dtype=np.float64)
    shifted = np.empty(b, dtype=np.float64)
    squares = np.empty(b, dtype=np.float64)
    for row in range(u):
        for f in range(k):
            first = np.float64(states[row, 0, f])
            for i in range(b):
                shifted[i] = np.float64(states[row, i, f]) - first
            mean = pairwise_sum(shifted, b, 0.0) / b
            for i in range(b):
                deviation = shifted[i] - mean
                squares[i] = deviation * deviation
            out[row, f] = pairwise_sum(squares, b, 0.0) / (b - 1)
    return out


@numba.njit(cache=True, nogil=True)  # no fastmath: the float64 operations and their order are fixed (below)
def diversity_from_variances(variances, ref_var, keep):
    """State diversity from each batch's feature variances (U, k) (:func:`feature_variances`): the kept
    features' (``keep``, at least one) ratios to the reference's variance, their :func:`pairwise_sum` (fewer than
    8 added one after another from zero, as numpy's mean sums them), over their count."""
    u, d = variances.shape[0], keep.shape[0]
    out = np.empty(u, dtype=np.float64)
    ratios = np.empty(d, dtype=np.float64)
    for row in range(u):
        for j in range(d):
            ratios[j] = variances[row, keep[j]] / ref_var[keep[j]]
        out[row] = pairwise_sum(ratios, d, 0.0) / d
    return out


def episode_diversity(episodes: np.ndarray, held: np.ndarray) -> np.ndarray:
    """Distinct episode ids per row of ``episodes`` (U, B) over min(B, ``held``[u]) (episodes in memory then; 0
    and below count as 1), float64. Integer ids and counts are taken as int64 (exact)."""
    return _episode_diversity(np.ascontiguousarray(episodes, dtype=np.int64), np.asarray(held, dtype=np.int64))


@numba.njit(cache=True, nogil=True)
def _episode_diversity(episodes, held):
    """Distinct ids per row, marked in a table over the row's id range (by sorting where the range is wide), over
    the row's min(B, max(held, 1)): one float64 division of integers."""
    u, b = episodes.shape
    out = np.empty(u, dtype=np.float64)
    seen = np.zeros(4096, dtype=np.bool_)
    for row in range(u):
        ids = episodes[row]
        low, high = ids.min(), ids.max()
        if high - low < seen.shape[0]:
            distinct = 0
            for i in range(b):
                if not seen[ids[i] - low]:
                    seen[ids[i] - low] = True
                    distinct += 1
            for i in range(b):
                seen[ids[i] - low] = False
        else:
            ordered = np.sort(ids)
            distinct = 1
            for i in range(1, b):
                distinct += ordered[i] != ordered[i - 1]
        out[row] = distinct / min(b, max(held[row], 1))
    return out
