"""The sampler protocol (what a kind writes) and the framework functions that carry the seed axis.

A kind writes ``draw_members`` (compiled: member ``which[k]``'s batch into row k of ``slots`` and ``weights``, from
its own generator and structures) and, where it keeps more state, the hooks docs/extending.md lists. The framework
(:class:`MemberLists`, :func:`draw_batches`, :mod:`per_cli.replay.cohort`) calls them over a list of members, one
for a solo memory, so a member's batches do not depend on its cohort. The draws reproduce no numpy routine."""

from __future__ import annotations

import inspect
from typing import NamedTuple, Protocol

import numba
import numpy as np
from numba.typed import List

from per_cli.replay.integers import uniform_integer
from per_cli.replay.records import counters_dtype, new_counters
from per_cli.replay.stateless import Stateless
from per_cli.replay.storage.ring import member_axis, oldest_id

DRAWN, TOO_FEW, FAILED = 0, 1, 2  # the status of a member's draw; FAILED: its structure found no mass
# a member's ``windows`` row: replay.window (0: none), the newest ids no run may start at
WINDOW_ROW = counters_dtype("window", "reserve")


class Storage(Protocol):
    """What a sampler may ask of a storage (the ring ``TransitionStorage``, the Atari frame storage, ...)."""

    capacity: int
    added: int
    ids: np.ndarray  # the id each slot holds (-1: empty)
    counters: np.ndarray  # 0-d, storage/ring.py's RING_COUNTERS: cursor, size, added, ...

    @property
    def latest_slot(self) -> int: ...

    def oldest_sampleable_id(self) -> int: ...


@numba.njit(cache=True, nogil=True)
def window_of(counters, row):
    """(first slot, width) of the ring slots a draw is restricted to, ``row`` being the member's ``windows`` row:
    the ``window`` newest (all held where it is 0 or covers them) without the ``reserve`` newest. (0, 0) when
    nothing restricts the draw; width -1 when nothing is left."""
    window, reserve, size = row.window, row.reserve, counters.size
    span = window if 0 < window < size else size
    if span == size and reserve == 0:
        return 0, 0
    width = span - reserve
    return (counters.cursor - span) % counters.capacity, width if width > 0 else -1


@numba.njit(cache=True, nogil=True)
def candidate_ids(counters, row):
    """(lowest id, count) of the candidates, ``row`` being the member's ``windows`` row: the sampleable ids, or
    the ``window`` newest of them, without the ``reserve`` newest (no run of ``replay.chunk`` may reach past the
    newest)."""
    lo = oldest_id(counters)
    if row.window > 0:
        lo = max(lo, counters.added - row.window)
    return lo, max(counters.added - row.reserve - lo, 0)


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
        capacity = counters[which[k]].capacity
        for r in range(starts.shape[1]):
            for m in range(chunk):
                slots[k, r * chunk + m] = (starts[k, r] + m) % capacity
                weights[k, r * chunk + m] = start_weights[k, r]


class MemberLists(NamedTuple):
    """What a kind's compiled calls take for a list of members, built once: the common ones, then ``own`` (the
    kind's ``member_lists``). Each array has a seed axis, the members' own arrays being its rows
    (:func:`~per_cli.replay.storage.ring.member_axis`), written in place, loads included; the generators stay
    the members' own (a typed list)."""

    generators: List
    counters: np.ndarray  # (S,) RING_COUNTERS: the storages' counters (storage/ring.py: member_axis)
    windows: np.ndarray  # (S,) WINDOW_ROW: Sampler.window_row per member
    stored_ids: np.ndarray  # int64 (S, capacity): the storages' ``ids`` columns (the stale-id rule)
    own: tuple  # the kind's member_lists
    samplers: list  # the members' samplers (for the kinds that read their one config's settings from them: LaBER)

    @classmethod
    def of(cls, samplers: list[Sampler]) -> MemberLists:
        """The lists of these members (of one kind, on storages of one capacity)."""
        storages = [s.storage for s in samplers]
        return cls(
            List([s.rng for s in samplers]),
            member_axis(storages, "counters"),
            np.stack([s.window_row() for s in samplers]),
            member_axis(storages, "ids"),
            type(samplers[0]).member_lists(samplers),
            list(samplers),
        )


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
        value = uniform_integer(generator, 0, j + 1)
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
        r = uniform_integer(generator, 0, t + 1)
        out[t], out[r] = out[r], out[t]


class Scored(Protocol):
    """The networks' opinion of the drawn batches a kind's ``scored`` reads (``per_cli.rl.results.Scores``), each
    (k, n) float32."""

    td: np.ndarray  # δ = target − Q(s, a)
    loss: np.ndarray  # the online network's per-sample loss against the TD target
    target_loss: np.ndarray  # the target network's, against the same TD target


