"""``rank``: rank-based prioritized replay on a binary heap of priorities (``structures/rank_heap.py``)."""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from per_cli.replay.kind_spec import KindSpec
from per_cli.replay.records import Counter, counters_dtype, new_counters
from per_cli.replay.sampler import DRAWN, FAILED, Sampler, Storage, strata_uniforms
from per_cli.replay.storage.ring import member_axis
from per_cli.replay.structures.rank_heap import (
    SLOT_MASK,
    heap_add,
    heap_remove,
    heap_update_current,
    rank_sample,
    rank_window_sample,
    sort_keys,
)

NO_POSITIONS = np.zeros(0, dtype=np.int64)  # (no heap position skipped)
# ``RankSampler.heap``, the heap's counters: the slots in the heap, the updates counted towards the next re-sort,
# the re-sorts made, and ``resort_period`` (0: None, a re-sort once ``capacity`` priorities changed)
HEAP_COUNTERS = counters_dtype("entries", "updated", "sorts", "period")


@numba.njit(cache=True, nogil=True)
def newest_positions(pos_of, counters, count, n):
    """The sorted heap positions of the ``count`` newest transitions (those in the heap)."""
    found = np.empty(count, dtype=np.int64)
    m = 0
    for back in range(1, count + 1):
        position = pos_of[(counters.added - back) % counters.capacity]
        if 0 <= position < n:
            found[m] = position
            m += 1
    return np.sort(found[:m])


@numba.njit(cache=True, nogil=True)
def draw_rank(generators, counters, windows, cums, cum_of, keys, pos_of, heaps, alphas, which, betas, slots,
              weights):  # fmt: skip
    """For k in range(len(which)): member ``which[k]``'s batch: one uniform per stratum from its generator, then
    ``rank_sample`` over the entries of its heap (``heaps[i].entries``; ``rank_window_sample`` inside its active
    window) with its CDF ``cums[cum_of[i]]``, IS exponent α·β. FAILED where the heap (or the window) holds no
    entry; an empty heap draws no uniform."""
    batch = slots.shape[1]
    status = np.full(which.shape[0], DRAWN, dtype=np.int8)
    uniforms = np.empty(batch, dtype=np.float64)
    for k in range(which.shape[0]):
        i = which[k]
        n = heaps[i].entries
        if n == 0:
            status[k] = FAILED
            continue
        c = counters[i]
        lo, width = strata_uniforms(generators[i], c, windows[i], uniforms)
        if width < 0:
            status[k] = FAILED
            continue
        exponent, cum = alphas[i] * betas[k], cums[cum_of[i]]
        try:
            if width > 0 and (windows[i].window <= 0 or windows[i].window >= c.size):  # only the newest left out
                newest = newest_positions(pos_of[i], c, windows[i].reserve, n)
                drawn, w = rank_sample(cum, n, keys[i], uniforms, exponent, newest)
            elif width > 0:
                drawn, w = rank_window_sample(cum, n, keys[i], uniforms, exponent, lo, width, c.capacity)
            else:
                drawn, w = rank_sample(cum, n, keys[i], uniforms, exponent, NO_POSITIONS)
        except Exception:  # noqa: BLE001 - the member's error: draw_error
            status[k] = FAILED
            continue
        slots[k] = drawn
        weights[k] = w
    return status


@numba.njit(cache=True, nogil=True)
def enter_members(keys, pos_of, heaps, which, slots, entering):
    """Event k: slot ``slots[k]`` enters member ``which[k]``'s heap at rank 1 (``entering[k]``) or leaves it, in
    order."""
    for k in range(which.shape[0]):
        i = which[k]
        h = heaps[i]
        if entering[k]:
            h.entries = heap_add(keys[i], pos_of[i], h.entries, slots[k])
        else:
            h.entries = heap_remove(keys[i], pos_of[i], h.entries, slots[k : k + 1])


