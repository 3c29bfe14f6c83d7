"""The frame storage keeps each frame once and rebuilds every stack exactly.

A synthetic env's frames encode (episode, t), so a rebuilt stack can be checked against the stack the env
gave, frame by frame: never two episodes in one stack, zero padding at an episode start, the real final
``next_obs`` of every episode, across the ring's wrap-around and for every replay kind.
"""

from __future__ import annotations

from functools import partial

import gymnasium as gym
import numpy as np
import pytest

from per_cli.errors import ConfigError
from per_cli.replay import KINDS, ReplayMemory
from per_cli.replay.storage.frames import FrameStackStorage, ensure_memory_fits
from per_cli.replay.store import add_transition

SIZE = 6  # frames are SIZE x SIZE


class CounterEnv(gym.Env):
    """Frame (episode, t): row 0 a marker (never an all-zero frame), rows 1-2 the episode, rows 3-4 t.
    Episodes of random length 1..max_len end terminated or, sometimes, truncated."""

    def __init__(self, max_len: int = 12, seed: int = 0):
        self.observation_space = gym.spaces.Box(0, 255, (SIZE, SIZE), np.uint8)
        self.action_space = gym.spaces.Discrete(3)
        self._rng = np.random.default_rng(seed)
        self.max_len = max_len
        self.episode = -1

    def _frame(self) -> np.ndarray:
        f = np.zeros((SIZE, SIZE), np.uint8)
        f[0] = 1
        f[1], f[2] = self.episode % 256, self.episode // 256
        f[3], f[4] = self.t % 256, self.t // 256
        return f

    def reset(self, *, seed=None, options=None):
        self.episode += 1
        self.t = 0
        self.length = int(self._rng.integers(1, self.max_len + 1))
        return self._frame(), {}

    def step(self, action):
        self.t += 1
        done = self.t >= self.length
        truncated = done and self._rng.random() < 0.3
        return self._frame(), float(self.t), done and not truncated, truncated, {}


def decode(stack: np.ndarray) -> list[tuple[int, int] | None]:
    """(episode, t) of each frame of a stack; None for a padding (all-zero) frame."""
    out = []
    for f in stack:
        if not f.any():
            out.append(None)
        else:
            out.append((int(f[1, 0]) + 256 * int(f[2, 0]), int(f[3, 0]) + 256 * int(f[4, 0])))
    return out


def check_stacks(stacks: np.ndarray) -> None:
    """Vectorized over (B, S, H, W): padding first, then consecutive frames of one episode."""
    real = stacks[:, :, 0, 0] == 1
    padding = ~stacks.reshape(*stacks.shape[:2], -1).any(axis=2)
    assert np.all(real | padding)
    assert np.all(real[:, :-1] <= real[:, 1:]), "padding after a real frame"
    episode = stacks[:, :, 1, 0].astype(np.int64) + 256 * stacks[:, :, 2, 0].astype(np.int64)
    t = stacks[:, :, 3, 0].astype(np.int64) + 256 * stacks[:, :, 4, 0].astype(np.int64)
    both = real[:, :-1] & real[:, 1:]
    assert np.all((episode[:, 1:] == episode[:, :-1])[both]), "a stack mixes episodes"
    assert np.all((t[:, 1:] == t[:, :-1] + 1)[both]), "a stack skips or repeats a step"


def fill(memory_or_storage, steps: int, stack: int = 4, max_len: int = 12, seed: int = 0, on_step=None):
    """Run the stacked CounterEnv for ``steps`` steps into the storage; returns {id: (obs, next_obs)}."""
    env = gym.wrappers.FrameStackObservation(CounterEnv(max_len, seed), stack, padding_type="zero")
    storage = getattr(memory_or_storage, "storage", memory_or_storage)
    add = getattr(memory_or_storage, "add", None) or partial(add_transition, storage)
    given = {}
    obs, _ = env.reset()
    for i in range(steps):
        action = i % 3
        next_obs, reward, terminated, truncated, _ = env.step(action)
        add(obs, action, reward, next_obs, terminated, truncated)
        given[storage.added - 1] = (obs.copy(), next_obs.copy())
        obs = next_obs
        if terminated or truncated:
            obs, _ = env.reset()
        if on_step is not None:
            on_step(i, given)
    return given