class Sampler(Stateless):
    """Picks the slots of a batch: what a kind writes (the module's docstring). Each sampler owns a seeded
    ``numpy.random.Generator`` (``rng``): same seed, same batches, whatever cohort the member is drawn in."""

    window: int | None = None  # replay.window, for the samplers that honour it
    chunk: int = 1  # replay.chunk: a batch is B / chunk runs of chunk consecutive transitions (make_replay sets it)
    multiple: int = 1  # the loop draws multiple · B slots, of which a scoring kind's ``scored`` keeps B (LaBER's m)

    def __init__(self, storage: Storage, rng: np.random.Generator, window: int | None = None):
        if window is not None and window < 1:
            raise ValueError(f"replay.window must be >= 1 or None, got {window}")
        self.storage, self.rng, self.window = storage, rng, window

    @staticmethod
    def draw_members(*args):  # pragma: no cover - every kind defines it
        """``(generators, counters, windows, *member_lists, which, betas, slots, weights)`` (:class:`MemberLists`'
        fields, then int64 ``which``, float64 ``betas`` per k, int64 ``slots`` and float32 ``weights`` (k, B)) ->
        a status per k (DRAWN, TOO_FEW, FAILED), compiled."""
        raise NotImplementedError

    @classmethod
    def member_lists(cls, samplers: list[Sampler]) -> tuple:
        """The kind's own arguments of its compiled calls for these members (a NamedTuple of the samplers' own
        arrays with a seed axis: :func:`~per_cli.replay.storage.ring.member_axis`)."""
        return ()

    @classmethod
    def add_members(cls, lists: MemberLists, which: np.ndarray, slots: np.ndarray, entering: np.ndarray) -> None:
        """Event k, in order: member ``which[k]``'s slot ``slots[k]`` was written with a sampleable transition
        (``entering[k]``), or became unsampleable (a frame storage overwrote its history)."""

    @classmethod
    def update_members(cls, lists: MemberLists, which: np.ndarray, ids: np.ndarray, td_errors: np.ndarray):
        """Member ``which[k]``'s transitions ``ids[k]`` get new priorities from ``td_errors[k]`` (ids its ring no
        longer holds skipped); returns per member whether its TD errors were finite (where not, nothing of it
        changed)."""
        return np.isfinite(td_errors).all(axis=1)

    @classmethod
    def scored(cls, lists: MemberLists, which: np.ndarray, ids: np.ndarray, scores: Scored):
        """Only for a kind whose spec says ``scores``: members ``which``'s drawn batches (ids (k, ``multiple`` ·
        B)) as the networks score them before the update. Returns (positions (k, B) int64 into each drawn row,
        their IS weights (k, B) float32) to train on, or None to train on the draw as it is."""
        return None

    def begin_phase(self, n_batches: int) -> None:
        """``n_batches`` draws follow with no add in between (one burst of gradient steps)."""

    def expected_counts(self, batch_size: int) -> np.ndarray:
        """Each slot's expected number of appearances in the next batch drawn now (outside a phase), over the
        capacity: the kind's distribution, which the χ² contract tests check its draws against."""
        raise NotImplementedError(f"{type(self).__name__} does not state its distribution (expected_counts)")

    @staticmethod
    def bytes_needed(capacity: int) -> int:
        """Bytes the sampler allocates for a memory of ``capacity`` transitions (its structures)."""
        return 0

    def window_row(self) -> np.ndarray:
        """This member's ``windows`` row (0-d :data:`WINDOW_ROW`): ``replay.window`` or 0, and the ``chunk - 1``
        newest ids no run may start at."""
        return new_counters(WINDOW_ROW, window=self.window or 0, reserve=self.chunk - 1)

    def active_window(self) -> tuple[int, int]:
        """(first slot, width) of the slots a draw is restricted to now (:func:`window_of`)."""
        return window_of(self.storage.counters[()], self.window_row()[()])

    def candidates(self) -> tuple[int, int]:
        """(lowest id, count) of the ids a draw may pick now (:func:`candidate_ids`)."""
        return candidate_ids(self.storage.counters[()], self.window_row()[()])


def defines(kind: type[Sampler], name: str) -> bool:
    """Whether ``kind`` overrides the protocol's method ``name`` (else the framework need not call it)."""
    return inspect.getattr_static(kind, name) is not inspect.getattr_static(Sampler, name)


def draw_error(sampler: Sampler, status: int, batch_size: int) -> ValueError:
    """The error of a draw that returned ``status`` (not DRAWN) for this member."""
    _, width = sampler.active_window()
    if status == FAILED and width < 0:
        return ValueError(f"no run of replay.chunk {sampler.chunk} fits inside the sampleable transitions")
    if status == FAILED:
        where = "the replay window" if width > 0 else "the memory"
        return ValueError(f"no sampleable transition in {where} (zero total priority)")
    held = sampler.storage.added - sampler.storage.oldest_sampleable_id()
    return ValueError(f"only {held} sampleable transitions, {batch_size} were asked for")