@numba.njit(cache=True, nogil=True)
def update_members(keys, pos_of, heaps, stored_ids, which, ids, td_errors, counts, due):
    """For k in range(len(which)): member ``which[k]``'s ``heap_update_current`` with ids ``ids[k]`` and TD
    errors ``td_errors[k]``, its result in ``counts[k]`` (the count of priorities updated, or -1: a non-finite TD
    error, that member's heap unchanged), counted towards its re-sort (its ``period``: update calls that changed a
    priority, or, where 0, priorities changed, up to its capacity); ``due[k]``: that made one due (counted as
    made: the caller sorts the heap array). Returns how many are due."""
    n_due = 0
    for k in range(which.shape[0]):
        i = which[k]
        h = heaps[i]
        counts[k] = heap_update_current(keys[i], pos_of[i], h.entries, ids[k], td_errors[k], stored_ids[i])
        due[k] = False
        if counts[k] > 0:
            h.updated += 1 if h.period > 0 else counts[k]
            if h.updated >= (h.period if h.period > 0 else keys[i].shape[0]):
                h.updated = 0
                h.sorts += 1
                due[k] = True
                n_due += 1
    return n_due


class HeapLists(NamedTuple):
    """The rank kind's state over the seed axis: the distinct CDFs of the ranks' mass and each member's row in
    them, the heaps (keys, each slot's position, their counters: :data:`HEAP_COUNTERS`) and each member's α."""

    cums: np.ndarray  # (distinct CDFs, capacity) float64
    cum_of: np.ndarray  # (S,) int64
    keys: np.ndarray  # (S, capacity) uint64
    pos_of: np.ndarray  # (S, capacity) int32
    heaps: np.ndarray  # (S,) HEAP_COUNTERS
    alphas: np.ndarray


