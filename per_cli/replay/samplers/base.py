"""The sampler base class: what a sampler may ask of a storage, how its one draw is called for one member or many,
and the hooks every sampler has (no-op defaults, so the memory calls them all without probing).

One implementation per kind
---------------------------
A sampler kind's draw is ONE compiled function over a list of members (``draw_members``): for k in
``range(len(which))`` it draws member ``which[k]``'s batch (its slots and IS weights into row k of ``slots`` and
``weights``) from that member's own generator, counters and structures, and returns a status per member. A solo
run's ``sample`` is that function over a list of one (:attr:`Sampler.own`, built once); a cohort's draw
(:mod:`per_cli.replay.cohort`) is the same function over all its members' lists. So a member's batches do not
depend on the cohort's size or order, and there is nothing to keep equal: a new kind is one file
(docs/extending.md).

The draws are the project's own (numba's ``Generator.random`` and ``Generator.integers`` on each member's
``numpy.random.Generator``, and :func:`draw_distinct` for draws without replacement): they define a run's random
stream; they do not reproduce any numpy routine.

The arguments of every ``draw_members``: ``generators`` (typed list), ``counters`` (typed list of the storages'
``counters`` arrays), ``windows`` (int64 (S, 2): ``replay.window`` per member, 0 for none, and the newest ids that
may not start a run, ``replay.chunk - 1``: :meth:`Sampler.window_row`), then the kind's own lists
(``member_lists``), then ``which`` (int64), ``betas`` (float64 per k), ``slots`` (int64 (k, B)) and ``weights``
(float32 (k, B)).
"""

from __future__ import annotations

from typing import Protocol

import numba
import numpy as np
from numba.typed import List

from per_cli.replay.stateless import Stateless
from per_cli.replay.storage.ring import CAPACITY, CURSOR, ONE, SIZE, member_axis
from per_cli.replay.structures.ids import all_finite, current_priorities

DRAWN, TOO_FEW, FAILED = 0, 1, 2  # the status of a member's draw; FAILED: its structure raised (repeat to see why)


class Storage(Protocol):
    """What a sampler may ask of a storage (the ring ``TransitionStorage``, the Atari frame storage, ...)."""

    capacity: int
    size: int
    cursor: int
    added: int
    counters: np.ndarray  # cursor, size, added, episodes ended, first sampleable id, capacity (storage/ring.py)
    filled_slots_sampleable: bool  # every filled slot is sampleable: ``sampleable`` need not be asked

    @property
    def latest_slot(self) -> int: ...

    def sampleable(self, slots: np.ndarray) -> np.ndarray: ...

    def oldest_sampleable_id(self) -> int: ...


@numba.njit(cache=True, nogil=True)
def window_of(counters, row):
    """(first slot, width) of the ring slots a draw is restricted to, ``row`` being the member's ``windows`` row
    (W, reserve): the W newest (all held where W is 0 or covers them) without the ``reserve`` newest. (0, 0) when
    nothing restricts the draw; width -1 when nothing is left."""
    window, reserve, size = row[0], row[1], counters[SIZE]
    span = window if 0 < window < size else size
    if span == size and reserve == 0:
        return 0, 0
    width = span - reserve
    return (counters[CURSOR] - span) % counters[CAPACITY], width if width > 0 else -1


@numba.njit(cache=True, nogil=True)
def strata_uniforms(generator, counters, row, uniforms):
    """The prioritized kinds' draw preamble: one uniform per stratum from the member's ``generator`` into
    ``uniforms``, then the member's (first slot, width) of :func:`window_of`."""
    for j in range(uniforms.shape[0]):
        uniforms[j] = generator.random()
    return window_of(counters, row)


@numba.njit(cache=True, nogil=True)
def expand_runs(counters, which, starts, start_weights, chunk, slots, weights):
    """Row k of ``slots``: the runs of ``chunk`` consecutive slots from each of member ``which[k]``'s ``starts[k]``
    (its ring's slots, in order), each transition with its run's weight."""
    for k in range(which.shape[0]):
        capacity = counters[which[k]][CAPACITY]
        for r in range(starts.shape[1]):
            for m in range(chunk):
                slots[k, r * chunk + m] = (starts[k, r] + m) % capacity
                weights[k, r * chunk + m] = start_weights[k, r]


