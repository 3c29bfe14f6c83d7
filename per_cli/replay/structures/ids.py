"""Transition ids and the stale-id rule, written once for every storage, sampler and structure.

A transition's id is the number added before it; it lives in slot ``id % capacity`` and ``stored_ids[slot]`` is the
id a slot holds (``-1``: empty). A priority update carries ids, so one for an overwritten slot is skipped:
:func:`current_slot` is that rule, and every compiled update path calls it."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def current_slot(stored_ids, tid):
    """The slot still holding transition ``tid``, or -1 when it was overwritten (``len(stored_ids)`` is the
    capacity)."""
    slot = tid % stored_ids.shape[0]
    return slot if stored_ids[slot] == tid else -1


@numba.njit(cache=True, nogil=True)  # no fastmath: 'nnan' would compile the isfinite check away
def all_finite(values) -> bool:
    for j in range(values.shape[0]):  # noqa: SIM110 (numba compiles no generator inside all())
        if not np.isfinite(values[j]):
            return False
    return True
