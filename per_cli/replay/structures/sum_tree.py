"""A batched K-ary sum tree with min and max trees, its hot loops compiled by numba.

Level 0 holds the leaves (zero-padded to a multiple of ``K``); node ``j`` of level ``l >= 1`` summarises nodes ``j*K ..
j*K+K-1`` below. All levels live in one ``(3, n_nodes)`` float64 array: sums, then minima and maxima of the *positive*
leaves (a zero leaf is never the minimum nor the maximum). K = 16 siblings fill two cache lines. Every node is
recomputed from its children in a fixed order, never adjusted by a delta, so rounding cannot accumulate; ``find_leaves``
returns only leaves of positive mass."""

from __future__ import annotations

import numba
import numpy as np

from per_cli.replay.structures.ids import all_finite, current_slot

SUM, MIN, MAX = 0, 1, 2  # the rows of the tree array
PARENTS = 1  # the level above the leaves (level 0); ``offsets[level]`` is where a level starts
K = 16  # fanout: a compile-time constant, so the loops over a node's children unroll and vectorise
# reassociation lets LLVM vectorise the K-wide sum/min/max of a node's children; no 'ninf' (mins use +inf)
_FAST = {"nnan", "reassoc", "nsz", "arcp", "contract"}


@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def _recompute(tree, offsets, level, j):
    """Node ``j`` of ``level`` (>= 1) from its ``K`` children, in a fixed order."""
    sums = tree[SUM]
    mins = tree[MIN]
    maxs = tree[MAX]
    base = offsets[level - 1] + j * K
    s = 0.0
    lo = np.inf
    hi = 0.0
    if level == 1:  # the children are leaves: zero ones count for neither min nor max
        for c in range(K):
            v = sums[base + c]
            s += v
            lo = min(lo, v if v > 0.0 else np.inf)
            hi = max(hi, v)
    else:
        for c in range(K):
            s += sums[base + c]
            lo = min(lo, mins[base + c])
            hi = max(hi, maxs[base + c])
    node = offsets[level] + j
    sums[node] = s
    mins[node] = lo
    maxs[node] = hi


@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def set_leaf(tree, offsets, leaf, value):
    """One leaf and its ancestors (a scalar call: the per-transition ``add_members`` path)."""
    tree[SUM, leaf] = value
    j = leaf
    for level in range(PARENTS, offsets.shape[0] - 1):
        j //= K
        _recompute(tree, offsets, level, j)


@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def _propagate(tree, offsets, nodes, m, mark):
    """Recompute the distinct level-1 nodes ``nodes[:m]`` and, level by level, each of their distinct
    ancestors once (a batch of B leaves shares most of its upper ancestors; the independent nodes of a
    level also overlap their cache misses). ``mark`` (all zero on entry and on exit) deduplicates."""
    top = offsets.shape[0] - 2
    for level in range(PARENTS, top + 1):
        m_next = 0
        for i in range(m):
            j = nodes[i]
            _recompute(tree, offsets, level, j)
            if level < top:
                parent = j // K
                g = offsets[level + 1] + parent
                if mark[g] == 0:
                    mark[g] = 1
                    nodes[m_next] = parent  # in place: m_next <= i, already read
                    m_next += 1
        if level < top:
            for i in range(m_next):
                mark[offsets[level + 1] + nodes[i]] = 0
        m = m_next


@numba.njit(cache=True, nogil=True)
def _mark_parent(offsets, leaf, nodes, m, mark):
    parent = leaf // K
    g = offsets[PARENTS] + parent
    if mark[g] == 0:
        mark[g] = 1
        nodes[m] = parent
        m += 1
    return m


@numba.njit(cache=True, nogil=True)
def _clear_marks(offsets, nodes, m, mark):
    for i in range(m):
        mark[offsets[PARENTS] + nodes[i]] = 0


@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def set_leaves(tree, offsets, mark, leaves, values):
    """Leaves ``leaves`` take ``values`` (>= 0, finite), a later duplicate winning; their ancestors recomputed
    once each (``_propagate``, the batched update's path)."""
    sums = tree[SUM]
    nodes = np.empty(leaves.shape[0], dtype=np.int64)
    m = 0
    for j in range(leaves.shape[0]):
        sums[leaves[j]] = values[j]
        m = _mark_parent(offsets, leaves[j], nodes, m, mark)
    _clear_marks(offsets, nodes, m, mark)
    _propagate(tree, offsets, nodes, m, mark)


@numba.njit(cache=True, nogil=True)
def find_leaves(tree, offsets, prefixes):
    """Leaf of each prefix (clamped to ``[0, total]``): the ``i`` with ``sum(v[:i]) <= prefix < sum(v[:i+1])``, never a
    zero leaf (past a node's total by rounding, its last positive child); -1 only if no leaf is positive. The prefixes
    descend together one level at a time, so their cache misses overlap."""
    sums = tree[SUM]
    top = offsets.shape[0] - 2
    total = sums[offsets[top]]
    n = prefixes.shape[0]
    nodes = np.zeros(n, dtype=np.int64)
    rest = np.empty(n, dtype=np.float64)
    for j in range(n):
        rest[j] = min(max(prefixes[j], 0.0), total)
    running = np.empty(K, dtype=np.float64)  # the running sums of the node at ``last``
    for level in range(top - 1, -1, -1):
        offset = offsets[level]
        last = -1
        for j in range(n):
            base = offset + nodes[j] * K
            if base != last:
                acc = 0.0
                for c in range(K):
                    acc += sums[base + c]
                    running[c] = acc
                last = base
            prefix = rest[j]
            count = 0
            for c in range(K):
                count += running[c] <= prefix
            if count < K:  # (the running sums never fall: the children below ``count`` are those <= prefix)
                rest[j] = prefix - (running[count - 1] if count > 0 else 0.0)
            else:  # rounding: prefix >= this node's running total
                count = K - 1
                while count > 0 and not sums[base + count] > 0.0:
                    count -= 1
                rest[j] = sums[base + count]
            nodes[j] = nodes[j] * K + count
    for j in range(n):
        if not sums[nodes[j]] > 0.0:
            nodes[j] = -1
    return nodes


