"""The gather: drawn slots into batches over a list of members (a solo memory's list holds one), one
implementation per storage class, chosen once by :func:`gather_for`: the plain rings' in ONE compiled call
(:class:`RingGather`), any other storage's own ``gather`` (:class:`StorageGather`: it unpacks, or stacks frames,
also on the training device where it mirrors them). A draw knows nothing of the storage.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from per_cli.replay.storage.ring import (
    BatchArrays,
    RingColumns,
    TransitionStorage,
    batch_arrays,
    gather_members,
    member_axis,
    nstep_members,
)


class Gathered(NamedTuple):
    """A gather's batches over the seed axis, and per member its stacks on the training device (None where the
    storages keep none there)."""

    arrays: BatchArrays
    device: list | None


class RingGather:
    """Plain rings: rows gathered by :func:`~per_cli.replay.storage.ring.gather_members` (n-step returns by
    :func:`~per_cli.replay.storage.ring.nstep_members`) for all members in one call, on the rings' columns as
    blocks with a seed axis (:func:`~per_cli.replay.storage.ring.member_axis`: several storages move into them)."""

    def __init__(self, storages: Sequence[TransitionStorage], n_step: int, gamma: float):
        ((self.dtype, self.row_shape),) = {(s.obs.dtype, s.row_shape) for s in storages}  # (one config: one row)
        blocks = RingColumns(*(member_axis(storages, name) for name in RingColumns._fields))
        rows = (len(storages), storages[0].capacity, -1)  # (the states as flat rows)
        self.columns = blocks._replace(obs=blocks.obs.reshape(rows), next_obs=blocks.next_obs.reshape(rows))
        self.n_step, self.gamma = n_step, gamma

    def __call__(self, which: np.ndarray, slots: np.ndarray, weights: np.ndarray) -> Gathered:
        out = batch_arrays(slots.shape[0], slots.shape[1], self.dtype, self.row_shape)._replace(weights=weights)
        c = self.columns
        if self.n_step > 1:
            rewards, terminated, last = (np.empty(slots.shape, dtype=t) for t in (np.float32, np.float32, np.int64))
            nstep_members(which, slots, self.n_step, self.gamma, c.rewards, c.terminated, c.truncated, c.ids,
                          c.counters, rewards, terminated, last)  # fmt: skip
            gather_members(which, slots, last, *c, *out)
            out.rewards[...], out.terminated[...] = rewards, terminated
        else:
            gather_members(which, slots, slots, *c, *out)
        return Gathered(out, None)


class StorageGather:
    """Any other storage: each member's storage gathers its own rows (``storage.gather``)."""

    def __init__(self, storages: Sequence[Any], n_step: int, gamma: float):
        self.storages = list(storages)
        self.n_step, self.gamma = n_step, gamma

    def _one(self, storage, slots: np.ndarray) -> tuple[dict, Any]:
        """(the batch's fields but the weights, its device stacks or None) of ``slots`` in ``storage``."""
        ids = storage.ids[slots]
        last = None
        if self.n_step > 1:  # the stored one-step transitions summed into n-step ones (ring.nstep_members)
            rewards, terminated, last = storage.nstep(slots, self.n_step, self.gamma)
            fields = {**storage.gather(slots, last), "rewards": rewards, "terminated": terminated}
        else:
            fields = storage.gather(slots)
        fields.update(indices=ids, ages=storage.added - 1 - ids, episodes=storage.episode_ids[slots])
        device = storage.device_stacks(slots, last) if getattr(storage, "mirror", None) is not None else None
        return fields, device

    def __call__(self, which: np.ndarray, slots: np.ndarray, weights: np.ndarray) -> Gathered:
        if which.shape[0] == 1:  # (a member axis of one: views of the storage's arrays, no copy)
            fields, device = self._one(self.storages[int(which[0])], slots[0])
            return Gathered(_arrays(fields, weights, lambda array: array[None]), None if device is None else [device])
        rows = [self._one(self.storages[i], slots[k]) for k, i in enumerate(which.tolist())]
        fields = {name: [row[name] for row, _ in rows] for name in _NAMES}
        device = [d for _, d in rows] if any(d is not None for _, d in rows) else None
        return Gathered(_arrays(fields, weights, np.stack), device)


_NAMES = ("obs", "actions", "rewards", "next_obs", "terminated", "indices", "ages", "episodes")  # (but weights)


def _arrays(fields: dict, weights: np.ndarray, axis) -> BatchArrays:
    """The batches' arrays from a gather's ``fields``, each given its member axis by ``axis``."""
    return BatchArrays(**{name: axis(fields[name]) for name in _NAMES}, weights=weights)


def gather_for(storages: Sequence[Any], n_step: int, gamma: float) -> RingGather | StorageGather:
    """The gather of these storages (of one class: a cohort's members share their config)."""
    if all(type(s) is TransitionStorage for s in storages):
        return RingGather(storages, n_step, gamma)
    return StorageGather(storages, n_step, gamma)
