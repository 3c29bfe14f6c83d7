"""The gather: drawn slots into batches over a list of members (a solo memory's list holds one), one
implementation per storage class, chosen once by :func:`gather_for`: the rings' in ONE compiled call
(:class:`RingGather`; bit-packed states then unpacked in one call over every member's rows), any other storage's
own ``gather`` (:class:`StorageGather`: it stacks frames, also on the training device where it mirrors them). A
draw knows nothing of the storage.

Where nothing reads a batch's states on the host (the loop decides it once: every storage keeps its frames on the
training device and the update reads them there), the gather is built with ``host_states=False``: its ``obs`` and
``next_obs`` are :data:`SKIPPED`, never built, and reading them as arrays raises.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from per_cli.replay.storage.packed import PackedTransitionStorage, unpack_rows
from per_cli.replay.storage.ring import (
    BatchArrays,
    RingColumns,
    TransitionStorage,
    gather_members,
    member_axis,
    nstep_members,
)

_SKIPPED_WHY = (
    "a batch's host obs/next_obs were not gathered: this run reads its states from the training device only "
    "(replay.device_frames, no i.i.d. or correlation measure); whatever read them needs host_states=True"
)


class SkippedStates:
    """What a batch's ``obs`` and ``next_obs`` hold where its gather was built with ``host_states=False``: a row or
    slice of it is itself (a batch's rows are taken as for arrays), and anything that reads it as an array (numpy,
    torch, ``len``, iteration) raises RuntimeError instead of reading garbage."""

    def __getitem__(self, index) -> SkippedStates:
        return self

    def __array__(self, *args, **kwargs):
        raise RuntimeError(_SKIPPED_WHY)

    def __len__(self) -> int:
        raise RuntimeError(_SKIPPED_WHY)

    def __iter__(self):
        raise RuntimeError(_SKIPPED_WHY)

    def __repr__(self) -> str:
        return "SKIPPED"


SKIPPED = SkippedStates()
_STATES = ("obs", "next_obs")


class Gathered(NamedTuple):
    """A gather's batches over the seed axis, and per member its stacks on the training device (None where the
    storages keep none there)."""

    arrays: BatchArrays
    device: list | None


class RingGather:
    """Rings, plain or bit-packed: rows gathered by :func:`~per_cli.replay.storage.ring.gather_members` (n-step
    returns by :func:`~per_cli.replay.storage.ring.nstep_members`) for all members in one call, on the rings'
    columns as blocks with a seed axis (:func:`~per_cli.replay.storage.ring.member_axis`: several storages move
    into them). Bit-packed rings' rows (``states``: the states' shape; None for plain rings) are unpacked after
    it, every member's states and next states in one :func:`~per_cli.replay.storage.packed.unpack_rows`."""

    def __init__(self, storages: Sequence[TransitionStorage], n_step: int, gamma: float):
        ((self.dtype, self.row_shape),) = {(s.obs.dtype, s.row_shape) for s in storages}  # (one config: one row)
        packed = type(storages[0]) is PackedTransitionStorage  # (one class: gather_for)
        (self.states,) = {s.obs_shape if packed else None for s in storages}
        blocks = RingColumns(*(member_axis(storages, name) for name in RingColumns._fields))
        rows = (len(storages), storages[0].capacity, -1)  # (the states as flat rows)
        self.columns = blocks._replace(obs=blocks.obs.reshape(rows), next_obs=blocks.next_obs.reshape(rows))
        self.n_step, self.gamma = n_step, gamma

    def __call__(self, which: np.ndarray, slots: np.ndarray, weights: np.ndarray) -> Gathered:
        shape, c = slots.shape, self.columns
        rows = np.empty((2, *shape, *self.row_shape), dtype=self.dtype)  # (states, next states: one block)
        obs_rows, next_rows = rows
        actions, ids = np.empty(shape, dtype=np.int64), np.empty(shape, dtype=np.int64)
        ages, episodes = np.empty(shape, dtype=np.int64), np.empty(shape, dtype=np.int64)
        rewards, terminated = np.empty(shape, dtype=np.float32), np.empty(shape, dtype=np.float32)
        if self.n_step > 1:  # (the n-step rewards and terminations kept, the stored ones gathered into spares)
            last = np.empty(shape, dtype=np.int64)
            nstep_members(which, slots, self.n_step, self.gamma, c.rewards, c.terminated, c.truncated, c.ids,
                          c.counters, rewards, terminated, last)  # fmt: skip
            gather_members(which, slots, last, *c, obs_rows, actions, np.empty(shape, dtype=np.float32), next_rows,
                           np.empty(shape, dtype=np.float32), ids, weights, ages, episodes)  # fmt: skip
        else:
            gather_members(which, slots, slots, *c, obs_rows, actions, rewards, next_rows, terminated, ids, weights,
                           ages, episodes)  # fmt: skip
        obs, next_obs = rows if self.states is None else unpack_rows(rows, self.states)
        return Gathered(BatchArrays(obs, actions, rewards, next_obs, terminated, ids, weights, ages, episodes), None)


