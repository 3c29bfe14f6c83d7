"""Replay storage for stacked image observations that keeps each frame once.

Consecutive stacks share all but one frame, so each frame is written once into a ring and ``obs``/``next_obs`` are
rebuilt at sample time; a slot's ``frame_gid`` and ``hist`` keep a stack within one episode. Transitions whose
oldest frames were overwritten become unsampleable (``first_sampleable_id``).
``mirror_to(device)`` keeps a byte-equal copy on the training device. The whole contract: docs/atari.md."""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from per_cli.replay.records import Counter, new_counters
from per_cli.replay.storage.budget import ensure_memory_fits
from per_cli.replay.storage.device_frames import DeviceFrames, DeviceStacks
from per_cli.replay.storage.frame_store import FRAME_COUNTERS
from per_cli.replay.storage.ring import COUNTER_BYTES, RingBookkeeping, TransitionStorage, gather_fields

# extra frames beyond one per transition: enough for episodes of >= EXTRA_DIVISOR steps on average; shorter
# episodes only make the oldest transitions unsampleable
EXTRA_DIVISOR = 512

# frame_gid, hist, action, reward, terminated, truncated, id, episode id
_PER_SLOT_BYTES = 8 + 1 + 1 + 4 + 1 + 1 + 8 + 8


def ring_frames(capacity: int, stack: int, extra_frames: int | None) -> int:
    """Frames in the ring: one per transition and ``extra_frames`` (None: ``capacity // EXTRA_DIVISOR + 2 S``), at
    least S + 1 (a new episode writes S + 1 frames at once: the newest transition must always fit)."""
    if extra_frames is None:
        extra_frames = capacity // EXTRA_DIVISOR + 2 * stack
    return capacity + max(int(extra_frames), stack + 1)


class Stacks(NamedTuple):
    """The stacks of some transitions, rebuilt from the frame ring on the host: (B, S, H, W) each."""

    obs: np.ndarray
    next_obs: np.ndarray


