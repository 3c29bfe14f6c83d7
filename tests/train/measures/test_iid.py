"""The i.i.d. measures on known cases: identical states, independent draws from a memory, consecutive states of
a real CartPole trajectory, image states, one episode, and the unweighted loss by hand."""

from __future__ import annotations

from itertools import combinations

import gymnasium as gym
import numpy as np
import pytest

from per_cli.train.measures.iid import (
    PROJECTION_DIM,
    REFERENCE_SIZE,
    batch_variances,
    episode_diversity,
    reference_variance,
    state_diversity,
    state_view,
)

pytestmark = pytest.mark.filterwarnings("error")

SCALES = np.array([0.1, 1.0, 10.0, 300.0])  # features on very different scales: standardization must handle it


def _diversity(batches: np.ndarray, reference: np.ndarray, obs_ndim: int = 1) -> np.ndarray:
    """State diversity as the run computes it: each batch's variances of its viewed states, the reference's."""
    views = state_view(batches, obs_ndim)
    return state_diversity(batch_variances(views), reference_variance(state_view(reference, obs_ndim)))


def numpy_state_diversity(views: np.ndarray, ref_var: np.ndarray) -> np.ndarray:
    """State diversity by its definition in numpy's reductions, from viewed batches (U, B, k) and the reference's
    variance: each batch's ddof-1 ``var`` (shifted by its first state) over the reference's, averaged over the
    reference's varying features."""
    keep = ~np.isnan(ref_var)
    kept = views[:, :, keep]
    var = (kept - kept[:, :1]).var(axis=1, ddof=1)
    return (var / ref_var[keep]).mean(axis=1)


def _memory(n: int = 20_000, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, 4)) + rng.exponential(size=(n, 4))) * SCALES  # skewed, not Gaussian


def test_equals_mean_pairwise_squared_standardized_distance_over_2d():
    rng = np.random.default_rng(3)
    reference = rng.standard_normal((50, 5)) * [1, 2, 3, 4, 0]  # the last feature is constant: dropped
    batch = rng.standard_normal((9, 5)) * [1, 1, 1, 1, 7]
    mu, sigma = reference.mean(axis=0), reference.std(axis=0, ddof=1)
    z = (batch[:, :4] - mu[:4]) / sigma[:4]
    pairs = [np.sum((z[i] - z[j]) ** 2) for i, j in combinations(range(len(z)), 2)]
    expected = np.mean(pairs) / (2 * 4)
    assert _diversity(batch[None], reference)[0] == pytest.approx(expected, rel=1e-12)
    # and the reference's own mean pairwise distance is exactly 2d: the denominator is consistent
    zr = (reference[:, :4] - mu[:4]) / sigma[:4]
    ref_pairs = [np.sum((zr[i] - zr[j]) ** 2) for i, j in combinations(range(len(zr)), 2)]
    assert np.mean(ref_pairs) == pytest.approx(2 * 4, rel=1e-12)


def test_identical_states_give_zero():
    memory = _memory()
    same = np.tile(memory[7], (3, 64, 1))
    np.testing.assert_array_equal(_diversity(same, memory[:256]), 0.0)


def test_independent_draws_from_the_memory_give_about_one():
    memory = _memory()
    rng = np.random.default_rng(1)
    batches = memory[rng.integers(0, len(memory), size=(400, 64))]
    # exact memory variance: each batch's value has sd ≈ sqrt(2/63)/sqrt(4) ≈ 0.09 (more for skewed features),
    # so the mean of 400 has sd ≈ 0.005; 0.03 is six of them
    exact = _diversity(batches, memory)
    assert abs(exact.mean() - 1) < 0.03
    # a REFERENCE_SIZE-draw reference, as the trainer uses: its variance estimate is off by sd ≈ sqrt(2/4095)
    # ≈ 0.02 per feature (more for skewed ones), fixed for all 400 batches; the batches' mean adds 0.005
    reference = memory[rng.integers(0, len(memory), size=REFERENCE_SIZE)]
    assert abs(_diversity(batches, reference).mean() - 1) < 0.06


