"""The gather: drawn slots into batches over a list of members (a solo memory's list holds one), one implementation
per storage class chosen once by :func:`gather_for`, each ONE compiled call: the rings' (:class:`RingGather`,
bit-packed states unpacked in one call) and the Atari frame storages' (:class:`FrameGather`). A draw knows nothing
of the storage. With ``host_states=False`` (the loop decides it once) ``obs`` and ``next_obs`` are :data:`SKIPPED`:
never built, and reading them as arrays raises."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from per_cli.replay.storage.frame_store import frame_blocks
from per_cli.replay.storage.frames import FrameStackStorage, gather_frames_members
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


def ring_blocks(storages: Sequence[TransitionStorage]) -> RingColumns:
    """The rings' columns as blocks with a seed axis (:func:`~per_cli.replay.storage.ring.member_axis`: several
    storages move into them), the states as flat rows (members, capacity, row), as the gather and the store take
    them."""
    blocks = RingColumns(*(member_axis(storages, name) for name in RingColumns._fields))
    rows = (len(storages), storages[0].capacity, -1)
    return blocks._replace(obs=blocks.obs.reshape(rows), next_obs=blocks.next_obs.reshape(rows))


def _fields(which, slots, weights, columns, n_step: int, gamma: float) -> tuple[BatchArrays, np.ndarray, tuple]:
    """A gather's batches but the states (None) and ``weights``, to fill; the slots whose next states they take
    (``slots``, or with ``n_step`` > 1 their look-ahead's last, the n-step rewards and terminations written by
    :func:`~per_cli.replay.storage.ring.nstep_members`); and where the gather writes the stored rewards and
    terminated flags (the batches', or spares under n-step)."""
    shape, c = slots.shape, columns
    actions, ids, ages, episodes = (np.empty(shape, dtype=np.int64) for _ in range(4))
    rewards, terminated = (np.empty(shape, dtype=np.float32) for _ in range(2))
    arrays = BatchArrays(None, actions, rewards, None, terminated, ids, weights, ages, episodes)
    if n_step == 1:
        return arrays, slots, (rewards, terminated)
    last = np.empty(shape, dtype=np.int64)
    nstep_members(which, slots, n_step, gamma, c.rewards, c.terminated, c.truncated, c.ids, c.counters, rewards,
                  terminated, last)  # fmt: skip
    return arrays, last, (np.empty(shape, dtype=np.float32), np.empty(shape, dtype=np.float32))


class RingGather:
    """Rings, plain or bit-packed: rows gathered by :func:`~per_cli.replay.storage.ring.gather_members` (n-step
    returns by :func:`~per_cli.replay.storage.ring.nstep_members`) for all members in one call, on the rings'
    columns as blocks with a seed axis (:func:`~per_cli.replay.storage.ring.member_axis`: several storages move
    into them). Bit-packed rings' rows (``states``: the states' shape; None for plain rings) are unpacked after
    it, every member's states and next states in one :func:`~per_cli.replay.storage.packed.unpack_rows`."""

    def __init__(self, storages: Sequence[TransitionStorage], n_step: int, gamma: float):
        ((self.dtype, self.row_shape),) = {(s.obs.dtype, s.row_shape) for s in storages}  # (one config: one row)
        packed = isinstance(storages[0], PackedTransitionStorage)  # (one class: gather_for)
        (self.states,) = {s.obs_shape if packed else None for s in storages}
        self.columns = ring_blocks(storages)
        self.n_step, self.gamma = n_step, gamma

    def __call__(self, which: np.ndarray, slots: np.ndarray, weights: np.ndarray) -> Gathered:
        arrays, last, (rewards, terminated) = _fields(which, slots, weights, self.columns, self.n_step, self.gamma)
        rows = np.empty((2, *slots.shape, *self.row_shape), dtype=self.dtype)  # (states, next states: one block)
        obs_rows, next_rows = rows
        gather_members(which, slots, last, *self.columns, obs_rows, arrays.actions, rewards, next_rows, terminated,
                       arrays.indices, weights, arrays.ages, arrays.episodes)  # fmt: skip
        obs, next_obs = rows if self.states is None else unpack_rows(rows, self.states)
        return Gathered(arrays._replace(obs=obs, next_obs=next_obs), None)


class FrameGather:
    """Atari frame storages: every member's stacks rebuilt from its frame ring, with its other fields and n-step
    returns, in one :func:`~per_cli.replay.storage.frames.gather_frames_members` call on the columns as seed-axis
    blocks. A draw's stacks are one block (members, B, F, H, W): F = stack + 1 at n-step 1 (``obs`` and ``next_obs`` its
    views), 2 stack otherwise, 0 with ``host_states`` False. Mirrored storages also give the stacks on the training
    device (``device_stacks``)."""

    def __init__(self, storages: Sequence[FrameStackStorage], n_step: int, gamma: float, host_states: bool = True):
        ((self.stack, self.frame_shape, self.dtype, n_frames),) = {
            (s.stack, s.frame_shape, s.obs_dtype, s.n_frames) for s in storages
        }  # (one config: one shape)
        blocks = frame_blocks(storages)
        self.columns = blocks._replace(frames=blocks.frames.reshape(len(storages), n_frames, -1))
        self.storages = list(storages)
        self.n_step, self.gamma = n_step, gamma
        self.width = (self.stack + 1 if n_step == 1 else 2 * self.stack) if host_states else 0
        self._skipped = {} if host_states else dict.fromkeys(_STATES, SKIPPED)

    def __call__(self, which: np.ndarray, slots: np.ndarray, weights: np.ndarray) -> Gathered:
        shape, stack = slots.shape, self.stack
        arrays, last, (rewards, terminated) = _fields(which, slots, weights, self.columns, self.n_step, self.gamma)
        pixels = self.columns.frames.shape[2] if self.width else 1
        frames = np.empty((*shape, self.width, pixels), dtype=self.dtype)
        gather_frames_members(which, slots, last, stack, *self.columns, frames, arrays.actions, rewards, terminated,
                              arrays.indices, arrays.ages, arrays.episodes)  # fmt: skip
        if self.width:
            frames = frames.reshape(*shape, self.width, *self.frame_shape)
            states = {"obs": frames[:, :, :stack], "next_obs": frames[:, :, self.width - stack :]}
        else:
            states = self._skipped
        device = self._device(which, slots, None if self.n_step == 1 else last)
        return Gathered(arrays._replace(**states), device)

    def _device(self, which: np.ndarray, slots: np.ndarray, last: np.ndarray | None) -> list | None:
        """Each member's stacks on the training device (``device_stacks``; None where no storage mirrors its
        frames there)."""
        members = [self.storages[i] for i in which.tolist()]
        if all(s.mirror is None for s in members):
            return None
        return [None if s.mirror is None else s.device_stacks(slots[k], None if last is None else last[k])
                for k, s in enumerate(members)]  # fmt: skip


def gather_for(
    storages: Sequence[Any], n_step: int, gamma: float, host_states: bool = True
) -> RingGather | FrameGather:
    """The gather of these storages (of one class: a cohort's members share their config): rings, plain or
    bit-packed (their subclasses too: the same columns), by :class:`RingGather`, frame storages by
    :class:`FrameGather`; ValueError for any other. ``host_states`` False: the batches' host ``obs``/``next_obs``
    are not built, for frame storages that gather their stacks on the training device (ValueError for any other)."""
    if not host_states and any(getattr(s, "mirror", None) is None for s in storages):
        raise ValueError("a gather without the host states needs storages that keep their frames on the device")
    classes = {type(s) for s in storages}
    if len(classes) == 1 and issubclass(*classes, TransitionStorage):
        return RingGather(storages, n_step, gamma)
    if classes == {FrameStackStorage}:
        return FrameGather(storages, n_step, gamma, host_states)
    raise ValueError(f"no gather serves storages of {sorted(c.__name__ for c in classes)}: rings or frame storages")
