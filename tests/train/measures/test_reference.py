"""The reference sample, one definition for every storage: ids drawn one at a time by numba's ``Generator.integers``
(``_fill_ids``) over the sampleable ids, their states read by the storage's own reader in bounded chunks and
viewed by ``state_view``, their per-feature variance; for a plain ring, a packed MinAtar ring and an Atari frame
storage alike."""

from __future__ import annotations

import numpy as np
import pytest

from per_cli.config import Config, ReplayConfig
from per_cli.replay import ReplayMemory, make_replay
from per_cli.replay.samplers import UniformSampler
from per_cli.replay.storage.frames import FrameStackStorage
from per_cli.replay.storage.packed import PackedTransitionStorage
from per_cli.replay.storage.ring import TransitionStorage
from per_cli.train.measures import reference
from per_cli.train.measures.iid import reference_variance, state_view, variance_by_feature
from per_cli.train.measures.reference import _fill_ids, drawn_reference_variance, reference_slots, reference_views
from tests.replay.test_frames import SIZE, fill
from tests.train.measures.test_iid import numpy_variance


def _memory(capacity: int, added: int, features: int = 6, seed: int = 0) -> ReplayMemory:
    rng = np.random.default_rng(seed)
    storage = TransitionStorage(capacity, (features,), np.float32)
    memory = ReplayMemory(storage, UniformSampler(storage, np.random.default_rng(seed)))
    scale = 10.0 ** rng.uniform(-6, 6, size=features)
    for i in range(added):
        state = rng.normal(size=features) * scale
        state[0] = 0.25  # a constant feature: NaN in the variance
        memory.add(state, 0, 0.0, state, i % 9 == 8, False)
    return memory


def _minatar(added: int = 300) -> ReplayMemory:
    """A real packed MinAtar-shaped memory (bool 10×10×4 states, stored as bits), holding ``added`` states."""
    cfg = Config(replay=ReplayConfig(kind="uniform", capacity=200, batch_size=16))
    memory = make_replay(cfg, (10, 10, 4), np.dtype(bool), 0)
    rng = np.random.default_rng(1)
    for t in range(added):
        obs = rng.random((10, 10, 4)) < 0.1
        memory.add(obs, 0, 0.0, obs, (t + 1) % 20 == 0, False)
    return memory


def _frames() -> ReplayMemory:
    """A frame storage whose oldest held transitions lost their frames (unsampleable)."""
    storage = FrameStackStorage(50, (4, SIZE, SIZE), extra_frames=5, check_memory=False)
    memory = ReplayMemory(storage, UniformSampler(storage, np.random.default_rng(0)))
    fill(memory, 500, max_len=4)
    assert not storage.sampleable(np.arange(storage.size)).all()
    return memory


def _replayed(rng: np.random.Generator) -> np.random.Generator:
    """A generator in ``rng``'s state (to draw what ``rng`` will draw next)."""
    copy = np.random.default_rng()
    copy.bit_generator.state = rng.bit_generator.state
    return copy


@pytest.mark.parametrize(("capacity", "added", "n"), [(50, 1, 2), (50, 30, 4096), (100, 345, 4096), (7, 7, 513)])
def test_a_rings_reference_is_the_variance_of_the_states_its_draws_pick(capacity, added, n):
    """The variance is numpy's of the states at the ids ``_fill_ids`` draws from the same generator state (slot =
    id % capacity), and exactly the compiled variance of those states as float64 (the numbers of the one compiled
    call that drew the plain ring's references before); the ids lie in the sampleable range and the generator moves
    on (consecutive refreshes draw anew)."""
    memory = _memory(capacity, added)
    storage = memory.storage
    oldest = storage.oldest_sampleable_id()
    rng = np.random.default_rng(added)
    previous = None
    for _ in range(3):  # consecutive refreshes from one generator
        replay = _replayed(rng)
        ids = np.empty(n, dtype=np.int64)
        _fill_ids(replay, oldest, storage.added - 1 - oldest, ids)
        assert ids.min() >= oldest and ids.max() <= storage.added - 1
        got = drawn_reference_variance(memory, rng, n)
        assert rng.bit_generator.state == replay.bit_generator.state
        states = storage.obs[ids % capacity].astype(np.float64)
        assert got.tobytes() == variance_by_feature(states).tobytes()
        want = numpy_variance(states)
        assert np.array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=0, equal_nan=True)
        if previous is not None and added > 1:
            assert got.tobytes() != previous.tobytes()
        previous = got
    assert np.isnan(got[0]) and np.isnan(got[1:]).any() == (added == 1)  # (one state: every feature constant)