def test_constant_reference_features_are_dropped_and_an_all_constant_memory_is_undefined():
    memory = _memory()
    rng = np.random.default_rng(2)
    batches = memory[rng.integers(0, len(memory), size=(5, 32))]
    padded = np.concatenate([batches, np.full((5, 32, 1), 3.0)], axis=2)
    ref_padded = np.concatenate([memory[:256], np.full((256, 1), 0.1)], axis=1)  # 0.1 · 256: var may not be 0
    np.testing.assert_allclose(_diversity(padded, ref_padded), _diversity(batches, memory[:256]), rtol=1e-12)
    assert np.isnan(_diversity(batches, np.tile(memory[:1], (256, 1)))).all()
    with pytest.raises(ValueError, match="at least 2"):
        reference_variance(memory[:1])


def _heuristic_cartpole(steps: int, seed: int) -> np.ndarray:
    """States of a real CartPole-v1 trajectory under a balancing rule with 20% random actions (long episodes)."""
    env = gym.make("CartPole-v1")
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    states = []
    for _ in range(steps):
        states.append(obs)
        action = int(obs[2] + 0.5 * obs[3] > 0) if rng.random() > 0.2 else int(rng.integers(2))
        obs, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            obs, _ = env.reset()
    env.close()
    return np.asarray(states)


def test_consecutive_cartpole_states_are_well_below_one_and_uniform_draws_are_not():
    states = _heuristic_cartpole(3000, seed=0)
    rng = np.random.default_rng(0)
    reference = states[rng.integers(0, len(states), size=256)]
    starts = np.arange(0, len(states) - 64, 64)
    consecutive = np.stack([states[s : s + 64] for s in starts])
    uniform = states[rng.integers(0, len(states), size=(len(starts), 64))]
    low, high = _diversity(consecutive, reference).mean(), _diversity(uniform, reference).mean()
    # measured 0.51 vs 0.97: the cart's position and velocity barely move in 64 steps (ratios 0.15, 0.32), but
    # the pole's angle and angular velocity swing through their whole range (0.62, 1.0): CartPole mixes fast
    assert low < 0.6 and 0.85 < high < 1.15
    assert high / low > 1.6


def test_vector_states_are_used_as_they_are_and_larger_ones_projected():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(state_view(x, 1), x.astype(np.float64))
    wide = np.ones((2, 3, 65), dtype=np.float32)
    assert state_view(wide, 1).shape == (2, 3, PROJECTION_DIM)


@pytest.mark.parametrize("shape, dtype", [((4, 21, 21), np.uint8), ((10, 10, 4), bool)])
def test_image_states_path(shape, dtype):
    """Atari-like uint8 frames and MinAtar-like bool grids: a moving object gives consecutive states that
    barely differ; independent draws from the same memory give about 1; a still screen gives 0."""
    rng = np.random.default_rng(4)
    n = 3000
    side = shape[1]
    # a slow random walk (a move every 25 steps on average): states close in time are close in space
    track = np.cumsum(rng.choice([-1, 0, 1], p=[0.02, 0.96, 0.02], size=(n, 2)), axis=0) % side
    memory = np.zeros((n, *shape), dtype=dtype)
    for t, (r, c) in enumerate(track):
        if shape[0] == 4:  # frames × rows × cols, a 3×3 bright block, the frame stack lagging by one step
            for f in range(4):
                rr, cc = track[max(t - f, 0)]
                memory[t, f, max(rr - 1, 0) : rr + 2, max(cc - 1, 0) : cc + 2] = 255
            memory[t, :, -1, :] = 120  # a static border
        else:  # rows × cols × channels: the walker in channel 0, its mirror image in channel 2
            memory[t, r, c, 0] = True
            memory[t, side - 1 - r, side - 1 - c, 2] = True
    reference = memory[rng.integers(0, n, size=256)]
    consecutive = np.stack([memory[s : s + 16] for s in range(0, n - 16, 300)])
    uniform = memory[rng.integers(0, n, size=(len(consecutive), 16))]
    still = np.tile(memory[5], (2, 16, *[1] * len(shape)))
    low, high = _diversity(consecutive, reference, 3).mean(), _diversity(uniform, reference, 3).mean()
    assert 0.75 < high < 1.25
    assert high / low > 2
    np.testing.assert_allclose(_diversity(still, reference, 3), 0.0, atol=1e-12)


