"""The gather (replay/gather.py): bit-packed rings go through the one compiled ring gather, their states unpacked
once over every member's rows, and give each member the batch its own storage gathers."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from per_cli.replay import ReplayMemory
from per_cli.replay.cohort import CohortSampling
from per_cli.replay.gather import RingGather, StorageGather, gather_for
from per_cli.replay.samplers import UniformSampler
from per_cli.replay.storage.packed import PackedTransitionStorage
from per_cli.replay.storage.ring import BatchArrays

SHAPE = (10, 10, 7)  # (700 bits: not whole bytes)
CAPACITY = 40
SIZES = (5, 23, 40, 97)  # part-filled, full, wrapped (twice)


def _packed(n: int, seed: int) -> PackedTransitionStorage:
    """A packed ring that was given ``n`` random transitions (episodes of random length)."""
    storage = PackedTransitionStorage(CAPACITY, SHAPE)
    rng = np.random.default_rng(seed)
    obs = rng.random(SHAPE) < 0.3
    for _ in range(n):
        next_obs = rng.random(SHAPE) < 0.3
        done, cut = bool(rng.random() < 0.15), bool(rng.random() < 0.05)
        storage.add(obs, int(rng.integers(6)), float(rng.normal()), next_obs, done, cut)
        obs = rng.random(SHAPE) < 0.3 if done or cut else next_obs
    return storage


def _slots(storages, batch: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.stack([rng.integers(0, s.size, size=batch) for s in storages])


def _same(got: BatchArrays, want: BatchArrays) -> None:
    for name in BatchArrays._fields:
        a, b = np.asarray(getattr(got, name)), np.asarray(getattr(want, name))
        assert (a.dtype, a.shape) == (b.dtype, b.shape), name
        assert a.tobytes() == b.tobytes(), name


def test_packed_storages_are_gathered_by_the_ring_gather():
    storages = [_packed(n, seed) for seed, n in enumerate(SIZES)]
    assert type(gather_for(storages, 1, 0.99)) is RingGather
    memory = ReplayMemory(storages[0], UniformSampler(storages[0], np.random.default_rng(0)))
    assert type(memory.gather) is RingGather  # (a solo memory: the same gather over a list of one)


@pytest.mark.parametrize("n_step", [1, 3])
def test_a_packed_cohorts_gather_is_each_members_own_storage_gather(n_step):
    """Members at different fill levels (one wrapped twice), drawn in another order than theirs: bool states of the
    real shape, every field what the member's own storage gathers (the n-step look-ahead's next states too), and
    the whole batch byte for byte what each storage's own gather stacked over the members gives."""
    storages = [_packed(n, seed) for seed, n in enumerate(SIZES)]
    gather = RingGather(storages, n_step, 0.9)
    which = np.array([3, 0, 2, 1, 3], dtype=np.int64)
    slots = _slots([storages[i] for i in which], 64, seed=7)
    weights = np.random.default_rng(8).random(slots.shape).astype(np.float32)
    arrays, device = gather(which, slots, weights)
    assert device is None and arrays.obs.dtype == np.bool_ and arrays.obs.shape == (5, 64, *SHAPE)
    _same(arrays, StorageGather(storages, n_step, 0.9)(which, slots, weights).arrays)
    for k, i in enumerate(which.tolist()):
        storage = storages[i]
        rewards, terminated, last = storage.nstep(slots[k], n_step, 0.9)
        own = storage.gather(slots[k], last)
        for name in ("obs", "actions", "next_obs"):
            assert getattr(arrays, name)[k].tobytes() == own[name].tobytes(), name
        assert arrays.rewards[k].tobytes() == rewards.tobytes()
        assert arrays.terminated[k].tobytes() == terminated.tobytes()
        np.testing.assert_array_equal(arrays.indices[k], storage.ids[slots[k]])
        np.testing.assert_array_equal(arrays.ages[k], storage.added - 1 - storage.ids[slots[k]])
        np.testing.assert_array_equal(arrays.episodes[k], storage.episode_ids[slots[k]])
    if n_step > 1:  # (the look-ahead moved some next states)
        moved = [not np.array_equal(arrays.next_obs[k], storages[i].gather(slots[k])["next_obs"]) for k, i in
                 enumerate(which.tolist())]  # fmt: skip
        assert any(moved)


def test_a_members_own_add_and_load_after_the_cohort_is_built_are_what_it_gathers():
    """Building the cohort moves the packed rings' columns into blocks with a seed axis: a member's own add (its
    packing) and checkpoint load afterwards write its row of them, and its solo draw reads the cohort's rows."""
    memories = []
    for seed, n in enumerate(SIZES):
        storage = _packed(n, seed)
        memories.append(ReplayMemory(storage, UniformSampler(storage, np.random.default_rng(seed)), n_step=3))
    alone = copy.deepcopy(memories)
    sampling = CohortSampling(memories)
    assert type(sampling._gather) is RingGather
    assert np.shares_memory(memories[2].storage.obs, sampling._gather.columns.obs)
    loaded = _packed(61, seed=9)
    saved = ReplayMemory(loaded, UniformSampler(loaded, np.random.default_rng(9)), n_step=3).state_dict()
    for memory in (memories[0], alone[0]):
        memory.load_state_dict(copy.deepcopy(saved))
    rng = np.random.default_rng(4)
    for _ in range(3):
        obs, next_obs = rng.random(SHAPE) < 0.5, rng.random(SHAPE) < 0.5
        for memory in (memories[1], alone[1]):
            memory.add(obs, 2, 1.5, next_obs, False, False)
    for _ in range(3):
        drawn = sampling.sample([0, 1, 2, 3], 16, [1.0] * 4)
        for i, batch in enumerate(drawn):
            own = alone[i].sample(16, 1.0)
            for name in BatchArrays._fields:
                assert getattr(batch, name).tobytes() == getattr(own, name).tobytes(), name
    latest = sampling.latest([1, 0]).arrays
    assert latest.obs[0, 0].tobytes() == obs.tobytes() and latest.next_obs[0, 0].tobytes() == next_obs.tobytes()
    np.testing.assert_array_equal(latest.indices[:, 0], [SIZES[1] + 2, 60])
