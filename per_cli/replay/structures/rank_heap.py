"""The rank-based sampler's data: a binary heap of priority keys whose array approximates the rank order, and the
stratified inverse-CDF draw of ranks; hot loops compiled by numba.

A ``uint64`` key holds the complemented float32 bits of abs(δ) above the slot, so a min-heap of keys is a max-heap
of abs(δ) (ties by slot) and one ``np.sort`` of the keys sorts by abs(δ) descending. Heap position ``i`` is rank
``i + 1``: a partial order, the paper's approximation; ``sort_keys`` makes it exact (docs/replay.md)."""

from __future__ import annotations

import numba
import numpy as np

from per_cli.replay.structures.ids import all_finite, current_slot

SLOT_MASK = np.uint64(0xFFFFFFFF)
_LOW = 0xFFFFFFFF
_FLOAT32_INF_BITS = 0x7F800000
_ONE_BITS = 0x3F800000  # float32 1.0: the first transition's priority
TOP = 0  # the heap position of rank 1: the largest priority


@numba.njit(cache=True, nogil=True)
def _key(bits, slot):
    return np.uint64((~np.uint32(bits)) & np.uint32(_LOW)) << np.uint64(32) | np.uint64(slot)


@numba.njit(cache=True, nogil=True)
def _bits(key):
    """float32 bits of the priority inside ``key``."""
    return np.uint32(~np.uint32(key >> np.uint64(32)))


@numba.njit(cache=True, nogil=True)
def _slot(key):
    return np.int64(key & np.uint64(_LOW))


@numba.njit(cache=True, nogil=True)
def _sift_up(keys, pos_of, i):
    k = keys[i]
    while i > 0:
        parent = (i - 1) >> 1
        if keys[parent] <= k:
            break
        keys[i] = keys[parent]
        pos_of[_slot(keys[i])] = i
        i = parent
    keys[i] = k
    pos_of[_slot(k)] = i


@numba.njit(cache=True, nogil=True)
def _sift_down(keys, pos_of, i, n):
    k = keys[i]
    while True:
        child = 2 * i + 1
        if child >= n:
            break
        if child + 1 < n and keys[child + 1] < keys[child]:
            child += 1
        if keys[child] >= k:
            break
        keys[i] = keys[child]
        pos_of[_slot(keys[i])] = i
        i = child
    keys[i] = k
    pos_of[_slot(k)] = i


@numba.njit(cache=True, nogil=True)
def heap_add(keys, pos_of, n, slot):
    """Enter ``slot`` at rank 1: with the priority one float32 step above the current maximum, so it
    passes every equal one (1.0 for the first transition). Returns the new heap size."""
    if n > 0:
        bits = _bits(keys[TOP])
        if bits < _FLOAT32_INF_BITS:
            bits += 1
    else:
        bits = np.uint32(_ONE_BITS)
    i = pos_of[slot]
    if i < 0:  # a slot not in the heap (new, or unsampleable until now)
        i = n
        n += 1
    keys[i] = _key(bits, slot)
    pos_of[slot] = i
    _sift_up(keys, pos_of, i)
    return n


@numba.njit(cache=True, nogil=True)
def heap_remove(keys, pos_of, n, slots):
    """Drop ``slots`` from the heap (unsampleable: zero probability); returns the new heap size."""
    for j in range(slots.shape[0]):
        i = pos_of[slots[j]]
        if i < 0:
            continue
        pos_of[slots[j]] = -1
        n -= 1
        if i == n:
            continue
        keys[i] = keys[n]
        pos_of[_slot(keys[i])] = i
        if i > 0 and keys[(i - 1) >> 1] > keys[i]:
            _sift_up(keys, pos_of, i)
        else:
            _sift_down(keys, pos_of, i, n)
    return n


@numba.njit(cache=True, nogil=True)
def heap_update_current(keys, pos_of, n, ids, td_errors, stored_ids):
    """``ReplayMemory.update_priorities`` in one compiled call: -1 (and nothing changed) if a TD error is
    not finite; else the ids their slot still holds (``ids.current_slot``) get their abs(δ), and the count
    updated is returned."""
    if not all_finite(td_errors):
        return -1
    count = 0
    for j in range(ids.shape[0]):
        slot = current_slot(stored_ids, ids[j])
        if slot < 0:
            continue
        i = pos_of[slot]
        if i < 0:
            continue
        old = keys[i]
        new = _key(np.float32(abs(td_errors[j])).view(np.uint32), slot)
        keys[i] = new
        if new < old:
            _sift_up(keys, pos_of, i)
        else:
            _sift_down(keys, pos_of, i, n)
        count += 1
    return count


