"""Samplers decide which stored transitions form a batch; the storage turns their slots into arrays.

Each sampler owns a seeded ``numpy.random.Generator``: same seed, same batches.

| kind          | class                | batch                                                | IS weights        |
| ------------- | -------------------- | ---------------------------------------------------- | ----------------- |
| `none`        | `RecentSampler`      | the last B transitions, oldest first                 | ones              |
| `uniform`     | `UniformSampler`     | uniform without replacement                          | ones              |
| `combined`    | `CombinedSampler`    | the latest transition + B-1 uniform w/o replacement  | ones              |
| `prioritized` | `PrioritizedSampler` | P(i) ∝ p_i^α, p = abs(δ) + ε; stratified (sum tree)  | (p_i / p_min)^-β  |
| `rank`        | `RankSampler`        | P(i) ∝ rank(i)^-α by abs(δ); stratified (heap)       | (rank_i / N)^(αβ) |

The storage contract
--------------------
Samplers talk to a storage only through ``storage.size``, ``storage.capacity``, ``storage.cursor``,
``storage.latest_slot`` and ``storage.sampleable(slots)``, so any storage with those (the ring
``TransitionStorage``, an Atari frame storage) works with every sampler. Slots ``0 .. size-1`` are filled;
``sampleable(slots)`` is False for a filled slot whose transition is incomplete (e.g. its stacked frame
history was partly overwritten). How an unsampleable slot is never sampled:

- Sum-tree and rank samplers keep a *zero-mass* entry for it: ``on_add(slot)`` asks
  ``storage.sampleable([slot])`` and gives the slot the maximum priority only if True, and
  ``on_invalidate(slots)`` (called by the memory when an add makes other slots unsampleable) zeroes their
  mass. A zero-mass slot is never drawn (``sum_tree.find`` only enters positive subtrees; the rank heap
  drops the slot) and ignores priority updates until ``on_add`` writes it again. A storage whose slot
  becomes sampleable later than its add calls ``on_add(slot)`` again at that point.
- Uniform, combined and none draw, then check ``storage.sampleable`` on the drawn slots and redraw any
  that fail (exactly uniform over the sampleable slots: drawing on until B pass is sampling without
  replacement from the sampleable ones).

Priorities and IS weights (Schaul et al. 2016)
----------------------------------------------
- New transitions enter at the maximum priority held in the memory (p_t = max_{i<t} p_i, Algorithm 1 of the
  paper): the sum tree's max column holds max p^α, which is used as the new leaf value as it is (α is not
  applied twice); 1 for the very first transition. Because it is the max over the priorities held now
  (not a running max since the start), it falls when the large TD errors of early training shrink.
- IS weights are normalised by the maximum weight over the whole memory, not over the batch:
  w_i = (N·P(i))^-β / max_j (N·P(j))^-β = (P(i) / P_min)^-β, where P_min is the smallest sampling
  probability of any stored transition (the min tree's root for proportional, the last rank for rank-based).
  N cancels, and every weight lies in (0, 1].
- Both prioritized samplers also offer ``update_current(ids, td_errors, stored_ids) -> bool``, which
  ``ReplayMemory.update_priorities`` calls instead of its stale-id filter + ``update``: the same semantics in
  one compiled call (this glue cost more than the tree itself at small batches).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from per_cli.replay.structures.rank_heap import (
    heap_add,
    heap_remove,
    heap_update,
    heap_update_current,
    priorities_in_order,
    rank_sample,
    slots_in_order,
    sort_keys,
)
from per_cli.replay.structures.sum_tree import (
    MAX,
    SumTree,
    _stratified_sample,
    _update_current,
    _update_priorities,
    set_leaf,
)


class Storage(Protocol):
    """What a sampler may ask of a storage."""

    capacity: int
    size: int
    cursor: int

    @property
    def latest_slot(self) -> int: ...

    def sampleable(self, slots: np.ndarray) -> np.ndarray: ...


class Sampler(Protocol):
    rng: np.random.Generator

    def on_add(self, slot: int) -> None:
        """Called after ``slot`` was (over)written with a new transition."""

    def on_invalidate(self, slots: np.ndarray) -> None:
        """The transitions in ``slots`` became unsampleable (a frame storage overwrote their history)."""

    def sample(self, batch_size: int, beta: float) -> tuple[np.ndarray, np.ndarray]:
        """Return (slots, importance-sampling weights as float32)."""

    def update(self, slots: np.ndarray, td_abs: np.ndarray) -> None:
        """New abs(TD error) of the transitions in ``slots`` (all current, finite)."""

    def stats(self) -> dict[str, float]:
        """Scalars worth logging (e.g. ``priority_max``)."""


# ----------------------------------------------------------------------------------------------------------
# unweighted samplers


class _UnweightedSampler:
    """Shared plumbing of the samplers whose IS weights are all one."""

    def __init__(self, storage: Storage, rng: np.random.Generator):
        self.storage = storage
        self.rng = rng

    def on_add(self, slot: int) -> None:
        pass

    def on_invalidate(self, slots: np.ndarray) -> None:
        pass

    def begin_phase(self, n_batches: int) -> None:
        pass

    def update(self, slots: np.ndarray, td_abs: np.ndarray) -> None:
        pass

    def stats(self) -> dict[str, float]:
        return {}

    @staticmethod
    def _ones(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)

    def _uniform_slots(self, count: int, exclude: int = -1) -> np.ndarray:
        """``count`` distinct sampleable slots in ``0 .. size-1`` other than ``exclude``, uniformly."""
        size = self.storage.size - (exclude >= 0)
        slots = self.rng.choice(size, size=count, replace=False)
        if exclude >= 0:
            slots[slots >= exclude] += 1  # skip the excluded slot
        ok = self.storage.sampleable(slots)
        if ok.all():
            return slots.astype(np.int64)
        return self._redraw(slots, ok, count, exclude)

    def _redraw(self, slots: np.ndarray, ok: np.ndarray, count: int, exclude: int) -> np.ndarray:
        """Continue the random order past the first ``count`` draws until ``count`` sampleable slots are
        found: uniform without replacement over the sampleable slots."""
        seen = set(slots.tolist())
        kept = slots[ok].tolist()
        size = self.storage.size
        while len(kept) < count:
            if len(seen) + (exclude >= 0) >= size:
                raise ValueError(f"only {len(kept)} sampleable transitions, {count} were asked for")
            candidate = int(self.rng.integers(size))
            if candidate in seen or candidate == exclude:
                continue
            seen.add(candidate)
            if self.storage.sampleable(np.array([candidate]))[0]:
                kept.append(candidate)
        return np.asarray(kept, dtype=np.int64)


class UniformSampler(_UnweightedSampler):
    """Uniform without replacement over the stored transitions."""

    def sample(self, batch_size: int, beta: float) -> tuple[np.ndarray, np.ndarray]:
        return self._uniform_slots(batch_size), self._ones(batch_size)


class RecentSampler(_UnweightedSampler):
    """The most recent ``batch_size`` transitions, oldest first: the correlated no-replay baseline
    (kind ``none``). Unsampleable slots among them are skipped, reaching further back."""

    def sample(self, batch_size: int, beta: float) -> tuple[np.ndarray, np.ndarray]:
        start = self.storage.cursor - batch_size
        slots = np.arange(start, start + batch_size, dtype=np.int64) % self.storage.capacity
        ok = self.storage.sampleable(slots)
        if not ok.all():
            slots = self._recent_sampleable(batch_size)
        return slots, self._ones(batch_size)

    def _recent_sampleable(self, batch_size: int) -> np.ndarray:
        back = np.arange(1, self.storage.size + 1, dtype=np.int64)
        newest_first = (self.storage.cursor - back) % self.storage.capacity
        chosen = newest_first[self.storage.sampleable(newest_first)][:batch_size]
        if chosen.size < batch_size:
            raise ValueError(f"only {chosen.size} sampleable transitions, {batch_size} were asked for")
        return chosen[::-1].copy()


class CombinedSampler(_UnweightedSampler):
    """Uniform plus the latest transition in every batch (Zhang & Sutton 2017): B-1 slots uniformly
    without replacement from the others, then the latest one last."""

    def sample(self, batch_size: int, beta: float) -> tuple[np.ndarray, np.ndarray]:
        latest = self.storage.latest_slot
        others = self._uniform_slots(batch_size - 1, exclude=latest)
        return np.append(others, latest), self._ones(batch_size)


# ----------------------------------------------------------------------------------------------------------
# proportional prioritization


class PrioritizedSampler:
    """Proportional prioritized replay (Schaul et al. 2016, section 3.3, Algorithm 1).

    ``PrioritizedSampler(storage, rng, alpha=0.6, eps=1e-6)`` works on any storage with the contract in the
    module docstring. Leaf ``slot`` of a ``SumTree`` holds p^α with p = abs(δ) + ε. ``sample(B, β)`` splits
    [0, Σ p^α] into B equal segments and draws one prefix uniformly in each (stratified sampling), then
    finds its leaf; weights are (p_i^α / min_j p_j^α)^-β. ``update(slots, td_abs)`` sets new priorities.
    """

    def __init__(self, storage: Storage, rng: np.random.Generator, alpha: float = 0.6, eps: float = 1e-6):
        if alpha < 0 or eps < 0:
            raise ValueError(f"alpha and eps must be >= 0, got alpha={alpha}, eps={eps}")
        self.storage = storage
        self.rng = rng
        self.alpha = float(alpha)
        self.eps = float(eps)
        self.tree = SumTree(storage.capacity)
        self._tree, self._offsets, self._mark = self.tree.tree, self.tree.offsets, self.tree.mark  # hot path

    def on_add(self, slot: int) -> None:
        t = self.tree
        top = t.tree[MAX, t.root]
        value = top if top > 0.0 else 1.0
        if not self.storage.sampleable(np.array([slot]))[0]:
            value = 0.0
        set_leaf(t.tree, t.offsets, slot, value)

    def on_invalidate(self, slots: np.ndarray) -> None:
        slots = np.asarray(slots, dtype=np.int64)
        self.tree.update(slots, np.zeros(slots.shape))

    def begin_phase(self, n_batches: int) -> None:
        pass

    def sample(self, batch_size: int, beta: float) -> tuple[np.ndarray, np.ndarray]:
        return _stratified_sample(self._tree, self._offsets, self.rng.random(batch_size), beta)

    def update(self, slots: np.ndarray, td_abs: np.ndarray) -> None:
        _update_priorities(self._tree, self._offsets, self._mark, slots, td_abs, self.eps, self.alpha)

    def update_current(self, ids: np.ndarray, td_errors: np.ndarray, stored_ids: np.ndarray) -> bool:
        """The memory's fast path: stale-id filter, finiteness check and ``update`` in one compiled call
        (``stored_ids[slot]`` is the id each slot holds). False, changing nothing, on a non-finite TD error."""
        return _update_current(
            self._tree,
            self._offsets,
            self._mark,
            ids,
            td_errors,
            stored_ids,
            self.storage.capacity,
            self.eps,
            self.alpha,
        )

    def probabilities(self) -> np.ndarray:
        """P(i) of every slot (for tests and analysis)."""
        values = self.tree.values()
        return values / values.sum()

    def stats(self) -> dict[str, float]:
        """``priority_max``/``priority_min``: the largest and smallest p^α held (the IS weights' mean is
        logged from the batches by the loop's metrics, for every kind)."""
        return {"priority_max": self.tree.max, "priority_min": self.tree.min if self.tree.max > 0 else 0.0}

    def state_dict(self) -> dict:
        return {"tree": self.tree.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.tree.load_state_dict(state["tree"])


# ----------------------------------------------------------------------------------------------------------
# rank-based prioritization


class RankSampler:
    """Rank-based prioritized replay (Schaul et al. 2016, section 3.3): p_i = 1 / rank(i) by abs(δ),
    P(i) = p_i^α / Σ_k p_k^α.

    ``RankSampler(storage, rng, alpha=0.7, resort_period=None)`` works on any storage with the contract in
    the module docstring.

    How the order is kept (as the paper does): a binary heap on abs(δ) over the sampleable slots
    (``rank_heap.py``), whose *array* serves as the approximately sorted rank list (heap position 0 =
    rank 1). An update sifts its entry up or down, O(log N); a new transition enters one float32 step above
    the current maximum abs(δ), so at rank 1 exactly, and keeps it until it is replayed or a newer one
    arrives. Between re-sorts the ranks are approximate (a heap is a partial order: its level d holds ranks
    2^d .. 2^(d+1)-1 in no particular order); every ``resort_period`` calls to ``update`` the array is
    re-sorted exactly (a sorted array is a valid heap). ``resort_period=None`` re-sorts once ``capacity``
    priorities have been updated since the last sort (about once per pass over the memory: every
    capacity / B learning steps), which keeps the amortised O(N log N) sort near the cost of the heap
    updates (``benchmarks/replay.py`` prints both).

    Sampling: the probability of rank r depends only on (r, N, α), so the unnormalised CDF
    ``cum[r] = Σ_{j<=r+1} j^-α`` is precomputed once per (capacity, α) and serves every N <= capacity.
    ``sample(B, β)`` splits the mass into B segments of equal probability and draws one rank per segment
    *exactly* (inverse CDF by binary search inside the segment), rather than uniformly among the ranks of
    the segment as the paper's piecewise-linear approximation does. IS weights, normalised by the weight of
    the lowest rank N: w = (rank / N)^(αβ).
    """

    def __init__(
        self, storage: Storage, rng: np.random.Generator, alpha: float = 0.7, resort_period: int | None = None
    ):
        if alpha < 0:
            raise ValueError(f"alpha must be >= 0, got {alpha}")
        if resort_period is not None and resort_period < 1:
            raise ValueError(f"resort_period must be >= 1 or None, got {resort_period}")
        capacity = storage.capacity
        if capacity >= 2**31:
            raise ValueError(f"RankSampler supports capacities below 2**31, got {capacity}")
        self.storage = storage
        self.rng = rng
        self.alpha = float(alpha)
        self.resort_period = resort_period
        self.cum = np.cumsum(np.arange(1, capacity + 1, dtype=np.float64) ** -self.alpha)
        self.keys = np.zeros(capacity, dtype=np.uint64)  # the heap: (~float32 bits of abs(δ)) << 32 | slot
        self.pos_of = np.full(capacity, -1, dtype=np.int32)  # slot -> heap position, -1 if absent
        self.n = 0  # slots in the heap (the sampleable ones)
        self.updated_since_sort = 0  # update() calls, or updated priorities when resort_period is None
        self.sorts = 0

    def on_add(self, slot: int) -> None:
        if self.storage.sampleable(np.array([slot]))[0]:
            self.n = heap_add(self.keys, self.pos_of, self.n, slot)
        else:
            self.on_invalidate(np.array([slot]))

    def on_invalidate(self, slots: np.ndarray) -> None:
        self.n = heap_remove(self.keys, self.pos_of, self.n, np.asarray(slots, dtype=np.int64))

    def begin_phase(self, n_batches: int) -> None:
        pass

    def sample(self, batch_size: int, beta: float) -> tuple[np.ndarray, np.ndarray]:
        if self.n == 0:
            raise ValueError("no sampleable transition in the memory")
        return rank_sample(self.cum, self.n, self.keys, self.rng.random(batch_size), self.alpha * beta)

    def update(self, slots: np.ndarray, td_abs: np.ndarray) -> None:
        heap_update(self.keys, self.pos_of, self.n, slots, td_abs)
        self._count_updates(len(slots))

    def update_current(self, ids: np.ndarray, td_errors: np.ndarray, stored_ids: np.ndarray) -> bool:
        """The memory's fast path (see ``PrioritizedSampler.update_current``)."""
        count = heap_update_current(self.keys, self.pos_of, self.n, ids, td_errors, stored_ids, self.storage.capacity)
        if count < 0:
            return False
        if count:
            self._count_updates(count)
        return True

    def _count_updates(self, count: int) -> None:
        if self.resort_period is None:
            self.updated_since_sort += count
            due = self.updated_since_sort >= self.storage.capacity
        else:
            self.updated_since_sort += 1
            due = self.updated_since_sort >= self.resort_period
        if due:
            self.resort()

    def resort(self) -> None:
        """Sort the heap array exactly by abs(δ), descending (O(N log N))."""
        sort_keys(self.keys, self.pos_of, self.n)
        self.updated_since_sort = 0
        self.sorts += 1

    def ranks(self) -> np.ndarray:
        """The slots in rank order (rank 1 first), as the sampler reads them now."""
        return slots_in_order(self.keys, self.n)

    def priorities(self) -> np.ndarray:
        """abs(δ) (float32) in rank order, as the sampler reads them now."""
        return priorities_in_order(self.keys, self.n)

    def probabilities(self) -> np.ndarray:
        """P(i) of every slot under the current order (for tests and analysis)."""
        p = np.zeros(self.storage.capacity)
        mass = np.diff(self.cum[: self.n], prepend=0.0)
        p[self.ranks()] = mass / self.cum[self.n - 1]
        return p

    def stats(self) -> dict[str, float]:
        """``priority_max``: the largest abs(δ) held (the heap's top)."""
        return {"priority_max": float(self.priorities()[0]) if self.n else 0.0}

    def state_dict(self) -> dict:
        return {"keys": self.keys, "pos_of": self.pos_of, "n": self.n, "updated_since_sort": self.updated_since_sort}

    def load_state_dict(self, state: dict) -> None:
        self.keys[...] = state["keys"]
        self.pos_of[...] = state["pos_of"]
        self.n = int(state["n"])
        self.updated_since_sort = int(state["updated_since_sort"])


__all__ = [
    "CombinedSampler",
    "PrioritizedSampler",
    "RankSampler",
    "RecentSampler",
    "Sampler",
    "Storage",
    "UniformSampler",
]