def draw_batches(sampler_class, lists: tuple, which: np.ndarray, betas: np.ndarray, slots, weights, chunk: int):
    """The kind's ``draw_members`` for these members, into ``slots`` and ``weights`` ((k, B)); with ``chunk`` L > 1
    it draws B / L run starts by the kind's own rule (the reserve in ``windows`` keeps each run inside the held
    ids) and each start becomes a run of L consecutive transitions (``replay.chunk``). The one place both a solo
    memory and a cohort call a draw."""
    if chunk == 1:
        return sampler_class.draw_members(*lists, which, betas, slots, weights)
    starts = np.zeros((slots.shape[0], slots.shape[1] // chunk), dtype=np.int64)
    start_weights = np.ones(starts.shape, dtype=np.float32)
    status = sampler_class.draw_members(*lists, which, betas, starts, start_weights)
    expand_runs(lists[1], which, starts, start_weights, chunk, slots, weights)
    return status


@numba.njit(cache=True, nogil=True)
def draw_distinct(generator, n, count, out):
    """``out[:count]`` = ``count`` distinct integers of ``0 .. n-1``, every such ordered sample equally likely
    (Floyd's algorithm for the set, with an open-addressing hash set of the picks, then a Fisher-Yates shuffle
    of their order): O(count) draws and memory whatever ``n``."""
    mask = 1
    while mask < 2 * count:
        mask *= 2
    table = np.full(mask, -1, dtype=np.int64)
    mask -= 1
    for t in range(count):
        j = n - count + t
        value = generator.integers(0, j + 1)
        at = value & mask
        while table[at] != -1 and table[at] != value:
            at = (at + 1) & mask
        if table[at] == value:  # picked already: j, which no earlier step could pick
            value = j
            at = value & mask
            while table[at] != -1:
                at = (at + 1) & mask
        table[at] = value
        out[t] = value
    for t in range(count - 1, 0, -1):
        r = generator.integers(0, t + 1)
        out[t], out[r] = out[r], out[t]


class Sampler(Stateless):
    """Picks the slots of a batch. A kind defines ``draw_members`` (and ``member_lists`` where it keeps more than
    the common state); every other hook has a default.

    Each sampler owns a seeded ``numpy.random.Generator`` (``rng``): same seed, same batches, whatever cohort the
    member is drawn in."""

    window: int | None = None  # replay.window, for the samplers that honour it
    chunk: int = 1  # replay.chunk: a batch is B / chunk runs of chunk consecutive transitions (make_replay sets it)

    def __init__(self, storage: Storage, rng: np.random.Generator):
        self.storage = storage
        self.rng = rng
        self._own: tuple | None = None

    # ------------------------------------------------------------------------------------------------------
    # the one draw

    @staticmethod
    def draw_members(*args):  # pragma: no cover - every kind defines it
        raise NotImplementedError

    @classmethod
    def member_lists(cls, samplers: list[Sampler]) -> tuple:
        """The kind's own arguments of ``draw_members`` for these members (typed lists of their arrays, or arrays
        with a member axis), after the common ones. The arrays are the samplers' own: a draw moves them."""
        return ()

    @classmethod
    def lists(cls, samplers: list[Sampler]) -> tuple:
        """Every list ``draw_members`` takes before ``which``, for these members (built once per cohort: the
        arrays are written in place, loads included)."""
        common = (
            List([s.rng for s in samplers]),
            member_axis([s.storage.counters for s in samplers]),
            np.stack([s.window_row() for s in samplers]),
        )
        return (*common, *cls.member_lists(samplers))

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_own": None}  # (typed lists do not pickle: rebuilt on first use)

    @property
    def own(self) -> tuple:
        """``lists([self])``, built on first use."""
        if self._own is None:
            self._own = type(self).lists([self])
        return self._own

    def sample(self, batch_size: int, beta: float) -> tuple[np.ndarray, np.ndarray]:
        """Return (slots, importance-sampling weights as float32): ``draw_members`` over this member alone."""
        slots = np.empty((1, batch_size), dtype=np.int64)
        weights = np.empty((1, batch_size), dtype=np.float32)
        betas = np.array([beta], dtype=np.float64)
        status = draw_batches(type(self), self.own, ONE, betas, slots, weights, self.chunk)
        if status[0] != DRAWN:
            self.raise_failed(int(status[0]), batch_size, beta)
        return slots[0], weights[0]

    def expected_counts(self, batch_size: int) -> np.ndarray:
        """Each slot's expected number of appearances in the next batch drawn now (outside a phase), as a
        float array over the capacity: the kind's distribution, stated so that the sampler contract tests can
        check its draws against it (χ²). Every registered kind states it."""
        raise NotImplementedError(f"{type(self).__name__} does not state its distribution (expected_counts)")

    def raise_failed(self, status: int, batch_size: int, beta: float) -> None:
        """Raise the error of a draw that returned ``status`` (not DRAWN) for this member."""
        held = self.storage.added - self.storage.oldest_sampleable_id()
        raise ValueError(f"only {held} sampleable transitions, {batch_size} were asked for")

    def window_row(self) -> np.ndarray:
        """This member's ``windows`` row: (``replay.window`` or 0, the ``chunk - 1`` newest ids no run may start
        at)."""
        return np.array([self.window or 0, self.chunk - 1], dtype=np.int64)

    def window_bounds(self) -> tuple[int, int]:
        """(first slot, width) of the ring slots the next draw is restricted to (:func:`window_of`)."""
        lo, width = window_of(self.storage.counters, self.window_row())
        return int(lo), int(width)

    # ------------------------------------------------------------------------------------------------------
    # hooks

    @staticmethod
    def bytes_needed(capacity: int) -> int:
        """Bytes the sampler allocates for a memory of ``capacity`` transitions (its structures)."""
        return 0

    def on_add(self, slot: int) -> None:
        """Called after ``slot`` was (over)written with a new transition."""

    @classmethod
    def on_add_members(cls, lists: tuple, which: np.ndarray, slots: np.ndarray) -> None:
        """``on_add(slots[k])`` of member ``which[k]`` for every k, ``lists`` being ``lists(samplers)``: one
        compiled call in the kinds whose ``on_add`` does something."""

    @classmethod
    def update_lists(cls, samplers: list[Sampler]) -> tuple:
        """The arguments ``update_members`` takes before the members' ids (built once per cohort)."""
        return ()

    @classmethod
    def update_members(
        cls, lists: tuple, samplers: list[Sampler], which: np.ndarray, ids: np.ndarray, td_errors: np.ndarray
    ) -> np.ndarray | None:
        """``update_current`` of member ``which[k]`` (``samplers[k]``) with row k of ``ids`` and ``td_errors``, for
        every k, in one compiled call: per member whether its TD errors were finite (where not, its priorities are
        unchanged). None, changing nothing, where the members cannot be updated together (each updates its own)."""
        return None

    def on_invalidate(self, slots: np.ndarray) -> None:
        """The transitions in ``slots`` became unsampleable (a frame storage overwrote their history)."""

    def begin_phase(self, n_batches: int) -> None:
        """``n_batches`` samples follow with no add in between (one burst of gradient steps)."""

    def update(self, slots: np.ndarray, td_abs: np.ndarray) -> None:
        """New abs(TD error) of the transitions in ``slots`` (all current, finite)."""

    @classmethod
    def plans_phases(cls) -> bool:
        """Whether ``begin_phase`` does anything (the loop announces a burst of batches only to those that plan
        it)."""
        return cls.begin_phase is not Sampler.begin_phase

    @classmethod
    def keeps_priorities(cls) -> bool:
        """Whether ``update`` does anything (a sampler that does not override it ignores priorities)."""
        return cls.update is not Sampler.update

    def update_current(self, ids: np.ndarray, td_errors: np.ndarray, stored_ids: np.ndarray) -> bool:
        """What ``ReplayMemory.update_priorities`` calls: False (nothing changed) if a TD error is not
        finite; else ``update`` with the slots of the ids still held (stale ones skipped) and their abs(TD).
        Prioritized samplers override it with one compiled call doing all of it."""
        if not self.keeps_priorities():  # ``update`` does nothing: only the check is left
            return bool(all_finite(td_errors))
        slots, td_abs, finite = current_priorities(ids, td_errors, stored_ids)
        if finite and slots.size:
            self.update(slots, td_abs)
        return finite