@numba.njit(cache=True, nogil=True)
def stratified_sample(tree, offsets, uniforms, beta):
    """One draw per equal segment of the total mass, and IS weights (p / p_min) ** -beta."""
    root = offsets[offsets.shape[0] - 2]
    if not tree[SUM, root] > 0.0:
        raise ValueError("no sampleable transition in the memory (zero total priority)")
    k = uniforms.shape[0]
    segment = tree[SUM, root] / k
    prefixes = np.empty(k, dtype=np.float64)
    for j in range(k):
        prefixes[j] = (j + uniforms[j]) * segment
    leaves = find_leaves(tree, offsets, prefixes)
    for j in range(k):
        if leaves[j] < 0:
            raise FloatingPointError("sum tree: no positive-mass leaf found (zero total or corrupted tree)")
    return leaves, is_weights(tree, leaves, tree[MIN, root], beta)


@numba.njit(cache=True, nogil=True)
def is_weights(tree, leaves, p_min, beta):
    """The IS weights (p / p_min) ** -beta of ``leaves`` (float32)."""
    inv_min = np.float32(1.0 / p_min)
    neg_beta = np.float32(-beta)
    weights = np.empty(leaves.shape[0], dtype=np.float32)
    for j in range(leaves.shape[0]):
        weights[j] = (np.float32(tree[SUM, leaves[j]]) * inv_min) ** neg_beta
    return weights


@numba.njit(cache=True, nogil=True)  # no fastmath here: 'nnan' would compile the isfinite check away
def update_current(tree, offsets, mark, ids, td_errors, stored_ids, eps, alpha, floor):
    """``ReplayMemory.update_priorities`` in one compiled call: False (nothing changed) if a TD error is not finite,
    else the ids their slot still holds get (max(|δ|, floor) + ε) ** α, zero-mass leaves excepted; a repeated id sees
    the value written before it."""
    if not all_finite(td_errors):
        return False
    sums = tree[SUM]
    n = ids.shape[0]
    leaves = np.empty(n, dtype=np.int64)
    for j in range(n):
        leaf = current_slot(stored_ids, ids[j])
        leaves[j] = leaf if leaf >= 0 and sums[leaf] > 0.0 else -1
    values = np.empty(n, dtype=np.float64)
    for j in range(n):
        values[j] = (max(abs(np.float64(td_errors[j])), floor) + eps) ** alpha
    nodes = np.empty(n, dtype=np.int64)
    m = 0
    for j in range(n):
        leaf = leaves[j]
        if leaf < 0 or not sums[leaf] > 0.0:
            continue
        sums[leaf] = values[j]
        m = _mark_parent(offsets, leaf, nodes, m, mark)
    _clear_marks(offsets, nodes, m, mark)
    _propagate(tree, offsets, nodes, m, mark)
    return True


def _level_offsets(capacity: int) -> np.ndarray:
    """Start of each level in the node array, then the total node count (one entry past the root)."""
    sizes = [-(-capacity // K) * K]
    while sizes[-1] > 1:
        parents = sizes[-1] // K
        sizes.append(parents if parents == 1 else -(-parents // K) * K)
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


class SumTree:
    """Sum, min and max of ``capacity`` non-negative leaf values: the arrays the compiled functions above take
    (``tree``, ``offsets``, ``mark``)."""

    @staticmethod
    def bytes_needed(capacity: int) -> int:
        """Bytes a tree of ``capacity`` leaves allocates (three float64 rows and a uint8 scratch row)."""
        return int(_level_offsets(capacity)[-1]) * (3 * 8 + 1)

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError(f"SumTree capacity must be >= 1, got {capacity}")
        self.capacity = int(capacity)
        self.offsets = _level_offsets(self.capacity)
        self.root = int(self.offsets[-2])
        self.tree = np.zeros((3, int(self.offsets[-1])), dtype=np.float64)
        self.tree[MIN] = np.inf
        self.mark = np.zeros(self.tree.shape[1], dtype=np.uint8)  # scratch of the batched updates

    @property
    def total(self) -> float:
        return float(self.tree[SUM, self.root])

    @property
    def min(self) -> float:
        """The smallest positive leaf (+inf when none is positive)."""
        return float(self.tree[MIN, self.root])

    @property
    def max(self) -> float:
        """The largest leaf (0 when none is positive)."""
        return float(self.tree[MAX, self.root])

    def values(self) -> np.ndarray:
        """A copy of the ``capacity`` leaf values."""
        return self.tree[SUM, : self.capacity].copy()

    def state_dict(self) -> dict:
        return {"capacity": self.capacity, "tree": self.tree}

    def load_state_dict(self, state: dict) -> None:
        if state["capacity"] != self.capacity or state["tree"].shape != self.tree.shape:
            raise ValueError(f"sum tree of capacity {state['capacity']} loaded into one of {self.capacity}")
        self.tree[...] = state["tree"]
