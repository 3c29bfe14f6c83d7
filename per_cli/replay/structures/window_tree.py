"""Proportional sampling restricted to the ``width`` newest slots of the sum tree's leaves (``replay.window``),
compiled. No second tree: only the ancestors of the window's two cuts are partial, so their in-window sums and
minima are computed once per draw. IS weights are the window's: p_min is the smallest positive leaf inside it."""

from __future__ import annotations

import numba
import numpy as np

from per_cli.replay.structures.sum_tree import MIN, SUM, K, is_weights


@numba.njit(cache=True, nogil=True, inline="always")
def _inside(leaf, lo, width, capacity):
    """Leaf ``leaf`` lies in the window; padding leaves (>= capacity, zero mass) count as the last real one."""
    d = min(leaf, capacity - 1) - lo  # in (-capacity, capacity): one wrap, no division
    if d < 0:
        d += capacity
    return d < width


@numba.njit(cache=True, nogil=True)
def _partial_nodes(tree, offsets, lo, width, capacity):
    """(index, in-window sum, in-window min) of the partial nodes, two slots per level (-1: none)."""
    levels = offsets.shape[0] - 1
    idx = np.full((levels, 2), -1, dtype=np.int64)
    psum = np.zeros((levels, 2), dtype=np.float64)
    pmin = np.full((levels, 2), np.inf, dtype=np.float64)
    cuts = (lo, (lo + width) % capacity)
    span = 1
    for level in range(1, levels):
        span *= K
        for q in range(2):
            c = cuts[q]
            if c % span != 0:  # a cut strictly inside node c // span (a cut at 0 is no cut)
                j = c // span
                if not (q == 1 and idx[level, 0] == j):
                    idx[level, q] = j
        for q in range(2):
            j = idx[level, q]
            if j < 0:
                continue
            s = 0.0
            m = np.inf
            for c in range(K):
                child = j * K + c
                v, low = _effective(tree, offsets, idx, psum, pmin, level - 1, child, span // K, lo, width, capacity)
                s += v
                m = min(m, low)
            psum[level, q] = s
            pmin[level, q] = m
    return idx, psum, pmin


@numba.njit(cache=True, nogil=True, inline="always")
def _effective(tree, offsets, idx, psum, pmin, level, j, span, lo, width, capacity):
    """(mass, min positive value) of node ``j`` of ``level`` restricted to the window."""
    for q in range(2):
        if idx[level, q] == j:
            return psum[level, q], pmin[level, q]
    if not _inside(j * span, lo, width, capacity):
        return 0.0, np.inf
    v = tree[SUM, offsets[level] + j]
    if level == 0:
        return v, (v if v > 0.0 else np.inf)
    return v, tree[MIN, offsets[level] + j]


@numba.njit(cache=True, nogil=True)
def window_sample(tree, offsets, uniforms, beta, lo, width, capacity):
    """Stratified draws (one per equal segment of the window's mass) among the window's leaves, and IS
    weights (p / p_min over the window) ** -beta."""
    top = offsets.shape[0] - 2
    idx, psum, pmin = _partial_nodes(tree, offsets, lo, width, capacity)
    total, low = _effective(tree, offsets, idx, psum, pmin, top, 0, K**top, lo, width, capacity)
    if not total > 0.0:
        raise ValueError("no sampleable transition in the replay window (zero total priority)")
    k = uniforms.shape[0]
    leaves = np.empty(k, dtype=np.int64)
    masses = np.empty(K, dtype=np.float64)
    for j in range(k):
        rest = min(max((j + uniforms[j]) * (total / k), 0.0), total)
        node = 0
        whole = False  # the node is wholly inside the window: its subtree is read as it is
        span = K**top
        for level in range(top - 1, -1, -1):
            span //= K
            acc = 0.0
            below = 0.0
            count = 0
            base = offsets[level]
            p0, p1 = idx[level, 0], idx[level, 1]
            for c in range(K):  # _effective's mass, written out (a call per child is slow)
                child = node * K + c
                if whole:
                    m = tree[SUM, base + child]
                elif child == p0:
                    m = psum[level, 0]
                elif child == p1:
                    m = psum[level, 1]
                elif _inside(child * span, lo, width, capacity):
                    m = tree[SUM, base + child]
                else:
                    m = 0.0
                masses[c] = m
                acc += masses[c]
                le = acc <= rest
                count += le
                below = acc if le else below
            if count < K:
                rest -= below
            else:  # rounding: rest >= this node's running total; take the last positive child whole
                count = K - 1
                while count > 0 and not masses[count] > 0.0:
                    count -= 1
                rest = masses[count]
            child = node * K + count
            if not whole:
                whole = idx[level, 0] != child and idx[level, 1] != child
            node = child
        if not (tree[SUM, node] > 0.0 and _inside(node, lo, width, capacity)):
            raise FloatingPointError("window sum tree: no positive-mass leaf found inside the window")
        leaves[j] = node
    return leaves, is_weights(tree, leaves, low, beta)
