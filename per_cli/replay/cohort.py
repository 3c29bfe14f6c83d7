"""A cohort's replay: the members' memories (one config) drawn, stored and updated in ONE compiled call each, the same
functions a solo memory calls over a list of one, so a member's batches are its solo run's whatever the cohort. A
member's batch is a :class:`RowBatch`, a read-only row of the draw's stacked arrays (:func:`stacked_rows`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

import numpy as np

from per_cli.replay.gather import Gathered, gather_for
from per_cli.replay.memory import Batch, ReplayMemory
from per_cli.replay.sampler import DRAWN, MemberLists, defines, draw_batches, draw_error
from per_cli.replay.storage.ring import BatchArrays, episodes_held_members, latest_slots_members, member_axis
from per_cli.replay.storage.rows import NO_ERRORS, Rows, joined, rows_of
from per_cli.replay.store import store_for
from per_cli.replay.writers.base import Writer


class Row(NamedTuple):
    """Where a :class:`RowBatch` lies: row ``k`` of the stacked ``arrays`` of the cohort ``draw``."""

    arrays: BatchArrays
    k: int
    draw: DrawnBatches


class RowBatch(Batch):
    """Batch k of a cohort draw: each field is row k of the draw's stacked array, and ``rows`` its :class:`Row`,
    so that a cohort update can take the stacked arrays whole instead of stacking the rows again. A field's view
    is made when first read and kept in the batch's ``__dict__`` (later reads are plain attribute reads). Its
    fields cannot be rebound, so a RowBatch is always its rows (writes into a field's values write the stacked
    array, which the update then reads as well)."""

    def __init__(self, arrays: BatchArrays, k: int, batches: DrawnBatches):
        self.__dict__["rows"] = Row(arrays, k, batches)

    @property
    def device_stacks(self):
        """Its stacks gathered on the training device (replay.device_frames), None where the memory keeps none."""
        device = self.rows.draw.device
        return None if device is None else device[self.rows.k]

    def __getattr__(self, name: str) -> np.ndarray:  # (only for what the instance lacks: a field not read yet)
        if name not in BatchArrays._fields:
            raise AttributeError(name)
        row = self.__dict__["rows"]
        view = self.__dict__[name] = getattr(row.arrays, name)[row.k]
        return view

    def __setattr__(self, name: str, value) -> None:
        raise AttributeError(f"a cohort draw's batch is read-only (its fields are rows of the draw: {name})")


class DrawnBatches(Sequence):
    """The batches of one cohort draw, in the members' order: ``arrays`` the draw's stacked arrays, item k member
    k's :class:`RowBatch`, made when first asked for (the loop's phases take the arrays whole; a member's own
    batch is asked for only where that member does its own work), or None where its draw raised (``drawn[k]``
    False)."""

    def __init__(self, arrays: BatchArrays, drawn: np.ndarray, device: list | None = None):
        self.arrays, self.drawn, self.device = arrays, drawn, device
        self.complete = bool(drawn.all())
        self._made: dict[int, RowBatch] = {}

    def __len__(self) -> int:
        return len(self.drawn)

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[j] for j in range(*k.indices(len(self)))]
        k = range(len(self))[k]  # (an index from the end, or an IndexError)
        if not self.drawn[k]:
            return None
        batch = self._made.get(k)
        if batch is None:
            batch = self._made[k] = RowBatch(self.arrays, k, self)
        return batch


def stacked_rows(batches: Sequence[Batch]) -> BatchArrays:
    """The arrays of ``batches`` (none of them None) stacked over the seed axis: the draw's arrays themselves when
    the batches are all its rows in order (a whole :class:`DrawnBatches`, or its batches listed in order), those
    rows where they are some rows of one draw (one gather per array), else each field's arrays stacked."""
    if type(batches) is DrawnBatches and batches.complete:
        return batches.arrays
    first = batches[0]
    arrays = first.rows.arrays if type(first) is RowBatch else None
    if arrays is not None and all(type(b) is RowBatch and b.rows.arrays is arrays for b in batches):
        rows = [batch.rows.k for batch in batches]
        if rows == list(range(len(arrays.indices))):  # (not obs: maybe SKIPPED, gather.py)
            return arrays
        index = np.asarray(rows, dtype=np.int64)
        return BatchArrays(*(array[index] for array in arrays))
    return BatchArrays(*(np.stack([getattr(b, name) for b in batches]) for name in BatchArrays._fields))