class StorageGather:
    """Any other storage: each member's storage gathers its own rows (``storage.gather``). ``host_states`` False:
    not their states (``storage.gather_rest``; ``obs`` and ``next_obs`` are :data:`SKIPPED`), for storages that all
    gather them on the training device (``device_stacks``; :func:`gather_for` refuses any other)."""

    def __init__(self, storages: Sequence[Any], n_step: int, gamma: float, host_states: bool = True):
        self.storages = list(storages)
        self.n_step, self.gamma = n_step, gamma
        # (chosen once: the storages' rows with or without their states, and the fields stacked over the members)
        self._rows = _with_states if host_states else _without_states
        self._names = _NAMES if host_states else tuple(n for n in _NAMES if n not in _STATES)
        self._skipped = {} if host_states else dict.fromkeys(_STATES, SKIPPED)

    def _one(self, storage, slots: np.ndarray) -> tuple[dict, Any]:
        """(the batch's fields but the weights, its device stacks or None) of ``slots`` in ``storage``."""
        ids = storage.ids[slots]
        last = None
        if self.n_step > 1:  # the stored one-step transitions summed into n-step ones (ring.nstep_members)
            rewards, terminated, last = storage.nstep(slots, self.n_step, self.gamma)
            fields = {**self._rows(storage, slots, last), "rewards": rewards, "terminated": terminated}
        else:
            fields = self._rows(storage, slots, None)
        fields.update(indices=ids, ages=storage.added - 1 - ids, episodes=storage.episode_ids[slots])
        device = storage.device_stacks(slots, last) if getattr(storage, "mirror", None) is not None else None
        return fields, device

    def __call__(self, which: np.ndarray, slots: np.ndarray, weights: np.ndarray) -> Gathered:
        if which.shape[0] == 1:  # (a member axis of one: views of the storage's arrays, no copy)
            fields, device = self._one(self.storages[int(which[0])], slots[0])
            return Gathered(self._arrays(fields, weights, lambda array: array[None]),
                            None if device is None else [device])  # fmt: skip
        rows = [self._one(self.storages[i], slots[k]) for k, i in enumerate(which.tolist())]
        fields = {name: [row[name] for row, _ in rows] for name in self._names}
        device = [d for _, d in rows] if any(d is not None for _, d in rows) else None
        return Gathered(self._arrays(fields, weights, np.stack), device)

    def _arrays(self, fields: dict, weights: np.ndarray, axis) -> BatchArrays:
        """The batches' arrays from a gather's ``fields``, each given its member axis by ``axis`` (the skipped
        states :data:`SKIPPED`)."""
        return BatchArrays(**{name: axis(fields[name]) for name in self._names}, **self._skipped, weights=weights)


_NAMES = ("obs", "actions", "rewards", "next_obs", "terminated", "indices", "ages", "episodes")  # (but weights)


def _with_states(storage, slots: np.ndarray, last: np.ndarray | None) -> dict:
    return storage.gather(slots, last)


def _without_states(storage, slots: np.ndarray, last: np.ndarray | None) -> dict:
    return storage.gather_rest(slots)  # (the look-ahead ``last`` moves only next_obs: not gathered)


def gather_for(
    storages: Sequence[Any], n_step: int, gamma: float, host_states: bool = True
) -> RingGather | StorageGather:
    """The gather of these storages (of one class: a cohort's members share their config). ``host_states`` False:
    the batches' host ``obs``/``next_obs`` are not built (:class:`StorageGather`), for storages whose stacks are
    gathered on the training device (ValueError for any other)."""
    if not host_states and any(getattr(s, "mirror", None) is None for s in storages):
        raise ValueError("a gather without the host states needs storages that keep their frames on the device")
    if {type(s) for s in storages} in ({TransitionStorage}, {PackedTransitionStorage}):
        return RingGather(storages, n_step, gamma)
    return StorageGather(storages, n_step, gamma, host_states)
