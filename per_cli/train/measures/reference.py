"""State diversity's reference sample, drawn and reduced to its feature variances in one compiled call.

Every ``log.every`` updates a run's update window draws a fresh reference of ``iid.REFERENCE_SIZE`` states
from its memory (:func:`per_cli.train.measures.iid.reference_view`: ``memory.reference_obs`` with the window's own
generator, viewed as float64) and keeps only their per-feature variance (:func:`iid.reference_variance`). For a
plain ring of vector states that is ~15 numpy calls and three 4,096-row temporaries per refresh, ~10% of a
cohort's logging. :func:`drawn_reference_variance` computes the same numbers in one call: each index is the
bounded draw numpy's ``Generator.integers`` makes (``choice.bounded`` on the generator's own ``next_uint32``,
so the generator's state advances as under numpy), the states are gathered as float64 and the variance is
:func:`iid.variance_by_feature`'s. Fail closed: :func:`integers_usable` checks the draws against numpy once
per process, and any other memory, state shape or failed check takes the numpy path.
"""

from __future__ import annotations

from functools import lru_cache

import numba
import numpy as np

from per_cli.replay.choice import AVAILABLE, bounded
from per_cli.replay.storage.ring import TransitionStorage
from per_cli.train.measures.iid import (
    MAX_RAW_FEATURES,
    REFERENCE_SIZE,
    exact_variance_usable,
    reference_variance,
    reference_view,
    variance_by_feature,
)


def drawn_reference_variance(memory, obs_ndim: int, rng: np.random.Generator, n: int = REFERENCE_SIZE) -> np.ndarray:
    """``reference_variance(reference_view(memory, obs_ndim, rng, n))``: the same values and the same state of
    ``rng`` after, in one compiled call where :func:`compiled_applies`."""
    if compiled_applies(memory, obs_ndim, n):
        storage = memory.storage
        oldest = storage.oldest_sampleable_id()
        scratch = np.empty((n, storage.obs.shape[1]), dtype=np.float64)
        return _reference_kernel(rng, storage.obs, oldest, storage.added - 1 - oldest, scratch)
    return reference_variance(reference_view(memory, obs_ndim, rng, n))


def compiled_applies(memory, obs_ndim: int, n: int) -> bool:
    """Whether :func:`drawn_reference_variance` draws this reference in its compiled call: a plain ring of
    vector states of 2 to ``MAX_RAW_FEATURES`` numbers (used as they are, not projected), holding something,
    with fewer than 2³² - 1 sampleable ids; n ≥ 2; the draws and the variance checked against numpy."""
    storage = getattr(memory, "storage", None)
    if type(storage) is not TransitionStorage or obs_ndim != 1 or storage.obs.ndim != 2 or n < 2:
        return False
    held = storage.added - storage.oldest_sampleable_id()
    features_ok = 2 <= storage.obs.shape[1] <= MAX_RAW_FEATURES
    return features_ok and 0 < held < 2**32 - 1 and integers_usable() and exact_variance_usable()


@numba.njit(cache=True, nogil=True)
def _fill_integers(rng, low, span, out):
    """``out[:] = rng.integers(low, low + span + 1, size=len(out))`` (int64): numpy's bounded fill for a range
    below 2³² - 1, one Lemire draw per value (none when ``span`` is 0)."""
    bitgen = rng.bit_generator
    for j in range(out.shape[0]):
        out[j] = low + np.int64(bounded(bitgen, span))


@numba.njit(cache=True, nogil=True)
def _reference_kernel(rng, obs, oldest, span, scratch):
    """``len(scratch)`` ids drawn uniformly from ``oldest .. oldest + span`` (:func:`_fill_integers`, the draw
    :func:`integers_usable` checks); their states (slot = id % capacity) as float64 rows of ``scratch``; their
    per-feature variance (``variance_by_feature``)."""
    ids = np.empty(scratch.shape[0], dtype=np.int64)
    _fill_integers(rng, oldest, span, ids)
    capacity, width = obs.shape
    for j in range(scratch.shape[0]):
        slot = ids[j] % capacity
        for f in range(width):
            scratch[j, f] = np.float64(obs[slot, f])
    return variance_by_feature(scratch)


@lru_cache(maxsize=1)
def integers_usable() -> bool:
    """Whether :func:`_fill_integers` draws what this numpy's ``Generator.integers(low, high, size)`` draws (same
    values, same generator state after; ranges of 1, 2, 10⁴ and 2³¹, after a 32-bit draw left a buffered half
    word), checked once per process. Fail closed: else the reference is drawn by numpy."""
    if not AVAILABLE:
        return False
    for seed, low, high, size in ((0, 5, 6, 3), (1, 0, 2, 64), (2, 1_000, 11_000, 4_096), (3, 7, 2**31 + 7, 257)):
        ours, theirs = np.random.default_rng(seed), np.random.default_rng(seed)
        ours.integers(7, dtype=np.uint32), theirs.integers(7, dtype=np.uint32)
        got = np.empty(size, dtype=np.int64)
        _fill_integers(ours, low, high - 1 - low, got)
        want = theirs.integers(low, high, size=size)
        if not np.array_equal(got, want) or ours.bit_generator.state != theirs.bit_generator.state:
            return False
    return True
