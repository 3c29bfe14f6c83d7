"""The gather (replay/gather.py): bit-packed rings go through the one compiled ring gather, their states unpacked
once over every member's rows, and Atari frame storages through the one compiled frame gather; each gives every
member the batch its own storage gathers, byte for byte."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from per_cli.replay import ReplayMemory
from per_cli.replay.cohort import CohortSampling
from per_cli.replay.gather import FrameGather, RingGather, gather_for
from per_cli.replay.samplers import UniformSampler
from per_cli.replay.storage.frames import FrameStackStorage
from per_cli.replay.storage.packed import PackedTransitionStorage
from per_cli.replay.storage.ring import BatchArrays
from per_cli.replay.store import add_transition
from tests.replay.test_frames import SIZE as FRAME
from tests.replay.test_frames import fill

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
        add_transition(storage, obs, int(rng.integers(6)), float(rng.normal()), next_obs, done, cut)
        obs = rng.random(SHAPE) < 0.3 if done or cut else next_obs
    return storage


def _slots(storages, batch: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.stack([rng.integers(0, s.size, size=batch) for s in storages])


def _own(storages, which: np.ndarray, slots: np.ndarray, weights: np.ndarray, n_step: int) -> BatchArrays:
    """Each member's own storage's gather (and n-step look-ahead), stacked over the members: the batches a cohort's
    gather must give."""
    rows = []
    for k, i in enumerate(which.tolist()):
        storage, own = storages[i], {}
        if n_step > 1:
            own["rewards"], own["terminated"], last = storage.nstep(slots[k], n_step, 0.9)
            own = {**storage.gather(slots[k], last), **own}
        else:
            own = storage.gather(slots[k])
        ids = storage.ids[slots[k]]
        own.update(indices=ids, ages=storage.added - 1 - ids, episodes=storage.episode_ids[slots[k]])
        rows.append(own)
    return BatchArrays(**{name: np.stack([row[name] for row in rows]) for name in BatchArrays._fields
                          if name != "weights"}, weights=weights)  # fmt: skip


def _same(got: BatchArrays, want: BatchArrays) -> None:
    for name in BatchArrays._fields:
        a, b = np.asarray(getattr(got, name)), np.asarray(getattr(want, name))
        assert (a.dtype, a.shape) == (b.dtype, b.shape), name
        assert a.tobytes() == b.tobytes(), name


def _draws_are_each_members_own(sampling: CohortSampling, alone: list[ReplayMemory]) -> None:
    """Three cohort draws of four members, each member's batch byte for byte its lone twin's own draw."""
    for _ in range(3):
        drawn = sampling.sample([0, 1, 2, 3], 16, [1.0] * 4)
        for i, batch in enumerate(drawn):
            own = alone[i].sample(16, 1.0)
            for name in BatchArrays._fields:
                assert getattr(batch, name).tobytes() == getattr(own, name).tobytes(), name


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
    _same(arrays, _own(storages, which, slots, weights, n_step))
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
    _draws_are_each_members_own(sampling, alone)
    latest = sampling.latest([1, 0]).arrays
    assert latest.obs[0, 0].tobytes() == obs.tobytes() and latest.next_obs[0, 0].tobytes() == next_obs.tobytes()
    np.testing.assert_array_equal(latest.indices[:, 0], [SIZES[1] + 2, 60])


# ---------------------------------------------------------------------------------------------------------------
# Atari frame storages: one compiled gather over the members

FRAMES = ((3, 5), (40, 40), (300, 5), (97, 12))  # (transitions, longest episode): part-filled (every stack padded),
# full with its frames not yet wrapped, wrapped (frames overwritten: some transitions unsampleable), between


def _frame_storage(n: int, max_len: int, seed: int, capacity: int = 40) -> FrameStackStorage:
    storage = FrameStackStorage(capacity, (4, FRAME, FRAME), extra_frames=6, check_memory=False)
    fill(storage, n, max_len=max_len, seed=seed)
    return storage


def _sampleable_slots(storages, which: np.ndarray, batch: int, seed: int) -> np.ndarray:
    """``batch`` sampleable slots of each member of ``which`` (the sampler's job: overwritten frames never drawn)."""
    rng = np.random.default_rng(seed)
    held = [np.flatnonzero(s.sampleable(np.arange(s.size))) for s in storages]
    return np.stack([rng.choice(held[i], size=batch) for i in which.tolist()])


def test_frame_storages_are_gathered_by_the_frame_gather_and_no_other_class_is_served():
    storages = [_frame_storage(n, max_len, seed) for seed, (n, max_len) in enumerate(FRAMES)]
    assert type(gather_for(storages, 1, 0.99)) is FrameGather
    memory = ReplayMemory(storages[0], UniformSampler(storages[0], np.random.default_rng(0)))
    assert type(memory.gather) is FrameGather  # (a solo memory: the same gather over a list of one)
    with pytest.raises(ValueError, match="no gather serves storages of"):
        gather_for([storages[0], _packed(5, 0)], 1, 0.99)


@pytest.mark.parametrize("members", [[2, 0, 3, 1, 2], [0], [2]])
@pytest.mark.parametrize("n_step", [1, 3])
def test_a_frame_cohorts_gather_is_each_members_own_storage_gather(n_step, members):
    """Members part-filled (episode starts padded with zero frames), full, wrapped (unsampleable transitions left
    out, as a draw leaves them), drawn shuffled with a repeat, or one alone: every field byte for byte what each
    member's own storage gathers (its n-step look-ahead's next stacks too), as the storages were before the cohort
    moved their columns into its blocks; at n-step 1 ``obs`` and ``next_obs`` are views of one block."""
    storages = [_frame_storage(n, max_len, seed) for seed, (n, max_len) in enumerate(FRAMES)]
    assert storages[1].size == 40 and storages[1].frames_written <= storages[1].n_frames
    assert not storages[2].sampleable(np.arange(40)).all()
    if len(members) == 1:
        storages = [storages[members[0]]]
        members = [0]
    before = copy.deepcopy(storages)
    gather = FrameGather(storages, n_step, 0.9)
    which = np.array(members, dtype=np.int64)
    slots = _sampleable_slots(storages, which, 48, seed=7)
    weights = np.random.default_rng(8).random(slots.shape).astype(np.float32)
    arrays, device = gather(which, slots, weights)
    assert device is None and arrays.obs.dtype == np.uint8 and arrays.obs.shape == (len(which), 48, 4, FRAME, FRAME)
    _same(arrays, _own(before, which, slots, weights, n_step))
    assert np.shares_memory(arrays.obs, arrays.next_obs) == (n_step == 1)
    padded = ~arrays.obs.reshape(*slots.shape, 4, -1).any(axis=3)
    assert padded.any() == (members != [2])  # (the wrapped ring alone: no episode start drawn)
    if n_step > 1 and len(which) > 1:  # (the look-ahead moved some next states)
        one_step = _own(before, which, slots, weights, 1).next_obs
        assert not np.array_equal(arrays.next_obs, one_step)


def test_a_frame_members_own_add_and_load_after_the_cohort_is_built_are_what_it_gathers():
    """Building the cohort moves the frame storages' columns into blocks with a seed axis: a member's own add and
    checkpoint load afterwards write its row of them, and its solo draws (n-step 3) equal the cohort's rows."""
    memories = []
    for seed, (n, max_len) in enumerate(FRAMES):
        storage = FrameStackStorage(40, (4, FRAME, FRAME), extra_frames=6, check_memory=False)
        memory = ReplayMemory(storage, UniformSampler(storage, np.random.default_rng(seed)), n_step=3)
        fill(memory, n, max_len=max_len, seed=seed)
        memories.append(memory)
    alone = copy.deepcopy(memories)
    sampling = CohortSampling(memories)
    assert type(sampling._gather) is FrameGather
    for name in ("frames", "frame_gid", "hist", "actions", "counters"):
        assert np.shares_memory(getattr(memories[2].storage, name), getattr(sampling._gather.columns, name)), name
    storage = FrameStackStorage(40, (4, FRAME, FRAME), extra_frames=6, check_memory=False)
    source = ReplayMemory(storage, UniformSampler(storage, np.random.default_rng(9)), n_step=3)
    fill(source, 61, max_len=9, seed=9)
    saved = source.state_dict()
    for memory in (memories[0], alone[0]):
        memory.load_state_dict(copy.deepcopy(saved))
    for memory in (memories[1], alone[1]):
        fill(memory, 7, max_len=4, seed=11)
    _draws_are_each_members_own(sampling, alone)
    latest = sampling.latest([1, 0]).arrays
    np.testing.assert_array_equal(latest.indices[:, 0], [FRAMES[1][0] + 6, 60])
    assert latest.obs[0, 0].tobytes() == alone[1].storage.gather(np.array([alone[1].storage.latest_slot]))[
        "obs"][0].tobytes()  # fmt: skip


def test_moving_the_frames_into_a_block_copies_only_those_written():
    """The frame ring's block is zeroed lazily and only the frames written so far are copied into it (the rest of
    a ring is zeros: a large ring mostly unwritten costs no resident memory); the other columns move whole."""
    storages = [_frame_storage(n, 5, seed, capacity=500) for seed, n in enumerate((4, 9))]
    written = [s.frames_written for s in storages]
    frames = [s.frames.copy() for s in storages]
    for storage, n in zip(storages, written, strict=True):
        storage.frames[n:] = 255  # (never so in a real ring: shows what the move reads)
    gather = FrameGather(storages, 1, 0.9)
    block = gather.columns.frames
    assert block.shape == (2, storages[0].n_frames, FRAME * FRAME)
    for k, (storage, n) in enumerate(zip(storages, written, strict=True)):
        assert np.shares_memory(storage.frames, block)
        np.testing.assert_array_equal(storage.frames, frames[k])  # (written ones moved, the rest zeros)
        assert not storage.frames[n:].any()