def sort_keys(keys: np.ndarray, pos_of: np.ndarray, n: int) -> None:
    """Exact re-sort of the heap array (a sorted array is a valid heap)."""
    head = keys[:n]
    head.sort()
    pos_of[(head & SLOT_MASK).astype(np.int64)] = np.arange(n, dtype=pos_of.dtype)


@numba.njit(cache=True, nogil=True)
def _draw_ranks(cum, n, uniforms):
    """Stratified inverse-CDF draws of 0-based ranks among ``n``: segment j of k covers probability mass
    [j/k, (j+1)/k) and the rank r with cum[r-1] <= u < cum[r] is drawn exactly (clamped to the last rank
    when rounding puts u at the total). The k binary searches run in lockstep, one step for all at a time,
    so their cache misses on ``cum`` overlap. The ranks come out non-decreasing."""
    k = uniforms.shape[0]
    segment = cum[n - 1] / k
    u = np.empty(k, dtype=np.float64)
    base = np.zeros(k, dtype=np.int64)
    for j in range(k):
        u[j] = (j + uniforms[j]) * segment
    size = n
    while size > 1:  # invariant: the answer (first r with cum[r] > u) lies in [base, base + size]
        half = size >> 1
        for j in range(k):
            if cum[base[j] + half - 1] <= u[j]:
                base[j] += half
        size -= half
    for j in range(k):
        r = base[j] + (cum[base[j]] <= u[j])
        base[j] = min(r, n - 1)
    return base


@numba.njit(cache=True, nogil=True)
def _rank_weights(ranks, n, exponent):
    """IS weights (rank / n) ** exponent, exponent = α·β (normalised by the weight of the last rank)."""
    weights = np.empty(ranks.shape[0], dtype=np.float32)
    inv_n = np.float32(1.0 / n)
    exponent32 = np.float32(exponent)
    for j in range(ranks.shape[0]):
        weights[j] = (np.float32(ranks[j] + 1) * inv_n) ** exponent32
    return weights


@numba.njit(cache=True, nogil=True)
def rank_sample(cum, n, keys, uniforms, exponent, skipped):
    """Stratified draws of ranks (``_draw_ranks``) among the ``n`` in the heap other than those at the (sorted,
    distinct, < n) heap positions ``skipped``: heap position = rank - 1 with the skipped left out (as in
    ``rank_window_sample``), in O(B · len(skipped)) instead of a pass over the heap."""
    m = n - skipped.shape[0]
    if m <= 0:
        raise ValueError("no sampleable transition left once the newest are left out")
    ranks = _draw_ranks(cum, m, uniforms)
    slots = np.empty(ranks.shape[0], dtype=np.int64)
    for j in range(ranks.shape[0]):
        position = ranks[j]
        for q in range(skipped.shape[0]):  # the r-th kept position: r plus the skipped ones at or before it
            if skipped[q] <= position:
                position += 1
        slots[j] = _slot(keys[position])
    return slots, _rank_weights(ranks, m, exponent)


@numba.njit(cache=True, nogil=True)
def rank_window_sample(cum, n, keys, uniforms, exponent, lo, width, capacity):
    """``rank_sample`` among the heap entries whose slot lies in the window (the ``width`` slots from ``lo``,
    mod ``capacity``): their ranks are their order in the heap array with the others left out, the same
    approximation the whole-memory sampler makes. O(n) per call (one pass over the heap array)."""
    members = 0
    for i in range(n):
        if (_slot(keys[i]) - lo) % capacity < width:
            members += 1
    if members == 0:
        raise ValueError("no sampleable transition in the replay window")
    ranks = _draw_ranks(cum, members, uniforms)
    slots = np.empty(ranks.shape[0], dtype=np.int64)
    seen = 0
    j = 0
    for i in range(n):  # ranks are non-decreasing: one pass maps each to its heap entry
        slot = _slot(keys[i])
        if (slot - lo) % capacity >= width:
            continue
        while j < ranks.shape[0] and ranks[j] == seen:
            slots[j] = slot
            j += 1
        seen += 1
        if j == ranks.shape[0]:
            break
    return slots, _rank_weights(ranks, members, exponent)