class CohortSampling:
    """The members' memories (one sampler class, storage class and capacity): the kind's draw over the seed axis, then
    the storages' gather (:func:`~per_cli.replay.gather.gather_for`, chosen once). Their compiled state moves into
    blocks with a seed axis, each memory keeping views of its rows (:func:`~per_cli.replay.storage.ring.member_axis`),
    so a checkpoint load reaches it before or after; the cohort built last over a memory is the one that sees it.
    ``host_states`` False: no host ``obs``/``next_obs`` are gathered (frames kept on the training device)."""

    def __init__(self, memories: Sequence[ReplayMemory], host_states: bool = True):
        kinds = {type(m.sampler) for m in memories}
        storages = [m.storage for m in memories]
        settings = {(m.n_step, m.gamma, m.sampler.chunk, s.capacity) for m, s in zip(memories, storages, strict=True)}
        if len(kinds) != 1 or len({type(s) for s in storages}) != 1 or len(settings) != 1:
            raise ValueError(
                "cohort sampling needs memories of one kind on one storage class, one capacity, one n-step, γ and chunk"
            )
        (self.kind,) = kinds
        ((n_step, gamma, self._chunk, _),) = settings
        self.memories = list(memories)
        self._lists = MemberLists.of([m.sampler for m in memories])
        self._structured = defines(self.kind, "add_members")
        self._prioritized = defines(self.kind, "update_members")  # (else an update only checks the TD errors)
        self._gather = gather_for(storages, n_step, gamma, host_states)
        self._episode_ids = member_axis(storages, "episode_ids")
        self.storer = store_for(storages)  # (chosen once: the storages' class; before the memories rebuild views)
        for memory in self.memories:
            memory.adopted()
        self._relabels = any(type(m.writer) is not Writer for m in memories)  # (else the rows go as they come)
        self.failed: dict[int, tuple[int, int]] = {}  # member: (batch size, its draw's status)

    def store(
        self, which: np.ndarray, obs, actions, rewards, next_obs, terminated, truncated
    ) -> Mapping[int, Exception]:
        """Members ``which`` (int64) each give transition k of the arrays (row k of each) to their writer, as their
        ``memory.add`` would; what the writers pass on is stored in ONE call (replay/store.py), then the kind is
        told. Returns the rows whose member's writer or store refused them, with why (the others were stored)."""
        rows = rows_of(which, obs, actions, rewards, next_obs, terminated, truncated)
        origin, errors = None, {}
        if self._relabels:
            rows, origin, errors = self._written(rows)
        stored = self.storer(rows)
        if self._structured and stored.events.which.shape[0]:
            self.kind.add_members(self._lists, *stored.events)
        if not stored.errors:
            return errors or NO_ERRORS
        for k, exc in stored.errors.items():
            errors.setdefault(k if origin is None else int(origin[k]), exc)
        return errors

    def _written(self, rows: Rows) -> tuple[Rows, np.ndarray, dict[int, Exception]]:
        """What the members' writers pass on for transition k each (their ``add``, which buffers them: hindsight
        relabelling), as one :class:`Rows`; per row, the transition k it came from; the transitions a writer
        refused, with why."""
        parts, origin, errors = [], [], {}
        for k, i in enumerate(rows.which.tolist()):
            try:
                written = self.memories[i].writer.add(Rows(*(column[k : k + 1] for column in rows)))
            except Exception as exc:  # noqa: BLE001 - this member's writer fails, the others go on
                errors[k] = exc
                continue
            parts.append(written)
            origin.append(np.full(written.which.shape[0], k, dtype=np.int64))
        return joined(parts, rows), np.concatenate(origin) if origin else np.zeros(0, dtype=np.int64), errors

    def latest(self, which: Sequence[int]) -> Gathered:
        """The transition each member of ``which`` added last, as a gather of one slot per member (each field
        (members, 1, ...); its id ``indices``): each member's ``memory.latest()``."""
        members = np.asarray(which, dtype=np.int64)
        slots = latest_slots_members(self._lists.counters, members).reshape(-1, 1)
        return self._gather(members, slots, np.ones(slots.shape, dtype=np.float32))

    def episodes_held(self, which: Sequence[int]) -> np.ndarray:
        """Each member's ``memory.episodes_held()`` (members ``which``), in one compiled call."""
        return episodes_held_members(self._lists.counters, self._episode_ids, np.asarray(which, dtype=np.int64))

    def sample(self, which: Sequence[int], batch_size: int, betas: Sequence[float]) -> DrawnBatches:
        """The batches of members ``which``, as their ``memory.sample(batch_size, beta)`` draws them; None where
        that raises (the member is in ``failed``: ``raise_failed`` raises its error)."""
        n = len(which)
        members = np.asarray(which, dtype=np.int64)
        betas = np.asarray(betas, dtype=np.float64)
        slots = np.zeros((n, batch_size), dtype=np.int64)  # (a failed member's row gathers slot 0: harmless)
        weights = np.empty((n, batch_size), dtype=np.float32)
        status = draw_batches(self.kind, self._lists, members, betas, slots, weights, self._chunk)
        arrays, device = self._gather(members, slots, weights)
        drawn = status == DRAWN
        self.failed = {which[k]: (batch_size, int(status[k])) for k in (~drawn).nonzero()[0].tolist()}
        return DrawnBatches(arrays, drawn, device)

    def scored(self, which: Sequence[int], batches: Sequence[Batch], scores) -> Sequence[Batch]:
        """The kind's ``scored`` of these drawn batches (``scores``: the networks' opinion of them, each (k, n)):
        the batches it keeps (rows of the draw, with its IS weights), or ``batches`` themselves."""
        arrays = stacked_rows(batches)
        picked = self.kind.scored(self._lists, np.asarray(which, dtype=np.int64), arrays.indices, scores)
        if picked is None:
            return batches
        positions, weights = picked
        rows = np.arange(len(positions))[:, None]
        kept = BatchArrays(*(array[rows, positions] for array in arrays))._replace(weights=weights)
        return DrawnBatches(kept, np.ones(len(positions), dtype=np.bool_))

    def raise_failed(self, i: int) -> None:
        """Raise member ``i``'s error of the last ``sample``: the error its draw's status means, as its solo
        run's draw raises it."""
        batch_size, status = self.failed[i]
        memory = self.memories[i]
        if batch_size > len(memory):
            memory.sample(batch_size)  # (its check of the size raises, before any draw)
        raise draw_error(memory.sampler, status, batch_size)

    def update_priorities(
        self, which: Sequence[int], ids: Sequence[np.ndarray] | Callable[[], Sequence[np.ndarray]],
        td_errors: Sequence[np.ndarray],
    ):  # fmt: skip
        """Members ``which`` get their new priorities as each ``memory.update_priorities(ids[k], td_errors[k])``
        sets them (the kind's ``update_members``); returns per member whether its TD errors were finite (where not,
        nothing changed for it: its run diverged). ``ids`` (int64) and
        ``td_errors`` are rows of one length, as a draw or an insertion makes them (ValueError otherwise); ``ids``
        may be a function returning them (called only where priorities are kept)."""
        if not self._prioritized:
            return np.isfinite(_rows(td_errors)).all(axis=1)
        ids, td_errors = _rows(ids() if callable(ids) else ids), _rows(td_errors)
        if ids.dtype != np.int64:
            raise ValueError(f"priority updates need int64 transition ids, got {ids.dtype}")
        return self.kind.update_members(self._lists, np.asarray(which, dtype=np.int64), ids, td_errors)


def _rows(arrays: Sequence[np.ndarray] | np.ndarray) -> np.ndarray:
    """1-D arrays of one length and dtype (or the rows of a 2-D array) as the rows of one C array, values
    unchanged; ValueError for arrays of several shapes or dtypes."""
    if isinstance(arrays, np.ndarray) and arrays.ndim == 2:
        return np.ascontiguousarray(arrays)
    first = arrays[0]
    if any(a.dtype != first.dtype or a.shape != first.shape or a.ndim != 1 for a in arrays):
        raise ValueError("the members' rows must be 1-D arrays of one length and dtype")
    return np.stack(arrays)