class RankSampler(Sampler):
    """Rank-based prioritized replay (Schaul et al. 2016): p_i = 1 / rank(i) by abs(δ), P(i) = p_i^α / Σ_k p_k^α; IS
    weights (rank / N)^(αβ). Ranks are positions in a binary heap's array (``rank_heap.py``), re-sorted exactly every
    ``resort_period`` updates; each segment's rank is an exact inverse-CDF draw, not the paper's piecewise
    approximation (docs/replay.md). With ``window`` W only the W newest transitions take part (O(capacity) a batch)."""

    draw_members = staticmethod(draw_rank)

    def __init__(
        self,
        storage: Storage,
        rng: np.random.Generator,
        alpha: float = 0.7,
        resort_period: int | None = None,
        window: int | None = None,
    ):
        if alpha < 0:
            raise ValueError(f"alpha must be >= 0, got {alpha}")
        if resort_period is not None and resort_period < 1:
            raise ValueError(f"resort_period must be >= 1 or None, got {resort_period}")
        capacity = storage.capacity
        if capacity >= 2**31:
            raise ValueError(f"RankSampler supports capacities below 2**31, got {capacity}")
        super().__init__(storage, rng, window)
        self.alpha = float(alpha)
        self.cum = np.cumsum(np.arange(1, capacity + 1, dtype=np.float64) ** -self.alpha)
        self.keys = np.zeros(capacity, dtype=np.uint64)  # the heap: (~float32 bits of abs(δ)) << 32 | slot
        self.pos_of = np.full(capacity, -1, dtype=np.int32)  # slot -> heap position, -1 if absent
        self.heap = new_counters(HEAP_COUNTERS)
        self.resort_period = resort_period

    @staticmethod
    def bytes_needed(capacity: int) -> int:
        """The CDF (float64), the heap keys (uint64) and positions (int32)."""
        return capacity * (8 + 8 + 4)

    n = Counter("slots in the heap (the sampleable ones)", "heap", name="entries")
    updated_since_sort = Counter(
        "update calls since the last re-sort, or updated priorities where resort_period is None", "heap", name="updated"
    )
    sorts = Counter("re-sorts made", "heap")

    @property
    def resort_period(self) -> int | None:
        """Update calls between re-sorts; None: a re-sort once ``capacity`` priorities changed."""
        return int(self.heap["period"]) or None

    @resort_period.setter
    def resort_period(self, value: int | None) -> None:
        self.heap["period"] = 0 if value is None else value

    @classmethod
    def member_lists(cls, samplers: list[Sampler]) -> HeapLists:
        heaps = (member_axis(samplers, name) for name in ("keys", "pos_of", "heap"))
        return HeapLists(*_distinct([s.cum for s in samplers]), *heaps, np.array([s.alpha for s in samplers]))

    @classmethod
    def add_members(cls, lists, which, slots, entering) -> None:
        enter_members(lists.own.keys, lists.own.pos_of, lists.own.heaps, which, slots, entering)

    @classmethod
    def update_members(cls, lists, which, ids, td_errors) -> np.ndarray:
        own = lists.own
        counts, due = np.empty(which.shape[0], dtype=np.int64), np.empty(which.shape[0], dtype=np.bool_)
        if update_members(own.keys, own.pos_of, own.heaps, lists.stored_ids, which, ids, td_errors, counts, due):
            for i in which[due].tolist():  # (the re-sorts the updates made due, counted already)
                sort_keys(own.keys[i], own.pos_of[i], int(own.heaps[i]["entries"]))
        return counts >= 0

    def resort(self) -> None:
        """Sort the heap array exactly by abs(δ), descending (O(N log N))."""
        sort_keys(self.keys, self.pos_of, self.n)
        self.updated_since_sort = 0
        self.sorts += 1

    def ranks(self) -> np.ndarray:
        """The slots in rank order (rank 1 first), as the sampler reads them now."""
        return (self.keys[: self.n] & SLOT_MASK).astype(np.int64)

    def priorities(self) -> np.ndarray:
        """abs(δ) (float32) in rank order, as the sampler reads them now."""
        return (~(self.keys[: self.n] >> np.uint64(32)).astype(np.uint32)).view(np.float32)

    def expected_counts(self, batch_size: int) -> np.ndarray:
        """B · P(rank): the heap array's order (of the entries inside the active window) as the ranks."""
        order = self.ranks()
        lo, width = self.active_window()
        if width:
            order = order[(order - lo) % self.storage.capacity < width]
        counts = np.zeros(self.storage.capacity)
        counts[order] = batch_size * np.diff(self.cum[: order.size], prepend=0.0) / self.cum[order.size - 1]
        return counts

    def stats(self) -> dict[str, float]:
        """``priority_max``: the largest abs(δ) held (the heap's top)."""
        return {"priority_max": float(self.priorities().max(initial=0.0))}

    def state_dict(self) -> dict:
        return {"keys": self.keys, "pos_of": self.pos_of, "n": self.n, "updated_since_sort": self.updated_since_sort}

    def load_state_dict(self, state: dict) -> None:
        self.keys[...] = state["keys"]
        self.pos_of[...] = state["pos_of"]
        self.n = int(state["n"])
        self.updated_since_sort = int(state["updated_since_sort"])


def _distinct(arrays: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The distinct arrays of ``arrays`` (one shape) stacked, and each one's row in them: the CDFs (never written
    once made) depend only on (capacity, α), so a cohort's members read one copy that stays in cache."""
    kept: list[np.ndarray] = []
    rows = []
    for array in arrays:
        row = next((r for r, k in enumerate(kept) if np.array_equal(k, array)), len(kept))
        kept += [array] if row == len(kept) else []
        rows.append(row)
    return np.stack(kept), np.array(rows, dtype=np.int64)


# (α, β0): the paper's Atari values (Schaul et al. 2016, Table 3)
RANK = KindSpec(
    "rank", RankSampler, takes_chunks=True, colour="#ff7f0e", priority_defaults=(0.7, 0.5),
    factory=lambda cfg, storage, rng, params: RankSampler(storage, rng, cfg.alpha, cfg.rank_resort_period, cfg.window),
)  # fmt: skip