def check_all_slots(storage: FrameStackStorage, given: dict) -> int:
    """Every sampleable slot rebuilds exactly the stacks the env gave; returns the unsampleable count."""
    slots = np.arange(storage.size)
    ok = storage.sampleable(slots)
    batch = storage.gather(slots[ok])
    ids = storage.ids[slots[ok]]
    np.testing.assert_array_equal(batch["obs"], np.stack([given[int(i)][0] for i in ids]))
    np.testing.assert_array_equal(batch["next_obs"], np.stack([given[int(i)][1] for i in ids]))
    check_stacks(batch["obs"])
    check_stacks(batch["next_obs"])
    return int((~ok).sum())


@pytest.mark.parametrize("stack", [1, 2, 4])
@pytest.mark.parametrize(("capacity", "extra"), [(40, None), (40, 6), (7, 5), (64, 30)])
def test_every_slot_rebuilds_exactly_at_every_step(stack, capacity, extra):
    storage = FrameStackStorage(capacity, (stack, SIZE, SIZE), extra_frames=extra, check_memory=False)
    worst = []

    def after(i, given):
        worst.append(check_all_slots(storage, given))
        assert storage.added - storage.oldest_sampleable_id() == storage.size - worst[-1]

    fill(storage, 400, stack=stack, on_step=after)
    assert storage.added == 400 and storage.size == capacity  # wrapped around several times


def test_enough_extra_frames_leave_every_transition_sampleable():
    # one extra frame per episode in memory (at most 100 here) and 3 of history: nothing is ever lost
    storage = FrameStackStorage(100, (4, SIZE, SIZE), extra_frames=100 + 3, check_memory=False)
    given = fill(storage, 2_000, max_len=20, seed=3)
    assert check_all_slots(storage, given) == 0
    assert storage.first_sampleable_id == storage.added - storage.size


def test_too_few_extra_frames_make_exactly_the_oldest_unsampleable():
    storage = FrameStackStorage(50, (4, SIZE, SIZE), extra_frames=5, check_memory=False)
    given = fill(storage, 500, max_len=4)
    lost = check_all_slots(storage, given)
    assert lost > 0
    ids = storage.ids[np.arange(storage.size)]
    ok = storage.sampleable(np.arange(storage.size))
    assert ids[ok].min() == storage.first_sampleable_id
    assert set(ids[~ok]) == set(range(storage.added - storage.size, storage.first_sampleable_id))


def test_episode_start_is_zero_padded_and_final_next_obs_is_real():
    storage = FrameStackStorage(30, (4, SIZE, SIZE), check_memory=False)
    given = fill(storage, 30, max_len=5)
    batch = storage.gather(np.arange(30))
    starts = [i for i in range(30) if decode(batch["obs"][i])[-1][1] == 0]
    assert starts, "some episode starts are in memory"
    for i in starts:
        assert decode(batch["obs"][i])[:3] == [None, None, None]
        assert decode(batch["next_obs"][i])[:2] == [None, None]
    ends = np.flatnonzero(storage.terminated[:30] + storage.truncated[:30])
    for i in ends:
        episode, t = decode(batch["obs"][i])[-1]
        assert decode(batch["next_obs"][i])[-1] == (episode, t + 1)  # the real last frame, not the next reset
    assert len(given) == 30


def test_reset_padding_is_rebuilt_exactly_too():
    """FrameStackObservation's default padding repeats the reset frame; the storage keeps it verbatim."""
    env = gym.wrappers.FrameStackObservation(CounterEnv(6, 1), 4)  # padding_type="reset"
    storage = FrameStackStorage(20, (4, SIZE, SIZE), check_memory=False)
    given = {}
    obs, _ = env.reset()
    for _ in range(100):
        next_obs, reward, terminated, truncated, _ = env.step(0)
        add_transition(storage, obs, 0, reward, next_obs, terminated, truncated)
        given[storage.added - 1] = (obs.copy(), next_obs.copy())
        obs = env.reset()[0] if terminated or truncated else next_obs
    slots = np.arange(20)
    batch = storage.gather(slots[storage.sampleable(slots)])
    for j, slot in enumerate(slots[storage.sampleable(slots)]):
        np.testing.assert_array_equal(batch["obs"][j], given[int(storage.ids[slot])][0])
        np.testing.assert_array_equal(batch["next_obs"][j], given[int(storage.ids[slot])][1])


