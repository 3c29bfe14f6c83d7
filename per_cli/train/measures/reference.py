"""State diversity's reference sample, drawn and reduced to its feature variances in one compiled call.

For a plain ring of vector states (:func:`compiled_applies`) each id is ``rng.integers(oldest, newest + 1)`` on
numba's ``Generator`` (:func:`_fill_ids`, the definition of these draws, solo and in a cohort), the states are
gathered as float64 and reduced by :func:`iid.variance_by_feature`. Any other memory is drawn by its own
``memory.reference_obs`` and viewed by :func:`iid.reference_view`.
"""

from __future__ import annotations

import numba
import numpy as np

from per_cli.replay.storage.ring import TransitionStorage
from per_cli.train.measures.iid import (
    MAX_RAW_FEATURES,
    REFERENCE_SIZE,
    reference_variance,
    reference_view,
    variance_by_feature,
)


def drawn_reference_variance(memory, obs_ndim: int, rng: np.random.Generator, n: int = REFERENCE_SIZE) -> np.ndarray:
    """The per-feature ddof-1 variance (NaN where constant) of ``n`` states drawn uniformly with replacement from
    ``memory`` with ``rng``: in one compiled call where :func:`compiled_applies`, else
    ``reference_variance(reference_view(memory, obs_ndim, rng, n))``."""
    if compiled_applies(memory, obs_ndim, n):
        storage = memory.storage
        oldest = storage.oldest_sampleable_id()
        scratch = np.empty((n, storage.obs.shape[1]), dtype=np.float64)
        return _reference_kernel(rng, storage.obs, oldest, storage.added - 1 - oldest, scratch)
    return reference_variance(reference_view(memory, obs_ndim, rng, n))


def compiled_applies(memory, obs_ndim: int, n: int) -> bool:
    """Whether :func:`drawn_reference_variance` draws this reference in its compiled call: a plain ring of
    vector states of at most ``MAX_RAW_FEATURES`` numbers (not projected), holding something; n ≥ 2."""
    storage = getattr(memory, "storage", None)
    if type(storage) is not TransitionStorage or obs_ndim != 1 or storage.obs.ndim != 2 or n < 2:
        return False
    held = storage.added - storage.oldest_sampleable_id()
    return 1 <= storage.obs.shape[1] <= MAX_RAW_FEATURES and held > 0


@numba.njit(cache=True, nogil=True)
def _fill_ids(rng, low, span, out):
    """``out[j] = rng.integers(low, low + span + 1)`` for each j, in order: ``len(out)`` ids drawn uniformly
    from ``low .. low + span`` on ``rng`` (numba's ``Generator.integers``)."""
    for j in range(out.shape[0]):
        out[j] = rng.integers(low, low + span + 1)


@numba.njit(cache=True, nogil=True)
def _reference_kernel(rng, obs, oldest, span, scratch):
    """``len(scratch)`` ids drawn uniformly from ``oldest .. oldest + span`` (:func:`_fill_ids`); their states
    (slot = id % capacity) as float64 rows of ``scratch``; their per-feature variance (``variance_by_feature``)."""
    ids = np.empty(scratch.shape[0], dtype=np.int64)
    _fill_ids(rng, oldest, span, ids)
    capacity, width = obs.shape
    for j in range(scratch.shape[0]):
        slot = ids[j] % capacity
        for f in range(width):
            scratch[j, f] = np.float64(obs[slot, f])
    return variance_by_feature(scratch)
