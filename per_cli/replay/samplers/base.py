"""The sampler protocol: what a kind writes (six methods at most), and the framework that carries the seed axis.

What a kind writes
------------------
* ``draw_members`` (required; compiled): for k in ``range(len(which))`` member ``which[k]``'s batch (its slots and
  IS weights into row k of ``slots`` and ``weights``) from that member's own generator, counters and structures;
  returns a status per member (DRAWN, TOO_FEW, FAILED). Its arguments: ``generators`` (typed list), ``counters``
  (the storages' ``counters`` arrays over the seed axis), ``windows`` (int64 (S, 2): ``replay.window`` per member,
  0 for none, and the newest ids that may not start a run, ``replay.chunk - 1``), then the fields of the kind's own
  ``member_lists``, then ``which`` (int64), ``betas`` (float64 per k), ``slots`` (int64 (k, B)) and ``weights``
  (float32 (k, B)).
* ``member_lists(samplers)``: the kind's state over the seed axis (a NamedTuple of the samplers' own arrays with a
  member axis): what its compiled calls read and write in place.
* ``add_members(lists, which, slots, entering)``: event k: member ``which[k]``'s slot ``slots[k]`` was written
  with a sampleable transition (``entering[k]``) or became unsampleable (a frame storage overwrote its history).
* ``update_members(lists, which, ids, td_errors)``: new priorities from the TD errors of row k for member
  ``which[k]`` (ids the slot no longer holds are skipped); per member whether its TD errors were finite (where
  not, nothing of that member changed).
* ``begin_phase(n_batches)``: a burst of ``n_batches`` draws with no add in between follows (per member).
* ``expected_counts(batch_size)``: the kind's distribution, for the χ² contract tests.
* ``scored(lists, which, ids, scores)`` (only a kind whose spec says ``scores``): the networks' opinion of the
  drawn batches (δ, the online and the target network's per-sample losses, each (k, ``multiple`` · B)) before the
  update: the B rows to train on and their IS weights (a sub-draw: LaBER), or None to train on the draw as it is
  (a kind that sets its priorities from the scores here: ReLo).

The framework (this class, :class:`~per_cli.replay.memory.ReplayMemory`, :mod:`per_cli.replay.cohort`) builds a
:class:`MemberLists` once (a solo memory's over a list of one: :attr:`Sampler.own`) and calls those functions over
it, so a solo run is the S = 1 call of the cohort's and a member's batches do not depend on the cohort. The draws
(numba's ``Generator.random``/``integers`` on each member's generator, :func:`draw_distinct`) define a run's random
stream; they reproduce no numpy routine.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

import numba
import numpy as np
from numba.typed import List

from per_cli.replay.stateless import Stateless
from per_cli.replay.storage.ring import CAPACITY, CURSOR, ONE, SIZE, member_axis

DRAWN, TOO_FEW, FAILED = 0, 1, 2  # the status of a member's draw; FAILED: its structure found no mass
WINDOW, RESERVE = 0, 1  # the columns of ``windows``: replay.window (0: none), the newest ids no run may start at


class Storage(Protocol):
    """What a sampler may ask of a storage (the ring ``TransitionStorage``, the Atari frame storage, ...)."""

    capacity: int
    size: int
    cursor: int
    added: int
    ids: np.ndarray  # the id each slot holds (-1: empty)
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
    window, reserve, size = row[WINDOW], row[RESERVE], counters[SIZE]
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


class MemberLists(NamedTuple):
    """What a kind's compiled calls take for a list of members, built once (the arrays are the members' own,
    written in place, loads included): the common ones, then ``own`` (the kind's ``member_lists``)."""

    generators: List
    counters: object  # the storages' counters over the seed axis (storage/ring.py: member_axis)
    windows: np.ndarray  # int64 (S, 2): Sampler.window_row per member
    stored_ids: object  # the storages' ``ids`` columns over the seed axis (the stale-id rule)
    own: tuple  # the kind's member_lists
    samplers: list  # the members' samplers (for the kinds whose updates keep Python-side counts)


def draw_batches(sampler_class, lists: MemberLists, which: np.ndarray, betas: np.ndarray, slots, weights, chunk: int):
    """The kind's ``draw_members`` for these members, into ``slots`` and ``weights`` ((k, B)); with ``chunk`` L > 1
    it draws B / L run starts by the kind's own rule (the reserve in ``windows`` keeps each run inside the held
    ids) and each start becomes a run of L consecutive transitions (``replay.chunk``). The one place both a solo
    memory and a cohort call a draw."""
    common = (lists.generators, lists.counters, lists.windows, *lists.own)
    if chunk == 1:
        return sampler_class.draw_members(*common, which, betas, slots, weights)
    starts = np.zeros((slots.shape[0], slots.shape[1] // chunk), dtype=np.int64)
    start_weights = np.ones(starts.shape, dtype=np.float32)
    status = sampler_class.draw_members(*common, which, betas, starts, start_weights)
    expand_runs(lists.counters, which, starts, start_weights, chunk, slots, weights)
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


class Scored(Protocol):
    """The networks' opinion of the drawn batches a kind's ``scored`` reads (``per_cli.rl.results.Scores``), each
    (k, n) float32."""

    td: np.ndarray  # δ = target − Q(s, a)
    loss: np.ndarray  # the online network's per-sample loss against the TD target
    target_loss: np.ndarray  # the target network's, against the same TD target


class Sampler(Stateless):
    """Picks the slots of a batch. A kind defines ``draw_members`` and, where it keeps more than the common state,
    ``member_lists``, ``add_members``, ``update_members``, ``begin_phase`` (the module's docstring); every other
    method here is the framework's S = 1 call of those.

    Each sampler owns a seeded ``numpy.random.Generator`` (``rng``): same seed, same batches, whatever cohort the
    member is drawn in."""

    window: int | None = None  # replay.window, for the samplers that honour it
    chunk: int = 1  # replay.chunk: a batch is B / chunk runs of chunk consecutive transitions (make_replay sets it)
    multiple: int = 1  # the loop draws multiple · B slots, of which a scoring kind's ``scored`` keeps B (LaBER's m)

    def __init__(self, storage: Storage, rng: np.random.Generator):
        self.storage = storage
        self.rng = rng
        self._own: MemberLists | None = None

    # ------------------------------------------------------------------------------------------------------
    # what a kind writes

    @staticmethod
    def draw_members(*args):  # pragma: no cover - every kind defines it
        raise NotImplementedError

    @classmethod
    def member_lists(cls, samplers: list[Sampler]) -> tuple:
        """The kind's own arguments of its compiled calls for these members (a NamedTuple of their arrays with a
        member axis: :func:`~per_cli.replay.storage.ring.member_axis`). The arrays are the samplers' own."""
        return ()

    @classmethod
    def add_members(cls, lists: MemberLists, which: np.ndarray, slots: np.ndarray, entering: np.ndarray) -> None:
        """Event k: member ``which[k]``'s slot ``slots[k]`` was (over)written with a sampleable transition
        (``entering[k]``), or became unsampleable; in order. One compiled call in the kinds that keep a
        structure."""

    @classmethod
    def update_members(cls, lists: MemberLists, which: np.ndarray, ids: np.ndarray, td_errors: np.ndarray):
        """Member ``which[k]``'s transitions ``ids[k]`` get new priorities from ``td_errors[k]`` (stale ids
        skipped); returns per member whether its TD errors were finite (where not, nothing of it changed)."""
        return np.isfinite(td_errors).all(axis=1)

    @classmethod
    def scored(cls, lists: MemberLists, which: np.ndarray, ids: np.ndarray, scores: Scored):
        """Members ``which``'s drawn batches (their ids, (k, ``multiple`` · B)) as the networks score them now,
        before the update (called only for a kind whose spec says ``scores``): (positions (k, B) int64 into each
        drawn row, their IS weights (k, B) float32) to train on, or None to train on the draw as it is."""
        return None

    def begin_phase(self, n_batches: int) -> None:
        """``n_batches`` samples follow with no add in between (one burst of gradient steps)."""

    def expected_counts(self, batch_size: int) -> np.ndarray:
        """Each slot's expected number of appearances in the next batch drawn now (outside a phase), as a
        float array over the capacity: the kind's distribution, stated so that the sampler contract tests can
        check its draws against it (χ²). Every registered kind states it."""
        raise NotImplementedError(f"{type(self).__name__} does not state its distribution (expected_counts)")

    @staticmethod
    def bytes_needed(capacity: int) -> int:
        """Bytes the sampler allocates for a memory of ``capacity`` transitions (its structures)."""
        return 0

    # ------------------------------------------------------------------------------------------------------
    # the framework: the lists over the seed axis, and the S = 1 calls

    @classmethod
    def lists(cls, samplers: list[Sampler]) -> MemberLists:
        """The :class:`MemberLists` of these members (built once per cohort)."""
        return MemberLists(
            List([s.rng for s in samplers]),
            member_axis([s.storage.counters for s in samplers]),
            np.stack([s.window_row() for s in samplers]),
            member_axis([s.storage.ids for s in samplers]),
            cls.member_lists(samplers),
            list(samplers),
        )

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_own": None}  # (typed lists do not pickle: rebuilt on first use)

    @property
    def own(self) -> MemberLists:
        """``lists([self])``, built on first use."""
        if self._own is None:
            self._own = type(self).lists([self])
        return self._own

    @classmethod
    def plans_phases(cls) -> bool:
        """Whether ``begin_phase`` does anything (the loop announces a burst only to the kinds that plan it)."""
        return cls.begin_phase is not Sampler.begin_phase

    @classmethod
    def keeps_priorities(cls) -> bool:
        """Whether ``update_members`` does more than check the TD errors."""
        return cls.update_members.__func__ is not Sampler.update_members.__func__

    @classmethod
    def keeps_structure(cls) -> bool:
        """Whether ``add_members`` does anything (else the framework does not call it)."""
        return cls.add_members.__func__ is not Sampler.add_members.__func__

    def sample(self, batch_size: int, beta: float) -> tuple[np.ndarray, np.ndarray]:
        """(slots, importance-sampling weights as float32): ``draw_members`` over this member alone."""
        slots = np.empty(batch_size, dtype=np.int64)
        weights = np.empty(batch_size, dtype=np.float32)
        betas = np.array([beta], dtype=np.float64)
        # (the batch's arrays seen with a member axis of one, as the call takes them)
        status = draw_batches(type(self), self.own, ONE, betas, slots[None], weights[None], self.chunk).item()
        if status != DRAWN:
            self.raise_failed(int(status), batch_size)
        return slots, weights

    def add(self, slots: np.ndarray, entering: np.ndarray) -> None:
        """``add_members`` of this member alone (event k: slot ``slots[k]``, ``entering[k]``)."""
        slots = np.asarray(slots, dtype=np.int64).reshape(-1)
        entering = np.broadcast_to(np.asarray(entering, dtype=np.bool_), slots.shape)
        type(self).add_members(self.own, np.zeros(slots.shape[0], dtype=np.int64), slots, entering)

    def update_ids(self, ids: np.ndarray, td_errors: np.ndarray) -> bool:
        """``update_members`` of this member alone; False (nothing changed) on a non-finite TD error."""
        ids = np.ascontiguousarray(ids, dtype=np.int64).reshape(1, -1)
        td_errors = np.ascontiguousarray(td_errors).reshape(1, -1)
        return bool(type(self).update_members(self.own, ONE, ids, td_errors).item())

    def update(self, slots: np.ndarray, td_abs: np.ndarray) -> None:
        """New abs(TD error) of the transitions in ``slots`` (all current, finite): ``update_ids`` of their ids."""
        self.update_ids(self.storage.ids[np.asarray(slots, dtype=np.int64)], np.asarray(td_abs))

    def raise_failed(self, status: int, batch_size: int) -> None:
        """Raise the error of a draw that returned ``status`` (not DRAWN) for this member."""
        lo, width = self.window_bounds()
        if status == FAILED and width < 0:
            raise ValueError(f"no run of replay.chunk {self.chunk} fits inside the sampleable transitions")
        if status == FAILED:
            where = "the replay window" if width > 0 else "the memory"
            raise ValueError(f"no sampleable transition in {where} (zero total priority)")
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