class FrameStackStorage(RingBookkeeping):
    """Ring storage for ``(S, H, W)`` frame-stack observations; same face as ``TransitionStorage``."""

    def __init__(
        self,
        capacity: int,
        obs_shape: tuple[int, ...],
        obs_dtype: np.dtype = np.uint8,
        *,
        extra_frames: int | None = None,
        check_memory: bool = True,
    ):
        if capacity < 1:
            raise ValueError(f"replay.capacity must be >= 1, got {capacity}")
        if len(obs_shape) != 3:
            raise ValueError(f"FrameStackStorage needs (stack, height, width) observations, got {obs_shape}")
        self.capacity = int(capacity)
        self.obs_shape = tuple(int(d) for d in obs_shape)
        self.stack = self.obs_shape[0]
        self.frame_shape = self.obs_shape[1:]
        self.obs_dtype = np.dtype(obs_dtype)
        self.n_frames = ring_frames(self.capacity, self.stack, extra_frames)
        if check_memory:
            ensure_memory_fits(
                self.bytes_needed(self.capacity, self.obs_shape, self.obs_dtype, extra_frames=extra_frames),
                f"a replay memory of {self.capacity:,} frame-stack transitions {self.obs_shape}",
                per_unit=int(np.prod(self.frame_shape)) * self.obs_dtype.itemsize + _PER_SLOT_BYTES,
            )
        # np.zeros maps untouched pages lazily: resident memory grows as the ring fills
        self.frames = np.zeros((self.n_frames, *self.frame_shape), dtype=self.obs_dtype)
        self.frame_gid = np.zeros(capacity, dtype=np.int64)
        self.hist = np.zeros(capacity, dtype=np.uint8)
        self.actions = np.zeros(capacity, dtype=np.uint8)  # ALE has at most 18 actions; int64 in batches
        self.rewards = np.zeros(capacity, dtype=np.float32)
        self.terminated = np.zeros(capacity, dtype=bool)  # float32 in batches
        self.truncated = np.zeros(capacity, dtype=bool)
        self._init_ring(capacity)
        self.frame_counters = new_counters(FRAME_COUNTERS)
        self._last_next = np.zeros(self.obs_shape, dtype=self.obs_dtype)  # the last transition's next_obs
        self._offsets = np.arange(-(self.stack - 1), 2, dtype=np.int64)  # obs frames, then next_obs' newest
        self.mirror: DeviceFrames | None = None  # the frame ring on the training device (mirror_to)

    def mirror_to(self, device) -> DeviceFrames:
        """Keep a copy of the frame ring on ``device`` from now on (its frames so far copied); returns it."""
        self.mirror = DeviceFrames(self.frames, device)
        return self.mirror

    @staticmethod
    def bytes_needed(
        capacity: int, obs_shape: tuple[int, ...], obs_dtype: np.dtype = np.uint8, *, extra_frames: int | None = None
    ) -> int:
        frame_bytes = int(np.prod(obs_shape[1:])) * np.dtype(obs_dtype).itemsize
        frames = ring_frames(capacity, obs_shape[0], extra_frames)
        return frames * frame_bytes + capacity * _PER_SLOT_BYTES + COUNTER_BYTES

    # ------------------------------------------------------------------------------------------------------
    # writing

    frames_written = Counter("frames ever written; also the gid of the next one", "frame_counters")
    _episode_open = Counter("the last transition did not end its episode", "frame_counters", bool, "episode_open")

    # ------------------------------------------------------------------------------------------------------
    # reading

    def observations(self, slots: np.ndarray) -> np.ndarray:
        return self.stacks(slots).obs

    def sampleable(self, slots: np.ndarray) -> np.ndarray:
        """Which slots hold a transition whose frames are all still in the ring."""
        return self.ids[slots] >= self.first_sampleable_id  # empty slots hold id -1

    def _positions(self, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """(ring positions (B, S + 1) of the frames of the transitions in ``slots``: obs = [:, :S], next_obs =
        [:, 1:]; where those are padding (zero frames), or None where none is)."""
        slots = np.asarray(slots, dtype=np.int64)
        gids = self.frame_gid[slots][:, None] + self._offsets
        # position j of the union is padding when j < S - 1 - hist (the same cut holds for next_obs,
        # whose history is one frame longer, up to S - 1)
        padding = np.arange(self.stack + 1) < (self.stack - 1 - self.hist[slots].astype(np.int64))[:, None]
        return gids % self.n_frames, padding if padding.any() else None

    def stacks(self, slots: np.ndarray) -> Stacks:
        """(obs, next_obs) stacks of the transitions in ``slots``, rebuilt from the frame ring."""
        positions, padding = self._positions(slots)
        frames = self.frames[positions]
        if padding is not None:
            frames[padding] = 0
        return Stacks(frames[:, :-1], frames[:, 1:])

    def device_stacks(self, slots: np.ndarray, next_slots: np.ndarray | None = None) -> DeviceStacks:
        """``gather``'s ``obs`` and ``next_obs`` (``next_slots``: n-step returns' look-ahead) gathered on the
        mirror's device (``mirror_to`` first), byte for byte those of the host ring."""
        if self.mirror is None:
            raise RuntimeError("device_stacks needs mirror_to(device) first")
        stacks = self.mirror.stacks(*self._positions(slots))
        if next_slots is None:
            return stacks
        return DeviceStacks(stacks.obs, self.mirror.stacks(*self._positions(next_slots)).next_obs)

    def gather(self, slots: np.ndarray, next_slots: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """The transitions in ``slots`` as arrays (the next states those of ``next_slots`` where given: n-step
        returns' look-ahead), stacks rebuilt by ``stacks``: the reference the cohorts' compiled gather
        (:func:`gather_frames_members`) equals byte for byte."""
        obs, next_obs = self.stacks(slots)
        if next_slots is not None:  # (n-step returns: the next state of the look-ahead's last transition)
            next_obs = self.stacks(next_slots).next_obs
        return {
            "obs": obs,
            "next_obs": next_obs,
            "actions": self.actions[slots].astype(np.int64),
            "rewards": self.rewards[slots],
            "terminated": self.terminated[slots].astype(np.float32),
        }

    # ------------------------------------------------------------------------------------------------------
    # checkpoints

    _ARRAYS = (
        "frames", "frame_gid", "hist", "actions", "rewards", "terminated", "truncated", "ids", "episode_ids",
        "_last_next",
    )  # fmt: skip
    _SCALARS = ("cursor", "size", "added", "episodes_ended", "frames_written", "first_sampleable_id", "_episode_open")

    def state_dict(self) -> dict:
        state = {k: getattr(self, k) for k in self._ARRAYS + self._SCALARS}
        state["n_frames"] = self.n_frames
        return state

    def load_state_dict(self, state: dict) -> None:
        if state["n_frames"] != self.n_frames or state["frames"].shape != self.frames.shape:
            raise ValueError(
                f"frame storage checkpoint holds {state['frames'].shape} frames, this memory {self.frames.shape}"
            )
        for key in self._ARRAYS:
            getattr(self, key)[...] = state[key]
        for key in self._SCALARS:
            setattr(self, key, type(getattr(self, key))(state[key]))
        if self.mirror is not None:
            self.mirror.load(self.frames)


@numba.njit(cache=True, nogil=True)
def gather_frames_members(
    which, slots, next_slots, stack, frames, frame_gid, hist, actions, rewards, terminated, truncated, ids,
    episode_ids, counters, o_frames, o_actions, o_rewards, o_terminated, o_ids, o_ages, o_episodes,
):  # fmt: skip
    """For k in range(len(which)), j in the batch: member ``which[k]``'s transition at ``slots[k, j]`` into row k of the
    ``o_*`` arrays, as its storage's ``gather`` gives it. ``o_frames[k, j]`` gets F frames: the first ``stack`` its
    ``obs``, the rest the newest of ``next_slots[k, j]``'s (F = stack + 1 at n-step 1, 2 stack with a look-ahead,
    0 for no states). Padding frames are zeroed as in ``stacks``."""
    width, pixels, n_frames = o_frames.shape[2], frames.shape[2], frames.shape[1]
    for k in range(which.shape[0]):
        i = which[k]
        ring, gids, hists, newest = frames[i], frame_gid[i], hist[i], counters[i].added - 1
        acts, rews, terms, tids, eps = actions[i], rewards[i], terminated[i], ids[i], episode_ids[i]
        for j in range(slots.shape[1]):
            slot = slots[k, j]
            for p in range(width):
                source, u = (slot, p) if p < stack else (next_slots[k, j], p - width + stack + 1)
                out = o_frames[k, j, p]
                if u < stack - 1 - np.int64(hists[source]):
                    for f in range(pixels):
                        out[f] = 0
                else:
                    frame = ring[(gids[source] + u - (stack - 1)) % n_frames]
                    for f in range(pixels):
                        out[f] = frame[f]
            gather_fields(k, j, slot, newest, acts, rews, terms, tids, eps, o_actions, o_rewards, o_terminated, o_ids,
                          o_ages, o_episodes)  # fmt: skip


def storage_class(obs_shape: tuple[int, ...], obs_dtype: np.dtype, frame_stack: int | None = None) -> type:
    """The storage of a run's observations: each frame once for stacks of ``frame_stack`` frames (``(frame_stack, H,
    W)`` observations; ``frame_stack`` is the env's, a value the caller gives, None where the observations are not
    frame stacks, so replay needs nothing of envs), bool states bit-packed (MinAtar's grids), else the plain ring."""
    if frame_stack is not None and len(obs_shape) == 3 and obs_shape[0] == frame_stack:
        return FrameStackStorage
    if np.dtype(obs_dtype) == np.bool_:  # (storage/packed.py)
        from per_cli.replay.storage.packed import PackedTransitionStorage

        return PackedTransitionStorage
    return TransitionStorage


def storage_bytes(cfg, obs_shape: tuple[int, ...], obs_dtype: np.dtype, frame_stack: int | None = None) -> int:
    """Bytes ``make_storage`` would allocate for this config (the same :func:`storage_class`), allocating nothing."""
    return storage_class(obs_shape, obs_dtype, frame_stack).bytes_needed(cfg.replay.capacity, obs_shape, obs_dtype)


def make_storage(cfg, obs_shape: tuple[int, ...], obs_dtype: np.dtype, frame_stack: int | None = None):
    """The storage for a run (:func:`storage_class`)."""
    return storage_class(obs_shape, obs_dtype, frame_stack)(cfg.replay.capacity, obs_shape, obs_dtype)


def mirror_frames(storage, device) -> None:
    """``replay.device_frames``: the storage's frame ring kept on the training device as well (ConfigError where
    the storage keeps no frame ring)."""
    if not isinstance(storage, FrameStackStorage):
        from per_cli.errors import ConfigError

        raise ConfigError(
            "replay.device_frames: true needs Atari frame stacks (an ALE env.id, whose observations the frame "
            "storage keeps); set replay.device_frames: false"
        )
    storage.mirror_to(device)
