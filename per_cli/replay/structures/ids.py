"""Transition ids and the stale-id rule, written once for every storage, sampler and structure.

A transition's id is the number of transitions added before it; it lives in slot ``id % capacity`` until a
newer one overwrites that slot, and ``stored_ids[slot]`` is the id a slot holds now (``-1`` when empty). A
priority update carries ids (not slots), so one that arrives after its slot was overwritten is recognised
and skipped: :func:`current_slot` is that rule, compiled, and every compiled update path calls it.
"""

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


@numba.njit(cache=True, nogil=True)
def current_priorities(ids, td_errors, stored_ids):
    """(slots, abs(TD)) of the ids their slot still holds, and whether every TD error is finite (empty
    arrays when one is not)."""
    n = ids.shape[0]
    slots = np.empty(n, dtype=np.int64)
    td_abs = np.empty(n, dtype=np.float64)
    if not all_finite(td_errors):
        return slots[:0], td_abs[:0], False
    m = 0
    for j in range(n):
        slot = current_slot(stored_ids, ids[j])
        if slot >= 0:
            slots[m] = slot
            td_abs[m] = abs(np.float64(td_errors[j]))
            m += 1
    return slots[:m], td_abs[:m], True
