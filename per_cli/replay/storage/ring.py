"""Preallocated ring storage: turns slot indices into batch arrays.

Every transition has an id (the number added before it) and an episode id; ids, not slots, leave in a batch, so a
priority update for an overwritten slot is recognised and ignored. Counters are one int64 array per storage, so
the compiled calls move S members' counters in place (a solo run: S = 1). The sampleable ids are always
``oldest .. added - 1``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numba
import numpy as np

from per_cli.replay.records import Counter, counters_dtype, new_counters
from per_cli.replay.storage.budget import ensure_memory_fits

_PER_SLOT_BYTES = 8 + 4 + 4 + 1 + 8 + 8  # action, reward, terminated, truncated, id, episode id
RING_COUNTERS = counters_dtype("cursor", "size", "added", "episodes_ended", "first_sampleable_id", "capacity")
COUNTER_BYTES = RING_COUNTERS.itemsize
ONE = np.zeros(1, dtype=np.int64)  # ``which`` of a call over a list of one member


@numba.njit(cache=True, nogil=True)
def oldest_id(counters):
    """The id of the oldest sampleable transition of the ring with these ``counters``."""
    return max(counters.first_sampleable_id, counters.added - counters.size)


def member_axis(owners: Sequence[object], name: str, written: Sequence[int] | None = None) -> np.ndarray:
    """The owners' arrays ``name`` as ONE C array with a seed axis, row s owner s's. For one owner a view; for several
    their block, or a new one that each owner's ``name`` is re-pointed into, so its own calls, checkpoint loads and
    the cohort's calls write the same memory (cached views must be rebuilt: ``ReplayMemory.adopted``). ``written``:
    only those first rows are copied into a lazy ``np.zeros``, so a mostly unwritten ring stays unresident."""
    arrays = [getattr(owner, name) for owner in owners]
    first = arrays[0]
    if len(arrays) == 1:
        return first[None]
    block = first.base
    rows = isinstance(block, np.ndarray) and block.shape == (len(arrays), *first.shape) and block.flags.c_contiguous
    if rows and all(a.base is block and a.ctypes.data == block[s, ...].ctypes.data for s, a in enumerate(arrays)):
        return block
    shape = (len(arrays), *first.shape)
    block = np.empty(shape, dtype=first.dtype) if written is None else np.zeros(shape, dtype=first.dtype)
    counts = [None] * len(arrays) if written is None else [int(n) for n in written]  # (None: every row)
    for s, (owner, array, n) in enumerate(zip(owners, arrays, counts, strict=True)):
        row = block[s, ...]  # (a view, also of a 0-d counters row)
        if n is None:
            row[...] = array
        else:
            row[:n] = array[:n]
        setattr(owner, name, row)
    return block


class RingBookkeeping:
    """The per-transition columns and ring counters every storage shares; a storage allocates its own
    ``actions``/``rewards``/``terminated``/``truncated`` columns (dtypes differ) and calls ``_init_ring`` for the
    rest."""

    cursor = Counter("the slot the next add writes")
    size = Counter("transitions held")
    added = Counter("transitions ever added; also the id of the next one")
    episodes_ended = Counter("episodes ended so far; also the episode id of the next transition")
    first_sampleable_id = Counter("held transitions with a smaller id are unsampleable (frame storage)")

    own_store = None  # the store over this storage alone (``store.own_store``'s, dropped when its arrays move)

    def adopted(self) -> None:
        """Its arrays moved into a cohort's blocks (:func:`member_axis`): drop what viewed the old ones."""
        self.own_store = None

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in ("own", "own_store")}  # (views: rebuilt)

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.adopted()

    def _init_ring(self, capacity: int) -> None:
        self.capacity = int(capacity)
        self.ids = np.full(capacity, -1, dtype=np.int64)
        self.episode_ids = np.full(capacity, -1, dtype=np.int64)
        self.counters = new_counters(RING_COUNTERS, capacity=capacity)

    @property
    def latest_slot(self) -> int:
        return (self.cursor - 1) % self.capacity

    def oldest_sampleable_id(self) -> int:
        """Id of the oldest transition a batch may contain; sampleable ids are ``oldest .. added - 1``."""
        return max(self.first_sampleable_id, self.added - self.size)

    def episodes_held(self) -> int:
        """Distinct episodes among the sampleable transitions (:func:`episodes_held_members`)."""
        return int(episodes_held_members(self.counters[None], self.episode_ids[None], ONE).item())

    def nstep(self, slots: np.ndarray, n: int, gamma: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rewards, terminated, last slots) of the n-step returns from ``slots`` (:func:`nstep_members` over
        this storage alone)."""
        slots = np.asarray(slots, dtype=np.int64).reshape(-1)
        rewards, terminated = np.empty(slots.shape, dtype=np.float32), np.empty(slots.shape, dtype=np.float32)
        last = np.empty(slots.shape, dtype=np.int64)
        columns = (self.rewards, self.terminated, self.truncated, self.ids, self.counters)
        outputs = (rewards, terminated, last)  # (each seen with a member axis of one, as the call takes it)
        nstep_members(ONE, slots[None], n, gamma, *(c[None] for c in columns), *(o[None] for o in outputs))
        return rewards, terminated, last


class TransitionStorage(RingBookkeeping):
    """Stores (obs, action, reward, next_obs, terminated, truncated) in fixed numpy arrays. ``add`` and
    ``gather`` are :func:`store_members` and :func:`gather_members` over this storage alone (``own``: its
    columns with a member axis of one, built once), the calls a cohort makes over all its members' storages."""

    def __init__(self, capacity: int, obs_shape: tuple[int, ...], obs_dtype: np.dtype, *, check_memory: bool = True):
        if capacity < 1:
            raise ValueError(f"replay.capacity must be >= 1, got {capacity}")
        if check_memory:  # before allocating: a memory that cannot fit is a config error, not a numpy crash
            row = int(np.prod(obs_shape)) * np.dtype(obs_dtype).itemsize
            ensure_memory_fits(
                TransitionStorage.bytes_needed(capacity, obs_shape, obs_dtype),
                f"a replay memory of {capacity:,} transitions {tuple(obs_shape)} {np.dtype(obs_dtype)}",
                per_unit=2 * row + _PER_SLOT_BYTES,
            )
        self.row_shape = tuple(int(d) for d in obs_shape)  # (a packed storage's obs_shape is its states')
        self.obs = np.zeros((capacity, *obs_shape), dtype=obs_dtype)
        self.next_obs = np.zeros((capacity, *obs_shape), dtype=obs_dtype)
        self.actions = np.zeros(capacity, dtype=np.int64)
        self.rewards = np.zeros(capacity, dtype=np.float32)
        self.terminated = np.zeros(capacity, dtype=np.float32)
        self.truncated = np.zeros(capacity, dtype=bool)
        self._init_ring(capacity)
        self.adopted()

    def adopted(self) -> None:
        """(Re)build ``own``, this storage's columns with a member axis of one (its columns moved into a cohort's
        blocks: :func:`member_axis`)."""
        super().adopted()
        self.own = RingColumns(*(column[None] for column in self.columns()))

    def columns(self) -> RingColumns:
        """The arrays the member calls take, in their order: states and next states as (capacity, row) views,
        actions, rewards, terminated, truncated, ids, episode ids, counters."""
        flat = (self.capacity, -1)
        return RingColumns(
            self.obs.reshape(flat), self.actions, self.rewards, self.next_obs.reshape(flat), self.terminated,
            self.truncated, self.ids, self.episode_ids, self.counters,
        )  # fmt: skip

    @staticmethod
    def bytes_needed(capacity: int, obs_shape: tuple[int, ...], obs_dtype: np.dtype) -> int:
        """Bytes this storage allocates: obs and next_obs rows and the per-transition columns."""
        return capacity * (2 * int(np.prod(obs_shape)) * np.dtype(obs_dtype).itemsize + _PER_SLOT_BYTES) + COUNTER_BYTES

    def observations(self, slots: np.ndarray) -> np.ndarray:
        return self.obs.take(slots, axis=0)

    def sampleable(self, slots: np.ndarray) -> np.ndarray:
        """Which slots hold a complete transition (all filled slots, here)."""
        return self.ids[slots] >= 0

    def gather(self, slots: np.ndarray, next_slots: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """The transitions in ``slots`` as arrays (``obs``, ``actions``, ``rewards``, ``next_obs``,
        ``terminated``; the next states those of ``next_slots`` where given): :func:`gather_members` over this
        storage alone."""
        slots = np.asarray(slots, dtype=np.int64).reshape(1, -1)
        out = batch_arrays(1, slots.shape[1], self.obs.dtype, self.row_shape)
        next_slots = slots if next_slots is None else np.asarray(next_slots, dtype=np.int64).reshape(1, -1)
        gather_members(ONE, slots, next_slots, *self.own, *out)
        return {name: getattr(out, name).squeeze(0) for name in _GATHERED}  # (the member axis of one dropped)

    _STATE = (
        "obs", "next_obs", "actions", "rewards", "terminated", "truncated", "ids", "episode_ids", "cursor", "size",
        "added", "episodes_ended",
    )  # fmt: skip

    def state_dict(self) -> dict:
        return {k: getattr(self, k) for k in self._STATE}

    def load_state_dict(self, state: dict) -> None:
        for key, value in state.items():
            if isinstance(value, np.ndarray):
                getattr(self, key)[...] = value
            else:
                setattr(self, key, value)


_GATHERED = ("obs", "actions", "rewards", "next_obs", "terminated")


class RingColumns(NamedTuple):
    """A ring's columns (or members' columns over the seed axis), in the order the member calls take them."""

    obs: object
    actions: object
    rewards: object
    next_obs: object
    terminated: object
    truncated: object
    ids: object
    episode_ids: object
    counters: object


class BatchArrays(NamedTuple):
    """Batches of S members stacked over the seed axis, in Batch's field order (row k: member k's batch)."""

    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    next_obs: np.ndarray
    terminated: np.ndarray
    indices: np.ndarray  # transition ids
    weights: np.ndarray
    ages: np.ndarray
    episodes: np.ndarray


def batch_arrays(members: int, batch: int, dtype: np.dtype, obs_shape: tuple[int, ...]) -> BatchArrays:
    """Empty arrays for ``members`` batches of ``batch`` transitions; the states (members, batch, *obs_shape)."""
    obs, next_obs = (np.empty((members, batch, *obs_shape), dtype=dtype) for _ in range(2))
    actions, ids, ages, episodes = (np.empty((members, batch), dtype=np.int64) for _ in range(4))
    rewards, terminated, weights = (np.empty((members, batch), dtype=np.float32) for _ in range(3))
    return BatchArrays(obs, actions, rewards, next_obs, terminated, ids, weights, ages, episodes)


@numba.njit(cache=True, nogil=True)
def store_members(
    which, obs_in, actions_in, rewards_in, next_in, terminated_in, truncated_in, ends_in,
    obs, actions, rewards, next_obs, terminated, truncated, ids, episode_ids, counters, slots_out,
):  # fmt: skip
    """For k in range(len(which)): member ``which[k]`` stores transition k (row k of the ``*_in`` arrays, states
    as flat rows of its dtype) at its cursor, with its id and episode id, and moves its counters on (``ends_in[k]``:
    the next transition starts an episode); ``slots_out[k]`` is the slot written. States are copied number by
    number (cheaper than a row assignment's array set-up)."""
    for k in range(which.shape[0]):
        i = which[k]
        c = counters[i]
        slot = c.cursor
        states, next_states = obs[i], next_obs[i]  # (member i's rows taken once, not per number)
        for f in range(states.shape[1]):
            states[slot, f] = obs_in[k, f]
            next_states[slot, f] = next_in[k, f]
        record_fields(k, i, slot, actions_in, rewards_in, terminated_in, truncated_in, ends_in, actions, rewards,
                      terminated, truncated, ids, episode_ids, c)  # fmt: skip
        slots_out[k] = slot


@numba.njit(cache=True, nogil=True, inline="always")
def record_fields(k, i, slot, actions_in, rewards_in, terminated_in, truncated_in, ends_in, actions, rewards,
                  terminated, truncated, ids, episode_ids, c):  # fmt: skip
    """Row k's scalar columns, id and episode id written at member i's ``slot``, and its counters ``c`` moved on
    (``ends_in[k]``: the next transition starts an episode). Every storage's store records a row so."""
    actions[i][slot] = actions_in[k]
    rewards[i][slot] = rewards_in[k]
    terminated[i][slot] = terminated_in[k]
    truncated[i][slot] = truncated_in[k]
    ids[i][slot] = c.added
    episode_ids[i][slot] = c.episodes_ended
    if ends_in[k]:
        c.episodes_ended += 1
    c.added += 1
    c.cursor = (slot + 1) % c.capacity
    c.size = min(c.size + 1, c.capacity)


@numba.njit(cache=True, nogil=True, inline="always")
def gather_fields(k, j, slot, newest, actions, rewards, terminated, ids, episode_ids, o_actions, o_rewards,
                  o_terminated, o_ids, o_ages, o_episodes):  # fmt: skip
    """Entry (k, j) of a gather's fields but the states and weights: the transition at ``slot`` of one member's
    columns (ages = transitions added since: ``newest`` is its newest id). Every storage's gather writes them so."""
    o_actions[k, j] = actions[slot]
    o_rewards[k, j] = rewards[slot]
    o_terminated[k, j] = terminated[slot]
    o_ids[k, j] = ids[slot]
    o_ages[k, j] = newest - ids[slot]
    o_episodes[k, j] = episode_ids[slot]


@numba.njit(cache=True, nogil=True)
def gather_members(
    which, slots, next_slots, obs, actions, rewards, next_obs, terminated, truncated, ids, episode_ids, counters,
    o_obs, o_actions, o_rewards, o_next, o_terminated, o_ids, _o_weights, o_ages, o_episodes,
):  # fmt: skip
    """For k in range(len(which)): member ``which[k]``'s transitions at ``slots[k]`` into row k of the ``o_*``
    arrays (Batch's fields but the weights, which the sampler writes; ages = transitions added since), the next
    states those of ``next_slots[k]`` (``slots`` itself, but for n-step returns: :func:`nstep_members`)."""
    width = obs[0].shape[1]
    flat_obs = o_obs.reshape(o_obs.shape[0], o_obs.shape[1], width)
    flat_next = o_next.reshape(o_next.shape[0], o_next.shape[1], width)
    for k in range(which.shape[0]):
        i = which[k]
        states, next_states, newest = obs[i], next_obs[i], counters[i].added - 1
        acts, rews, terms, tids, eps = actions[i], rewards[i], terminated[i], ids[i], episode_ids[i]
        for j in range(slots.shape[1]):
            slot, last = slots[k, j], next_slots[k, j]
            for f in range(width):
                flat_obs[k, j, f] = states[slot, f]
                flat_next[k, j, f] = next_states[last, f]
            gather_fields(k, j, slot, newest, acts, rews, terms, tids, eps, o_actions, o_rewards, o_terminated, o_ids,
                          o_ages, o_episodes)  # fmt: skip


@numba.njit(cache=True, nogil=True)
def episodes_held_members(counters, episode_ids, which):
    """For k in range(len(which)): the distinct episodes among member ``which[k]``'s sampleable transitions:
    episode ids rise by at most one from one transition to the next, so the newest's minus the oldest's plus
    one (0 when none is sampleable)."""
    out = np.zeros(which.shape[0], dtype=np.int64)
    for k in range(which.shape[0]):
        c, column = counters[which[k]], episode_ids[which[k]]
        oldest = oldest_id(c)
        if oldest < c.added:
            capacity = c.capacity
            out[k] = column[(c.added - 1) % capacity] - column[oldest % capacity] + 1
    return out


@numba.njit(cache=True, nogil=True)
def latest_slots_members(counters, which):
    """The slot each member ``which[k]`` wrote last (the one before its cursor)."""
    out = np.empty(which.shape[0], dtype=np.int64)
    for k in range(which.shape[0]):
        c = counters[which[k]]
        out[k] = (c.cursor - 1) % c.capacity
    return out


@numba.njit(cache=True, nogil=True)
def nstep_members(which, slots, n, gamma, rewards, terminated, truncated, ids, counters, o_rewards, o_terminated,
                  o_last):  # fmt: skip
    """For k in range(len(which)), j in the batch: member ``which[k]``'s n-step return from slot ``slots[k, j]`` (id t):
    R = Σ_{m<K} γ^m r_{t+m} over the K <= n steps within t's episode and the stored ones. ``o_last``: the slot of
    t + K - 1, whose next state the target bootstraps from; ``o_terminated``: 1 - γ^(K-1) (1 - terminated_{t+K-1}), so
    the engines' one-step target r + γ (1 - terminated) max Q' becomes R + γ^K (1 - terminated_{t+K-1}) max Q'.
    With n = 1 it is the stored transition."""
    for k in range(which.shape[0]):
        i = which[k]
        c = counters[i]
        capacity, newest = c.capacity, c.added - 1
        r, done, cut, held = rewards[i], terminated[i], truncated[i], ids[i]
        for j in range(slots.shape[1]):
            slot = slots[k, j]
            first = held[slot]
            total, discount, last = 0.0, 1.0, slot
            for m in range(n):
                if first + m > newest:
                    break
                last = (slot + m) % capacity
                total += discount * r[last]
                if done[last] or cut[last]:
                    break
                discount *= gamma
            steps = held[last] - first + 1
            o_rewards[k, j] = total
            o_last[k, j] = last
            o_terminated[k, j] = 1.0 - gamma ** (steps - 1) * (1.0 - np.float64(done[last]))
