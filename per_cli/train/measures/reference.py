"""State diversity's reference sample: ``REFERENCE_SIZE`` states drawn uniformly with replacement from a memory's
sampleable ids, reduced to their per-feature variance, with one definition for every storage.

The ids come from the caller's generator (the window's own, so training draws nothing here); the states are read
by the storage's own reader in bounded chunks and viewed by :func:`iid.state_view`, then reduced in draw order."""

from __future__ import annotations

import numba
import numpy as np

from per_cli.replay.integers import uniform_integer
from per_cli.train.measures.iid import REFERENCE_CHUNK_BYTES, REFERENCE_SIZE, reference_variance, state_view


def drawn_reference_variance(memory, rng: np.random.Generator, n: int = REFERENCE_SIZE) -> np.ndarray:
    """The per-feature ddof-1 variance (NaN where constant) of ``n`` (>= 2) states of ``memory`` drawn with
    ``rng`` (:func:`reference_slots`), viewed (:func:`reference_views`). ValueError for an empty memory."""
    storage = memory.storage
    return reference_variance(reference_views(storage, reference_slots(storage, rng, n)))


def reference_slots(storage, rng: np.random.Generator, n: int) -> np.ndarray:
    """The slots (int64) of ``n`` ids drawn uniformly with replacement from ``storage``'s sampleable ids with
    ``rng`` (:func:`_fill_ids`); ValueError when it holds none."""
    oldest = storage.oldest_sampleable_id()
    if oldest >= storage.added:
        raise ValueError("a reference sample from an empty memory")
    ids = np.empty(n, dtype=np.int64)
    _fill_ids(rng, oldest, storage.added - 1 - oldest, ids)
    return ids % storage.capacity


def reference_views(storage, slots: np.ndarray) -> np.ndarray:
    """The states of ``slots``, read by ``storage.observations`` and viewed by ``state_view`` (len(slots), k), in
    chunks of at most ``REFERENCE_CHUNK_BYTES`` of read states (a fixed rule: the chunk is set by one state's
    size)."""
    first = storage.observations(slots[:1])
    obs_ndim = first.ndim - 1
    chunk = max(1, REFERENCE_CHUNK_BYTES // max(1, first.nbytes))
    views = [state_view(storage.observations(slots[lo : lo + chunk]), obs_ndim) for lo in range(0, len(slots), chunk)]
    return np.concatenate(views)


@numba.njit(cache=True, nogil=True)
def _fill_ids(rng, low, span, out):
    """``out[j] = rng.integers(low, low + span + 1)`` for each j, in order: ``len(out)`` ids drawn uniformly
    from ``low .. low + span`` on ``rng`` (numba's ``Generator.integers``)."""
    for j in range(out.shape[0]):
        out[j] = uniform_integer(rng, low, low + span + 1)