@pytest.mark.parametrize("make", [_minatar, _frames], ids=["packed minatar", "atari frames"])
def test_every_storage_draws_the_same_ids_and_reads_them_with_its_own_reader(make):
    """A packed MinAtar memory and a frame storage draw their reference as a ring does: the ids of ``_fill_ids``
    on the window's generator, every one sampleable (a frame storage's overwritten history is skipped), their
    states as the storage reads them (unpacked bits, rebuilt stacks), viewed, numpy's variance."""
    memory = make()
    storage = memory.storage
    oldest = storage.oldest_sampleable_id()
    rng = np.random.default_rng(3)
    ids = np.empty(REFERENCE := 4096, dtype=np.int64)
    _fill_ids(_replayed(rng), oldest, storage.added - 1 - oldest, ids)
    slots = reference_slots(storage, _replayed(rng), REFERENCE)
    np.testing.assert_array_equal(slots, ids % storage.capacity)
    assert storage.sampleable(slots).all() and ids.min() >= oldest and ids.max() < storage.added
    states = storage.observations(slots)
    assert states.dtype == (np.bool_ if isinstance(storage, PackedTransitionStorage) else np.uint8)
    got = drawn_reference_variance(memory, rng)
    assert got.tobytes() == reference_variance(state_view(states, states.ndim - 1)).tobytes()
    np.testing.assert_allclose(got, numpy_variance(state_view(states, states.ndim - 1)), rtol=1e-10, equal_nan=True)


def test_image_states_are_read_in_bounded_chunks_that_change_nothing(monkeypatch):
    """The states are read at most ``REFERENCE_CHUNK_BYTES`` at a time (raw image states never all at once);
    the chunks change no view."""
    memory = _minatar()
    storage = memory.storage
    slots = reference_slots(storage, np.random.default_rng(0), 1000)
    whole = reference_views(storage, slots)
    reads = []
    read = storage.observations
    monkeypatch.setattr(storage, "observations", lambda s: reads.append(len(s)) or read(s))
    monkeypatch.setattr(reference, "REFERENCE_CHUNK_BYTES", 400 * 64)  # 64 states of 400 bools a chunk
    assert reference_views(storage, slots).tobytes() == whole.tobytes()
    assert reads == [1] + [64] * 15 + [40]  # (one state first: its size sets the chunk)


def test_the_reference_leaves_the_sampler_alone_and_draws_uniformly_over_what_is_held():
    """20,000 draws over a ring holding ids 30..79 (capacity 50): each held id about 400 times, no other, and the
    sampler's generator untouched (the window's own generator draws)."""
    memory = _memory(50, 80, features=2)
    before = memory.sampler.rng.bit_generator.state
    slots = reference_slots(memory.storage, np.random.default_rng(5), 20_000)
    assert memory.sampler.rng.bit_generator.state == before
    ids = memory.storage.ids[slots]
    assert ids.min() >= 30 and ids.max() <= 79
    counts = np.bincount(ids - 30, minlength=50)
    assert counts.min() > 300 and counts.max() < 520  # 400 expected each; with replacement (20k > 50)


def test_the_same_generator_state_draws_the_same_reference():
    memory = _memory(100, 345)
    first = drawn_reference_variance(memory, np.random.default_rng(5))
    assert drawn_reference_variance(memory, np.random.default_rng(5)).tobytes() == first.tobytes()
    assert drawn_reference_variance(memory, np.random.default_rng(6)).tobytes() != first.tobytes()


def test_the_ids_are_uniform_over_the_range():
    """100,000 draws over 50 ids (a ring's sampleable range, far from 0): every id within 5 standard deviations of
    its expected count; a range of one id draws it alone."""
    ids = np.empty(100_000, dtype=np.int64)
    _fill_ids(np.random.default_rng(9), 295, 49, ids)
    counts = np.bincount(ids - 295, minlength=50)
    assert len(counts) == 50 and ids.min() == 295
    p = 1 / 50
    assert (np.abs(counts - len(ids) * p) <= 5 * np.sqrt(len(ids) * p * (1 - p))).all()
    _fill_ids(np.random.default_rng(9), 7, 0, ids[:10])
    assert (ids[:10] == 7).all()


def test_an_empty_memory_or_a_single_draw_has_no_reference():
    with pytest.raises(ValueError, match="empty memory"):
        drawn_reference_variance(_memory(50, 0), np.random.default_rng(0))
    with pytest.raises(ValueError, match="at least 2 states"):
        drawn_reference_variance(_memory(50, 30), np.random.default_rng(0), 1)
