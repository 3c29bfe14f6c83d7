"""The store: transitions (:class:`~per_cli.replay.storage.rows.Rows` over a list of members) written into the
storages, one implementation per storage class chosen once by :func:`store_for`, each ONE compiled call on the
blocks the gather reads: :class:`RingStore` (plain or bit-packed rings) and
:class:`~per_cli.replay.storage.frame_store.FrameStore`. A store returns the kind's
:class:`~per_cli.replay.storage.rows.Events` and knows nothing of the kind or the writer. A storage is written
only through a store (:func:`add_transition` for one transition), so the storages import no store."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from per_cli.replay.gather import ring_blocks
from per_cli.replay.storage.frame_store import FrameStore
from per_cli.replay.storage.frames import FrameStackStorage
from per_cli.replay.storage.packed import PackedTransitionStorage, packed_rows
from per_cli.replay.storage.ring import ONE, TransitionStorage, store_members
from per_cli.replay.storage.rows import Events, Rows, Stored, no_events, rows_of


class RingStore:
    """Rings, plain or bit-packed: every row stored by :func:`~per_cli.replay.storage.ring.store_members` in one
    call over the members (their states cast to the rings' dtype, or bit-packed, first); every written slot is
    sampleable (an entering event each)."""

    def __init__(self, storages: Sequence[TransitionStorage]):
        ((self.dtype,),) = {(s.obs.dtype,) for s in storages}  # (one config: one dtype)
        packed = isinstance(storages[0], PackedTransitionStorage)  # (one class: store_for)
        (self.states,) = {s.obs_shape if packed else None for s in storages}
        self.columns = ring_blocks(storages)
        self._entering = np.ones(0, dtype=np.bool_)  # (every row's event enters: its first n, grown as needed)

    def __call__(self, rows: Rows) -> Stored:
        n = rows.which.shape[0]
        if not n:
            return Stored(no_events())
        if self.states is None:
            obs = np.asarray(rows.obs, dtype=self.dtype).reshape(n, -1)
            next_obs = np.asarray(rows.next_obs, dtype=self.dtype).reshape(n, -1)
        else:
            try:
                obs, next_obs = packed_rows(rows.obs, self.states), packed_rows(rows.next_obs, self.states)
            except ValueError as exc:  # (states of another shape or dtype: no row can be stored)
                return Stored(no_events(), dict.fromkeys(range(n), exc))
        if obs.shape[1:] != self.columns.obs.shape[2:] or next_obs.shape != obs.shape:
            exc = ValueError(f"expected states of {self.columns.obs.shape[2]} values, got {obs.shape[1:]}")
            return Stored(no_events(), dict.fromkeys(range(n), exc))
        slots = np.empty(n, dtype=np.int64)
        store_members(rows.which, obs, rows.actions, rows.rewards, next_obs, rows.terminated.astype(np.float32),
                      rows.truncated, rows.ends, *self.columns, slots)  # fmt: skip
        if self._entering.shape[0] < n:
            self._entering = np.ones(n, dtype=np.bool_)
            self._entering.flags.writeable = False
        return Stored(Events(rows.which, slots, self._entering[:n]))


Store = RingStore | FrameStore


def store_for(storages: Sequence[Any]) -> Store:
    """The store of these storages (of one class: a cohort's members share their config): rings, plain or
    bit-packed, by :class:`RingStore`, frame storages by :class:`~per_cli.replay.storage.frame_store.FrameStore`;
    ValueError for any other."""
    classes = {type(s) for s in storages}
    if len(classes) == 1 and issubclass(*classes, TransitionStorage):
        return RingStore(storages)
    if classes == {FrameStackStorage}:
        return FrameStore(storages)
    raise ValueError(f"no store serves storages of {sorted(c.__name__ for c in classes)}: rings or frame storages")


def own_store(storage: Any) -> Store:
    """The store over ``storage`` alone, which its solo memory and :func:`add_transition` write through: built on
    first use and kept as the storage's ``own_store`` until its arrays move into a cohort's blocks (``adopted``)."""
    if storage.own_store is None:
        storage.own_store = store_for([storage])
    return storage.own_store


def add_transition(storage: Any, obs, action, reward, next_obs, terminated, truncated) -> int:
    """One transition stored in ``storage`` by :func:`own_store`; returns its slot. ValueError, nothing written, for
    a transition the store refuses (states of another shape, a frame storage's ``next_obs`` that is not ``obs``
    shifted by one frame or an action that is not a uint8)."""
    states, next_states = np.asarray(obs)[None], np.asarray(next_obs)[None]
    stored = own_store(storage)(rows_of(ONE, states, [action], [reward], next_states, [terminated], [truncated]))
    if stored.errors:
        raise stored.errors[0]
    return int(stored.events.slots[0])
