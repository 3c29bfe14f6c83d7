"""How far a batch is from independent draws from the memory: the study's i.i.d. measures (docs/metrics.md).

* **State diversity** = (1/d) Σₖ s²ₖ(batch) / σ²ₖ(memory) over the d features varying in the reference: the
  batch's mean pairwise squared standardized distance over its expectation 2d for independent draws (about 1
  for a uniform batch, near 0 for consecutive states). σ²ₖ (ddof 1) comes from ``REFERENCE_SIZE`` uniform draws
  (``memory.reference_obs``); fewer draws bias 1/σ̂² upwards for heavy-tailed features (docs/metrics.md).
* **Episode diversity**: distinct episodes in the batch / min(B, episodes the memory holds).

States of more than ``MAX_RAW_FEATURES`` numbers, or of more than one dimension, are measured on a fixed random
±1 projection to ``PROJECTION_DIM`` features (same seed in every run, so values compare across runs; it keeps
squared distances in expectation). Signs make the float32 products exact for uint8 and bool states (integer
sums below 2²⁴), so identical states project identically whatever the chunking; other dtypes use float64.
"""

from __future__ import annotations

from functools import lru_cache

import numba
import numpy as np

from per_cli.train.measures.reductions import pairwise_sum

MAX_RAW_FEATURES = 64
PROJECTION_DIM = 32
PROJECTION_SEED = 0x11D
REFERENCE_SIZE = 4096
# the reference is drawn this many states at a time, or more where they are small (bounded raw state memory)
REFERENCE_CHUNK = 512
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
    lead = states.shape[: states.ndim - obs_ndim]
    flat = states.reshape(int(np.prod(lead, dtype=np.int64)), -1)
    features = flat.shape[1]
    if obs_ndim == 1 and features <= MAX_RAW_FEATURES:
        return flat.astype(np.float64).reshape(*lead, features)
    dtype = np.float32 if _exact_in_float32(flat) else np.float64
    matrix = _projection(features).astype(dtype, copy=False)
    out = np.empty((len(flat), PROJECTION_DIM), dtype=np.float64)
    chunk = max(1, _CHUNK_BYTES // (np.dtype(dtype).itemsize * features))
    for lo in range(0, len(flat), chunk):
        out[lo : lo + chunk] = flat[lo : lo + chunk].astype(dtype) @ matrix
    out /= np.sqrt(PROJECTION_DIM)
    return out.reshape(*lead, PROJECTION_DIM)


def reference_view(memory, obs_ndim: int, rng: np.random.Generator, n: int = REFERENCE_SIZE) -> np.ndarray:
    """``n`` states drawn uniformly with replacement from ``memory`` (``memory.reference_obs``, with ``rng``),
    as viewed features (n, k), drawn in chunks (the same draws whatever the chunk) so raw image states never
    occupy more than one chunk."""
    first = memory.reference_obs(min(REFERENCE_CHUNK, n), rng)
    views = [state_view(first, obs_ndim)]
    lo = len(first)
    chunk = max(REFERENCE_CHUNK, REFERENCE_CHUNK_BYTES // max(1, first[:1].nbytes))
    while lo < n:
        size = min(chunk, n - lo)
        views.append(state_view(memory.reference_obs(size, rng), obs_ndim))
        lo += size
    return np.concatenate(views)


def reference_variance(reference: np.ndarray) -> np.ndarray:
    """Per-feature ddof-1 variance of a reference sample (n, k), n ≥ 2; NaN where the feature is constant
    (dropped from the measure). Numpy's arithmetic, in one compiled pass (:func:`variance_by_feature`)."""
    if reference.ndim != 2:
        raise ValueError(f"a reference sample is (states, features), got shape {reference.shape}")
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


def state_diversity(batches: np.ndarray, ref_var: np.ndarray) -> np.ndarray:
    """Per batch of ``batches`` (U, B, k) (viewed features), mean over the reference's non-constant features of
    the batch's ddof-1 variance over the reference's: its mean pairwise squared standardized distance over 2d.
    NaN for every batch when the reference has no varying feature."""
    keep = ~np.isnan(ref_var)
    if not keep.any() or batches.shape[1] < 2:  # a batch of one has no variance (preflight.notes says so)
        return np.full(len(batches), np.nan)
    kept = batches[:, :, keep]
    var = (kept - kept[:, :1]).var(axis=1, ddof=1)  # shifted by a member: exactly 0 for identical states
    return (var / ref_var[keep]).mean(axis=1)


def raw_state_diversity(states: np.ndarray, ref_var: np.ndarray) -> np.ndarray:
    """``state_diversity(state_view(states, 1), ref_var)`` for vector states (U, B, k). One rule, by shape and
    dtype: float32 states of fewer than 8 features (classic control), with at least 2 of them varying in the
    reference, in batches of 2 to 128 (:func:`variances_apply`), in one compiled pass with numpy's arithmetic
    (:func:`_raw_diversity`); anything else by numpy's reductions (the tests compare the two)."""
    keep = np.flatnonzero(~np.isnan(ref_var))
    if len(keep) >= 2 and ref_var.dtype == np.float64 and variances_apply(states):
        return _raw_diversity(states, ref_var, keep)
    return state_diversity(state_view(states, 1), ref_var)


def variances_apply(states: np.ndarray) -> bool:
    """Whether :func:`feature_variances` serves vector states ``states`` (U, B, k): C float32, k < 8,
    2 <= B <= 128 (the batches whose logged state diversity came from it: others keep numpy's own, whose
    roundings differ). A static rule: the shape and dtype decide."""
    if states.ndim != 3 or states.dtype != np.float32 or not states.flags.c_contiguous:
        return False
    return states.shape[2] < 8 and 2 <= states.shape[1] <= 128


@numba.njit(cache=True, nogil=True)  # no fastmath: the float64 operations and their order are numpy's
def _raw_diversity(states, ref_var, keep):
    """``state_diversity`` of float32 states (U, B, k), k < 8, B <= 128, with ``keep`` (>= 2) the reference's
    varying features, as numpy computes it: :func:`diversity_from_variances` of :func:`feature_variances`."""
    return diversity_from_variances(feature_variances(states), ref_var, keep)


@numba.njit(cache=True, nogil=True)  # no fastmath: the float64 operations and their order are numpy's
def feature_variances(states):
    """Per batch of float32 states (U, B, k), k < 8, 2 <= B <= 128, each feature's ddof-1 variance over the batch
    (U, k) float64, with ``state_diversity``'s arithmetic (numpy's pairwise sums: :func:`pairwise_sum`). It needs
    no reference, so it is computed per update (``per_cli.train.measures.update_measures``)."""
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


@numba.njit(cache=True, nogil=True)  # no fastmath: the float64 operations and their order are numpy's
def diversity_from_variances(variances, ref_var, keep):
    """State diversity from each batch's feature variances (U, k) (:func:`feature_variances`): the kept
    features' ratios to the reference's variance, summed one after another from zero (numpy's sum of fewer than
    8 numbers), over their count."""
    u = variances.shape[0]
    out = np.empty(u, dtype=np.float64)
    for row in range(u):
        total_ratio = 0.0
        for f in keep:
            total_ratio += variances[row, f] / ref_var[f]
        out[row] = total_ratio / len(keep)
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
