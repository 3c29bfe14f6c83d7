"""The reference sample drawn in one compiled call equals numpy's draw and variance, and leaves the generator where
numpy leaves it; other memories take numpy's path."""

from __future__ import annotations

import numpy as np
import pytest

from per_cli.replay import ReplayMemory
from per_cli.replay.samplers import UniformSampler
from per_cli.replay.storage.ring import TransitionStorage
from per_cli.train.measures.iid import reference_variance, reference_view
from per_cli.train.measures.reference import compiled_applies, drawn_reference_variance, integers_usable


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


@pytest.mark.parametrize(("capacity", "added", "n"), [(50, 1, 2), (50, 30, 4096), (100, 345, 4096), (7, 7, 513)])
def test_the_compiled_reference_is_numpys_draw_and_variance(capacity, added, n):
    assert integers_usable()
    memory = _memory(capacity, added)
    assert compiled_applies(memory, 1, n)
    ours, theirs = np.random.default_rng(added), np.random.default_rng(added)
    for _ in range(3):  # consecutive refreshes from one generator
        got = drawn_reference_variance(memory, 1, ours, n)
        want = reference_variance(reference_view(memory, 1, theirs, n))
        assert got.tobytes() == want.tobytes()
        assert ours.bit_generator.state == theirs.bit_generator.state
    assert np.isnan(got[0]) and np.isnan(got[1:]).any() == (added == 1)  # (one state: every feature constant)


def test_states_it_does_not_serve_take_numpys_path():
    memory = _memory(50, 30, features=80)  # projected states
    assert not compiled_applies(memory, 1, 4096)
    assert not compiled_applies(_memory(50, 30, features=1), 1, 4096)  # one feature: numpy sums it otherwise
    assert not compiled_applies(_memory(50, 0), 1, 4096)  # empty: numpy's path raises its error
    with pytest.raises(ValueError, match="empty memory"):
        drawn_reference_variance(_memory(50, 0), 1, np.random.default_rng(0))
    ours, theirs = np.random.default_rng(1), np.random.default_rng(1)
    got = drawn_reference_variance(memory, 1, ours, 256)
    assert got.tobytes() == reference_variance(reference_view(memory, 1, theirs, 256)).tobytes()