def test_projection_is_fixed_and_chunking_changes_nothing(monkeypatch):
    from per_cli.train.measures import iid

    rng = np.random.default_rng(5)
    frames = rng.integers(0, 256, size=(3, 7, 4, 9, 9), dtype=np.uint8)
    whole = state_view(frames, 3)
    monkeypatch.setattr(iid, "_CHUNK_BYTES", 4 * 324 * 2)  # two states a chunk
    np.testing.assert_array_equal(state_view(frames, 3), whole)
    # exact: the float32 ±1 sums of uint8 pixels equal the float64 product
    signs = np.where(np.random.default_rng(iid.PROJECTION_SEED).random((324, PROJECTION_DIM)) < 0.5, -1.0, 1.0)
    exact = frames.reshape(21, 324).astype(np.float64) @ signs / np.sqrt(PROJECTION_DIM)
    np.testing.assert_array_equal(whole.reshape(21, PROJECTION_DIM), exact)  # seeded, not run-dependent
    floats = frames.astype(np.float32) / 7  # not integers: the float64 path
    exact_floats = floats.reshape(21, 324).astype(np.float64) @ signs / np.sqrt(PROJECTION_DIM)
    np.testing.assert_allclose(state_view(floats, 3).reshape(21, -1), exact_floats, rtol=1e-12)


def test_episode_diversity_known_cases():
    b = 8
    one_episode = np.full((1, b), 5)
    assert episode_diversity(one_episode, np.array([100]))[0] == pytest.approx(1 / b)
    all_distinct = np.arange(b)[None]
    assert episode_diversity(all_distinct, np.array([100]))[0] == 1.0
    # fewer episodes held than B: the best possible batch covers all of them and scores 1
    three = np.array([[0, 1, 2, 2, 1, 0, 0, 2]])
    assert episode_diversity(three, np.array([3]))[0] == 1.0
    rows = np.array([[3, 3, 4, 4, 9, 9, 9, 9], [1, 2, 3, 4, 5, 6, 7, 7]])
    np.testing.assert_allclose(episode_diversity(rows, np.array([50, 50])), [3 / 8, 7 / 8])


def numpy_variance(reference: np.ndarray) -> np.ndarray:
    """The reference variance by numpy's reductions: ddof-1 ``var``, NaN where ``ptp`` is 0."""
    var = reference.var(axis=0, ddof=1)
    constant = np.ptp(reference, axis=0) == 0  # exact, unlike var == 0 for repeated non-dyadic values
    return np.where(constant, np.nan, var)


