"""The bit-packed storage for bool observations (MinAtar) against the plain ring it stands in for."""

import numpy as np
import pytest

from per_cli.config import ConfigError, load_config
from per_cli.replay.storage.frames import FrameStackStorage, make_storage
from per_cli.replay.storage.packed import PackedTransitionStorage, packed_row_bytes
from per_cli.replay.storage.ring import TransitionStorage
from per_cli.replay.store import add_transition


def _fill(storages, shape, n, seed=0):
    """Add the same ``n`` random transitions (episodes of random length) to every storage."""
    rng = np.random.default_rng(seed)
    obs = rng.random(shape) < 0.3
    for t in range(n):
        next_obs = rng.random(shape) < 0.3
        action, done = int(rng.integers(6)), bool(rng.random() < 0.1)
        for s in storages:
            add_transition(s, obs, action, 0.5 * t, next_obs, done, False)
        obs = rng.random(shape) < 0.3 if done else next_obs


@pytest.mark.parametrize("shape", [(10, 10, 4), (10, 10, 7), (3, 1, 1)])  # 400, 700 (not whole bytes), 3 bits
def test_batches_equal_the_plain_rings_after_wrapping(shape):
    packed = PackedTransitionStorage(64, shape)
    plain = TransitionStorage(64, shape, np.bool_)
    _fill([plain, packed], shape, 200)
    slots = np.random.default_rng(1).integers(0, 64, size=500)
    got, want = packed.gather(slots), plain.gather(slots)
    assert got.keys() == want.keys()
    for key in want:
        assert got[key].dtype == want[key].dtype and got[key].shape == want[key].shape, key
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)
    np.testing.assert_array_equal(packed.observations(slots), want["obs"])
    np.testing.assert_array_equal(packed.ids, plain.ids)
    np.testing.assert_array_equal(packed.episode_ids, plain.episode_ids)


def test_a_state_takes_its_bits_rounded_up_to_bytes():
    assert packed_row_bytes((10, 10, 4)) == 50 and packed_row_bytes((10, 10, 7)) == 88
    s = PackedTransitionStorage(1000, (10, 10, 10))
    assert s.obs.shape == s.next_obs.shape == (1000, 125) and s.obs.dtype == np.uint8
    allocated = sum(getattr(s, k).nbytes for k, v in vars(s).items() if isinstance(v, np.ndarray))
    assert allocated == PackedTransitionStorage.bytes_needed(1000, (10, 10, 10))
    plain = TransitionStorage(1000, (10, 10, 10), np.bool_)
    assert s.obs.nbytes * 8 == plain.obs.nbytes  # 1 bit where numpy spends a byte


def test_checkpoint_round_trip():
    a = PackedTransitionStorage(32, (10, 10, 4))
    _fill([a], (10, 10, 4), 50)
    b = PackedTransitionStorage(32, (10, 10, 4))
    b.load_state_dict(a.state_dict())
    slots = np.arange(32)
    for key, value in a.gather(slots).items():
        np.testing.assert_array_equal(b.gather(slots)[key], value)
    assert (b.cursor, b.size, b.added) == (a.cursor, a.size, a.added)


def test_only_bool_states_of_the_declared_shape_are_packed():
    with pytest.raises(ValueError, match="packs bool observations"):
        PackedTransitionStorage(8, (10, 10, 4), np.uint8)
    s = PackedTransitionStorage(8, (10, 10, 4))
    with pytest.raises(ValueError, match="expected bool observations of shape"):
        add_transition(s, np.ones((10, 10, 4), np.uint8), 0, 0.0, np.ones((10, 10, 4), bool), False, False)
    with pytest.raises(ValueError, match="expected bool observations of shape"):
        add_transition(s, np.ones((10, 10, 5), bool), 0, 0.0, np.ones((10, 10, 5), bool), False, False)
    assert s.added == 0


def test_make_storage_packs_bool_observations_only():
    cfg = load_config(None, ["replay.capacity=16", "replay.batch_size=4"])
    assert type(make_storage(cfg, (10, 10, 4), np.dtype(bool))) is PackedTransitionStorage
    assert type(make_storage(cfg, (4,), np.dtype(np.float32))) is TransitionStorage
    assert type(make_storage(cfg, (10, 10, 4), np.dtype(np.uint8))) is TransitionStorage
    assert type(make_storage(cfg, (4, 10, 10), np.dtype(np.uint8), frame_stack=4)) is FrameStackStorage


def test_a_memory_larger_than_the_machine_is_a_config_error_before_allocating():
    with pytest.raises(ConfigError, match=r"replay.capacity: .* bit-packed transitions \(10, 10, 4\)"):
        PackedTransitionStorage(10**13, (10, 10, 4))