def test_next_obs_must_be_the_shifted_stack():
    storage = FrameStackStorage(10, (4, SIZE, SIZE), check_memory=False)
    obs = np.ones((4, SIZE, SIZE), np.uint8)
    with pytest.raises(ValueError, match="shifted"):
        add_transition(storage, obs, 0, 0.0, obs * 2, False, False)


def _cfg(**replay):
    """The replay config the kinds' factories read (a real one: every registered kind finds its keys)."""
    from per_cli.config import load_config

    return load_config(None, ["replay.rank_resort_period=50", *(f"replay.{k}={v}" for k, v in replay.items())]).replay


SAMPLER_KINDS = sorted(KINDS)


@pytest.mark.parametrize("kind", SAMPLER_KINDS)
def test_every_replay_kind_samples_exact_stacks_across_wraparound(kind):
    storage = FrameStackStorage(64, (4, SIZE, SIZE), extra_frames=6, check_memory=False)
    rng = np.random.default_rng(0)
    memory = ReplayMemory(storage, KINDS[kind].build(_cfg(), storage, rng))
    sampled = 0

    def after(i, given):
        nonlocal sampled
        if storage.added - storage.oldest_sampleable_id() < 16 or i % 3:
            return
        batch = memory.sample(16, beta=0.5)
        assert storage.sampleable(batch.indices % storage.capacity).all(), "an unsampleable slot was drawn"
        np.testing.assert_array_equal(batch.obs, np.stack([given[int(i)][0] for i in batch.indices]))
        np.testing.assert_array_equal(batch.next_obs, np.stack([given[int(i)][1] for i in batch.indices]))
        check_stacks(batch.obs)
        sampled += 1
        memory.update_priorities(batch.indices, rng.normal(size=16))  # reshuffle the priorities

    fill(memory, 1_000, max_len=5, on_step=after)
    assert sampled > 200
    assert storage.first_sampleable_id > storage.added - storage.size  # unsampleable slots did occur


def test_prioritized_gives_unsampleable_slots_zero_mass():
    if "prioritized" not in KINDS:
        pytest.skip("no prioritized sampler")
    storage = FrameStackStorage(64, (4, SIZE, SIZE), extra_frames=6, check_memory=False)
    sampler = KINDS["prioritized"].build(_cfg(), storage, np.random.default_rng(1))
    memory = ReplayMemory(storage, sampler)
    fill(memory, 500, max_len=3)
    slots = np.arange(storage.capacity)
    p = sampler.expected_counts(1)
    assert (~storage.sampleable(slots)).any()
    assert np.all(p[~storage.sampleable(slots)] == 0.0)
    assert np.all(p[storage.sampleable(slots)] > 0.0)


def test_a_memory_that_cannot_fit_is_a_config_error(monkeypatch):
    import per_cli.replay.storage.budget as fs

    monkeypatch.setattr(fs, "available_memory_bytes", lambda: 2 * 10**9)
    with pytest.raises(ConfigError, match=r"replay.capacity: .* needs 7\.\d+ GB .* only 2\.00 GB .* at most"):
        FrameStackStorage(1_000_000, (4, 84, 84))
    ensure_memory_fits(10**9, "a small thing")  # fits: no error
    monkeypatch.setattr(fs, "available_memory_bytes", lambda: None)
    ensure_memory_fits(10**15, "anything")  # unknown: no check


def test_frame_storage_is_about_one_frame_per_transition():
    need = FrameStackStorage.bytes_needed(1_000_000, (4, 84, 84))
    assert 7.056e9 < need < 7.11e9  # the floor is 7.056 GB of frames; stacked obs + next_obs would be 56 GB


def test_state_dict_round_trip():
    a = FrameStackStorage(30, (4, SIZE, SIZE), check_memory=False)
    given = fill(a, 77)
    b = FrameStackStorage(30, (4, SIZE, SIZE), check_memory=False)
    b.load_state_dict(a.state_dict())
    assert check_all_slots(b, given) == 0
    # and b continues the episode a was in
    obs_a = a._last_next.copy()
    nxt = np.concatenate([obs_a[1:], obs_a[-1:] + 1])
    assert add_transition(a, obs_a, 0, 0.0, nxt, False, False) == add_transition(b, obs_a, 0, 0.0, nxt, False, False)
    np.testing.assert_array_equal(
        a.gather(np.array([a.latest_slot]))["obs"], b.gather(np.array([b.latest_slot]))["obs"]
    )
    assert b.hist[b.latest_slot] == a.hist[a.latest_slot]