def test_the_compiled_reference_variance_is_numpys():
    """The compiled pass gives numpy's ``var`` and ``ptp`` to float64 rounding: values over 16 orders of magnitude,
    a constant non-dyadic feature (NaN), NaN and ±inf, one feature, a Fortran-ordered or float32 sample."""
    rng = np.random.default_rng(3)
    for n, k in ((2, 2), (9, 3), (4096, 4), (700, 64), (4096, 6), (100, 1)):
        reference = rng.normal(size=(n, k)) * 10.0 ** rng.uniform(-8, 8, size=k) + rng.normal(size=k) * 1e3
        if k > 1:
            reference[:, 0] = 0.1  # constant (not dyadic): NaN
        if k > 3:
            reference[n // 2, 1], reference[0, 2] = np.nan, -np.inf
        for sample in (reference, np.asfortranarray(reference), reference.astype(np.float32)):
            with np.errstate(invalid="ignore"):
                want = numpy_variance(sample.astype(np.float64))
                got = reference_variance(sample)
            assert got.dtype == np.float64 and got.shape == (k,)
            assert np.array_equal(np.isnan(got), np.isnan(want))
            # float64 rounding: relative, plus the cancellation of a feature far from 0 (|mean| ≫ its spread)
            mean, ok = np.abs(sample.astype(np.float64).mean(axis=0)), ~np.isnan(want)
            tol = 1e-12 * want[ok] + 64 * np.finfo(np.float64).eps * mean[ok] * np.sqrt(want[ok])
            assert (np.abs(got[ok] - want[ok]) <= tol).all()
        assert np.isnan(got[0]) == (k > 1) and np.isfinite(got[-1])
    with pytest.raises(ValueError, match="at least 2 states"):
        reference_variance(np.ones((1, 3)))


def _numpy_episode_diversity(episodes: np.ndarray, held: np.ndarray) -> np.ndarray:
    ordered = np.sort(episodes, axis=1)
    distinct = 1 + np.count_nonzero(np.diff(ordered, axis=1), axis=1)
    return distinct / np.minimum(episodes.shape[1], np.maximum(held, 1))


def test_episode_diversity_is_numpys():
    """The compiled count gives numpy's (sorted ids' differences) bit for bit, for ids spread wider than its
    table and beyond 2⁶²; int32 ids and a list of counts are taken as int64."""
    rng = np.random.default_rng(2)
    for b in (1, 2, 7, 64):
        episodes = rng.integers(0, rng.integers(1, 40), size=(30, b))
        episodes[::3] *= 1000  # ids spread wider than the compiled table: sorted
        episodes[1::3] += 2**62
        held = rng.integers(-1, 60, size=30)  # (0 and below: counted as 1)
        got = episode_diversity(episodes, held)
        assert got.dtype == np.float64 and got.tobytes() == _numpy_episode_diversity(episodes, held).tobytes()
        small = episodes[2::3]
        narrow = episode_diversity(small.astype(np.int32), held[2::3].tolist())
        assert narrow.tobytes() == _numpy_episode_diversity(small, held[2::3]).tobytes()


def _ref_vars(rng: np.random.Generator, k: int) -> tuple[np.ndarray, ...]:
    """Reference variances for k features: wide scales, every third feature constant (NaN), one varying."""
    return (rng.uniform(0.5, 2, size=k) * 10.0 ** rng.uniform(-5, 5, size=k),
            np.where(np.arange(k) % 3 == 1, np.nan, rng.uniform(0.5, 2, size=k)),
            np.where(np.arange(k) == 0, 1.0, np.nan))  # fmt: skip


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_one_state_diversity_is_numpys_definition_for_every_shape(dtype):
    """One compiled implementation for every (U, B, k): 1 to 40 features, batches of 2 to 300 (past numpy's
    pairwise block of 128), float32 and float64 states on wide scales, repeated states, constant reference
    features: numpy's ``var(ddof=1)``-based definition to 1e-12 relative; and for the shapes classic control
    logs (float32 states, k < 8, B <= 128, the values of every configs/seed001 run) numpy's own bits."""
    rng = np.random.default_rng(8)
    for k in (1, 2, 4, 7, 8, 13, 32, 40):
        for b in (2, 9, 64, 128, 129, 200, 300):
            states = (rng.normal(size=(6, b, k)) * 10.0 ** rng.uniform(-5, 5, size=k)).astype(dtype)
            states[1, b // 2 :] = states[1, 0]
            views = state_view(states, 1)
            variances = batch_variances(views)
            assert variances.dtype == np.float64 and variances.shape == (6, k)
            assert batch_variances(states).tobytes() == variances.tobytes()  # (the view is the states as float64)
            for ref_var in _ref_vars(rng, k):
                got, want = state_diversity(variances, ref_var), numpy_state_diversity(views, ref_var)
                np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
                if dtype == np.float32 and k < 8 and b <= 128:
                    assert got.tobytes() == want.tobytes(), (k, b)


@pytest.mark.parametrize("shape, dtype", [((4, 9, 9), np.uint8), ((10, 10, 4), bool), ((3, 70), np.float32)])
def test_projected_states_take_the_same_implementation(shape, dtype):
    """Projected states (Atari-like uint8 stacks, MinAtar-like bool grids, float states of more than 64 numbers)
    are viewed as (U, B, 32) float64 and measured by the same compiled pass: numpy's definition to 1e-12."""
    rng = np.random.default_rng(6)
    states = (rng.random((5, 33, *shape)) * (255 if dtype == np.uint8 else 1)).astype(dtype)
    if dtype is bool:
        states = rng.random((5, 33, *shape)) < 0.1
    views = state_view(states, len(shape))
    assert views.shape == (5, 33, PROJECTION_DIM) and views.dtype == np.float64
    for ref_var in _ref_vars(rng, PROJECTION_DIM):
        got = state_diversity(batch_variances(views), ref_var)
        np.testing.assert_allclose(got, numpy_state_diversity(views, ref_var), rtol=1e-12, atol=0)


def test_a_batch_of_one_has_no_diversity_and_no_warning():
    """Issue 35: replay.batch_size=1 let numpy's "Degrees of freedom <= 0" warning out."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = state_diversity(batch_variances(np.ones((3, 1, 4), np.float32)), np.ones(4))
    assert out.shape == (3,) and np.isnan(out).all()
    assert np.isnan(state_diversity(np.ones((2, 3)), np.full(3, np.nan))).all()  # no varying reference feature
