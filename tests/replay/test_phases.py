"""``none`` and ``combined`` keep their meaning under any ``train_freq`` / ``gradient_steps``: a phase of G
batches (``memory.begin_phase(G)``) walks back through the newest transitions in disjoint blocks (``none``)
or puts each transition stored since the previous phase into exactly one batch (``combined``)."""

import numpy as np
import pytest

from per_cli.replay.memory import ReplayMemory
from per_cli.replay.sampler import draw_distinct
from per_cli.replay.samplers import CombinedSampler, RecentSampler
from per_cli.replay.storage.ring import TransitionStorage


def memory_with(sampler_cls, capacity: int = 10_000, seed: int = 0, **kwargs) -> ReplayMemory:
    storage = TransitionStorage(capacity, (1,), np.float32)
    return ReplayMemory(storage, sampler_cls(storage, np.random.default_rng(seed), **kwargs))


def add(memory: ReplayMemory, n: int) -> None:
    for _ in range(n):
        i = memory.storage.added
        memory.add(np.array([i]), 0, 0.0, np.array([i + 1]), False, False)


def phase(memory: ReplayMemory, n_batches: int, batch_size: int) -> list[np.ndarray]:
    memory.begin_phase(n_batches)
    return [memory.sample(batch_size, 1.0).indices for _ in range(n_batches)]


def test_none_walks_back_in_disjoint_blocks_newest_first():
    memory = memory_with(RecentSampler)
    add(memory, 5_000)
    for _ in range(3):  # train_freq 256 / gradient_steps 128, batch 32
        add(memory, 256)
        batches = phase(memory, 128, 32)
        newest = memory.storage.added - 1
        for j, ids in enumerate(batches):
            np.testing.assert_array_equal(ids, np.arange(newest - 32 * (j + 1) + 1, newest - 32 * j + 1))
        assert len(np.unique(np.concatenate(batches))) == 128 * 32


def test_none_starts_again_from_the_newest_when_the_memory_is_short():
    memory = memory_with(RecentSampler, capacity=100)
    add(memory, 250)  # 100 held: 3 whole blocks of 32
    batches = phase(memory, 5, 32)
    for j, ids in enumerate(batches):
        k = j % 3
        np.testing.assert_array_equal(ids, np.arange(250 - 32 * (k + 1), 250 - 32 * k))


def test_none_with_one_update_per_step_is_the_newest_batch():
    stepped, plain = memory_with(RecentSampler, capacity=50), memory_with(RecentSampler, capacity=50)
    for _ in range(120):
        add(stepped, 1)
        add(plain, 1)
        if stepped.storage.added >= 16:
            (ids,) = phase(stepped, 1, 16)
            np.testing.assert_array_equal(ids, plain.sample(16, 1.0).indices)  # no phase: today's sampler
            np.testing.assert_array_equal(ids, np.arange(stepped.storage.added - 16, stepped.storage.added))


def check_combined_phase(batches: list[np.ndarray], new: np.ndarray, batch_size: int) -> None:
    """Each new id in exactly one batch, counts spread within one, the rest distinct and not new."""
    placed = np.concatenate([ids[np.isin(ids, new)] for ids in batches])
    np.testing.assert_array_equal(np.sort(placed), new)
    per_batch = np.array([np.isin(ids, new).sum() for ids in batches])
    assert per_batch.max() - per_batch.min() <= 1
    for ids in batches:
        assert len(ids) == batch_size and len(set(ids.tolist())) == batch_size


@pytest.mark.parametrize(("new_per_phase", "n_batches"), [(256, 128), (50, 128), (8, 4), (3, 3)])
def test_combined_puts_each_new_transition_into_exactly_one_batch(new_per_phase, n_batches):
    memory = memory_with(CombinedSampler)
    add(memory, 3_000)
    phase(memory, n_batches, 32)  # the first phase: warm-up transitions
    for _ in range(3):
        before = memory.storage.added
        add(memory, new_per_phase)
        batches = phase(memory, n_batches, 32)
        check_combined_phase(batches, np.arange(before, memory.storage.added), 32)
        if new_per_phase < n_batches:
            assert sum(np.isin(ids, np.arange(before, memory.storage.added)).any() for ids in batches) == new_per_phase


def test_combined_places_the_newest_that_fit_when_more_arrived_than_batches_hold():
    memory = memory_with(CombinedSampler)
    add(memory, 1_000)
    phase(memory, 1, 8)
    add(memory, 100)  # one batch of 8: the 8 newest, the whole batch
    (ids,) = phase(memory, 1, 8)
    np.testing.assert_array_equal(np.sort(ids), np.arange(1_092, 1_100))


def test_combined_first_phase_counts_the_newest_g_as_new():
    memory = memory_with(CombinedSampler)
    add(memory, 1_000)
    batches = phase(memory, 4, 16)
    check_combined_phase(batches, np.arange(996, 1_000), 16)


def test_combined_with_one_update_per_step_is_the_papers_sampler():
    """begin_phase(1) before each batch: B-1 uniform without replacement from the others, then the latest;
    the same draws as without phases and as written out by hand (the project's ``draw_distinct`` over the ids
    before the latest, on the sampler's own seeded generator)."""
    stepped = memory_with(CombinedSampler, capacity=40, seed=3)
    plain = memory_with(CombinedSampler, capacity=40, seed=3)
    by_hand = np.random.default_rng(3)
    for _ in range(100):
        add(stepped, 1)
        add(plain, 1)
        if stepped.storage.added < 8:
            continue
        (ids,) = phase(stepped, 1, 8)
        np.testing.assert_array_equal(ids, plain.sample(8, 1.0).indices)
        s = stepped.storage
        oldest, positions = s.oldest_sampleable_id(), np.empty(7, dtype=np.int64)
        draw_distinct(by_hand, s.added - 1 - oldest, 7, positions)
        np.testing.assert_array_equal(ids, np.append(oldest + positions, s.added - 1))


def test_combined_phase_state_survives_a_checkpoint():
    a = memory_with(CombinedSampler, capacity=500)
    add(a, 300)
    phase(a, 4, 8)
    add(a, 10)
    b = memory_with(CombinedSampler, capacity=500)
    b.load_state_dict(a.state_dict())
    for ids_a, ids_b in zip(phase(a, 4, 8), phase(b, 4, 8), strict=True):
        np.testing.assert_array_equal(ids_a, ids_b)
