"""What the memory tells the measures: episode ids of batch transitions, episodes held (its reference states:
tests/train/measures/test_reference.py)."""

import numpy as np

from per_cli.replay.memory import ReplayMemory
from per_cli.replay.samplers import RecentSampler, UniformSampler
from per_cli.replay.storage.frames import FrameStackStorage
from per_cli.replay.storage.ring import TransitionStorage

from .test_frames import SIZE, decode, fill


def memory_of(capacity: int, sampler_cls=RecentSampler) -> ReplayMemory:
    storage = TransitionStorage(capacity, (2,), np.float32)
    return ReplayMemory(storage, sampler_cls(storage, np.random.default_rng(0)))


def add_episodes(memory: ReplayMemory, lengths: list[int], truncate_every: int = 2, first: int = 0) -> list[int]:
    """Episodes of the given lengths; obs = (episode, t). Returns the episode of each transition added."""
    episodes = []
    for e, length in enumerate(lengths, start=first):
        for t in range(length):
            last = t == length - 1
            truncated = last and e % truncate_every == 1
            memory.add(np.array([e, t]), 0, 0.0, np.array([e, t + 1]), last and not truncated, truncated)
            episodes.append(e)
    return episodes


def test_batch_episodes_are_the_episodes_the_transitions_came_from():
    memory = memory_of(64)
    add_episodes(memory, [3, 1, 5, 2, 4])
    batch = memory.sample(15, 1.0)
    np.testing.assert_array_equal(batch.episodes, batch.obs[:, 0].astype(np.int64))
    assert batch.episodes.dtype == np.int64


def test_episodes_held_is_exact_across_the_ring_wraparound():
    rng = np.random.default_rng(1)
    memory = memory_of(10)
    lengths = rng.integers(1, 6, 40).tolist()
    episodes = []
    for e, length in enumerate(lengths):
        episodes += add_episodes(memory, [length], first=e)
        assert memory.episodes_held() == len(set(episodes[-memory.storage.capacity :]))
    assert memory.storage.added > 3 * memory.storage.capacity  # wrapped around several times


def test_episodes_held_of_an_empty_memory_is_zero():
    assert memory_of(4).episodes_held() == 0


def test_frame_storage_episodes_count_only_sampleable_transitions():
    storage = FrameStackStorage(50, (4, SIZE, SIZE), extra_frames=5, check_memory=False)
    memory = ReplayMemory(storage, UniformSampler(storage, np.random.default_rng(0)))
    fill(memory, 500, max_len=4)
    slots = np.arange(storage.size)
    ok = storage.sampleable(slots)
    assert not ok.all()  # some of the oldest lost their frames
    next_obs = storage.gather(slots[ok])["next_obs"]
    env_episodes = {decode(stack)[-1][0] for stack in next_obs}
    assert memory.episodes_held() == len(env_episodes)
    # episode ids follow the env's episodes one for one
    ids = storage.episode_ids[slots[ok]]
    env_ids = np.array([decode(stack)[-1][0] for stack in next_obs])
    pairs = set(zip(ids.tolist(), env_ids.tolist(), strict=True))
    assert len(pairs) == len(set(ids.tolist())) == len(env_episodes)
