"""The reference sample drawn in one compiled call: its draws are uniform over the memory's sampleable ids and
repeat from the generator's state, its variance is numpy's of the states drawn; other memories take
``iid.reference_view``."""

from __future__ import annotations

import numpy as np
import pytest

from per_cli.replay import ReplayMemory
from per_cli.replay.samplers import UniformSampler
from per_cli.replay.storage.ring import TransitionStorage
from per_cli.train.measures.iid import reference_variance, reference_view
from per_cli.train.measures.reference import _fill_ids, compiled_applies, drawn_reference_variance


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


def _numpy_variance(states: np.ndarray) -> np.ndarray:
    var = states.var(axis=0, ddof=1)
    return np.where(np.ptp(states, axis=0) == 0, np.nan, var)


@pytest.mark.parametrize(("capacity", "added", "n"), [(50, 1, 2), (50, 30, 4096), (100, 345, 4096), (7, 7, 513)])
def test_the_compiled_reference_is_the_variance_of_the_states_its_draws_pick(capacity, added, n):
    """The kernel's variance is numpy's of the states at the ids ``_fill_ids`` draws from the same generator
    state (slot = id % capacity), the ids lie in the sampleable range, and the generator moves on (consecutive
    refreshes draw anew)."""
    memory = _memory(capacity, added)
    storage = memory.storage
    assert compiled_applies(memory, 1, n)
    oldest = storage.oldest_sampleable_id()
    rng = np.random.default_rng(added)
    previous = None
    for _ in range(3):  # consecutive refreshes from one generator
        replay = np.random.default_rng()
        replay.bit_generator.state = rng.bit_generator.state
        ids = np.empty(n, dtype=np.int64)
        _fill_ids(replay, oldest, storage.added - 1 - oldest, ids)
        assert ids.min() >= oldest and ids.max() <= storage.added - 1
        got = drawn_reference_variance(memory, 1, rng, n)
        assert rng.bit_generator.state == replay.bit_generator.state
        want = _numpy_variance(storage.obs[ids % capacity].astype(np.float64))
        assert np.array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=0, equal_nan=True)
        if previous is not None and added > 1:
            assert got.tobytes() != previous.tobytes()
        previous = got
    assert np.isnan(got[0]) and np.isnan(got[1:]).any() == (added == 1)  # (one state: every feature constant)


def test_the_same_generator_state_draws_the_same_reference():
    memory = _memory(100, 345)
    first = drawn_reference_variance(memory, 1, np.random.default_rng(5))
    assert drawn_reference_variance(memory, 1, np.random.default_rng(5)).tobytes() == first.tobytes()
    assert drawn_reference_variance(memory, 1, np.random.default_rng(6)).tobytes() != first.tobytes()


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


def test_the_compiled_reference_estimates_what_numpys_draw_estimates():
    """The compiled draw and the memory's own (``reference_view``) estimate the same variances: 4,096 draws of a
    300-state memory agree within their sampling error."""
    memory = _memory(300, 300, features=4)
    got = drawn_reference_variance(memory, 1, np.random.default_rng(1))
    other = reference_variance(reference_view(memory, 1, np.random.default_rng(2), 4096))
    whole = _numpy_variance(memory.storage.obs.astype(np.float64))
    for estimate in (got, other):
        np.testing.assert_allclose(estimate[1:], whole[1:], rtol=0.15)


def test_states_it_does_not_serve_take_the_memorys_draw():
    memory = _memory(50, 30, features=80)  # projected states
    assert not compiled_applies(memory, 1, 4096)
    assert compiled_applies(_memory(50, 30, features=1), 1, 4096)  # one feature: the compiled pass serves it
    assert not compiled_applies(_memory(50, 30), 1, 1)  # one state has no variance
    assert not compiled_applies(_memory(50, 0), 1, 4096)  # empty: the memory's own draw raises its error
    with pytest.raises(ValueError, match="empty memory"):
        drawn_reference_variance(_memory(50, 0), 1, np.random.default_rng(0))
    ours, theirs = np.random.default_rng(1), np.random.default_rng(1)
    got = drawn_reference_variance(memory, 1, ours, 256)
    assert got.tobytes() == reference_variance(reference_view(memory, 1, theirs, 256)).tobytes()
