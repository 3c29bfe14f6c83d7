"""The metric definitions: correlation count, the update window (TD-error statistics, unweighted loss, i.i.d.
measures, on real memories' batches) and running means.

Every test here runs with warnings as errors: a constant state must not raise a NaN or divide warning.
"""

from __future__ import annotations

import dataclasses
from itertools import combinations
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from per_cli.config import Config, ReplayConfig
from per_cli.replay import make_replay
from per_cli.rl.agent import DQNAgent
from per_cli.train import metrics
from per_cli.train.iid import (
    REFERENCE_CHUNK,
    REFERENCE_SIZE,
    reference_variance,
    reference_view,
    state_diversity,
    state_view,
)
from per_cli.train.metrics import (
    RunningMeans,
    UpdateWindow,
    _numpy_td_measures,
    batched_correlation_counts,
    correlation_count,
    exact_measures_usable,
    gram,
    td_measures,
)

pytestmark = pytest.mark.filterwarnings("error")


def reference_correlations(states: np.ndarray) -> list[float]:
    """|Pearson r| of every pair i < j in float64, textbook formula; 0 where a state is constant."""
    x = states.reshape(len(states), -1).astype(np.float64)
    out = []
    for i, j in combinations(range(len(x)), 2):
        a, b = x[i] - x[i].mean(), x[j] - x[j].mean()
        na, nb = np.sqrt(a @ a), np.sqrt(b @ b)
        out.append(0.0 if na == 0 or nb == 0 else abs(a @ b) / (na * nb))
    return out


# ------------------------------------------------------------------------------------------------------------
# correlation count


def test_correlation_count_by_hand():
    states = np.array(
        [
            [1.0, 2.0, 3.0, 4.0],  # 0
            [2.0, 4.0, 6.0, 8.0],  # 1: 2 × state 0            -> r(0,1) = 1
            [4.0, 3.0, 2.0, 1.0],  # 2: state 0 reversed       -> r(0,2) = r(1,2) = -1 (|r| counts)
            [1.0, 3.0, 2.0, 4.0],  # 3: r with 0, 1 = 0.8; with 2 = -0.8
            [5.0, 5.0, 5.0, 5.0],  # 4: constant               -> uncorrelated with everything
        ],
        dtype=np.float32,
    )
    # pairs with |r| = 1: (0,1), (0,2), (1,2); pairs with |r| = 0.8: (0,3), (1,3), (2,3)
    assert correlation_count(states, threshold=0.9) == 3
    assert correlation_count(states, threshold=0.79) == 6
    assert correlation_count(states, threshold=0.0) == 6  # the constant state adds nothing even at 0
    assert isinstance(correlation_count(states), int)


def test_identical_states_are_all_pairs_and_two_features_are_degenerate():
    b = 16
    same = np.tile(np.array([0.3, -1.0, 2.5, 0.0], dtype=np.float32), (b, 1))
    assert correlation_count(same, 0.8) == b * (b - 1) // 2
    # two features: any two non-constant states are perfectly (anti-)correlated (documented caveat)
    rng = np.random.default_rng(0)
    two = rng.standard_normal((b, 2)).astype(np.float32)
    assert correlation_count(two, 0.99) == b * (b - 1) // 2


@pytest.mark.parametrize(
    "value, dtype",
    [(0.0, np.float32), (0.1, np.float32), (-3.7e5, np.float32), (1e-30, np.float32), (255, np.uint8), (7, np.int64)],
)
def test_constant_states_count_as_uncorrelated_without_warnings(value, dtype):
    constant = np.full((8, 6), value, dtype=dtype)
    with np.errstate(all="raise"):
        assert correlation_count(constant, 0.8) == 0
        mixed = np.concatenate([constant, np.arange(8 * 6, dtype=dtype).reshape(8, 6) % 5])
        expected = sum(r > 0.8 for r in reference_correlations(mixed))
        assert correlation_count(mixed, 0.8) == expected


def test_tiny_but_varying_states_are_not_constant():
    # correlation is scale-free: states of size 1e-15 that vary are correlated like their rescaled selves
    base = np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.1], [3.0, 1.0, 2.0]], dtype=np.float32)
    assert correlation_count(base * np.float32(1e-15), 0.8) == correlation_count(base, 0.8) == 1


def test_image_states_are_flattened():
    rng = np.random.default_rng(1)
    base = rng.integers(0, 256, size=(4, 12, 12), dtype=np.uint8)
    frames = np.stack(
        [
            base,
            (base // 2 + 10).astype(np.uint8),  # an affine copy: r = 1 with base (up to the rounding of //2)
            rng.integers(0, 256, size=(4, 12, 12), dtype=np.uint8),
            np.full((4, 12, 12), 255, dtype=np.uint8),  # a blank screen
            255 - base,  # the negative: r = -1
        ]
    )
    expected = sum(r > 0.8 for r in reference_correlations(frames))
    assert expected == 3  # base~copy, base~negative, copy~negative
    assert correlation_count(frames, 0.8) == expected
    assert correlation_count(frames.reshape(5, -1), 0.8) == expected


@settings(max_examples=60, deadline=None)
@given(
    hnp.arrays(
        np.float32,
        st.tuples(st.integers(2, 12), st.integers(1, 9)),
        # float32 arithmetic: features below ~1e-19 would underflow when squared; RL states are not that small
        elements=st.floats(-100, 100, width=32).filter(lambda v: v == 0 or abs(v) > 1e-6) | st.sampled_from([0.0, 1.0]),
    ),
    st.floats(0.0, 0.99),
)
def test_correlation_count_matches_the_float64_definition(states, threshold):
    rs = reference_correlations(states)
    # a pair within 1e-3 of the threshold may fall either way in float32; count the sure ones
    sure_above = sum(r > threshold + 1e-3 for r in rs)
    maybe = sum(abs(r - threshold) <= 1e-3 for r in rs)
    with np.errstate(divide="raise", invalid="raise", over="raise"):
        count = correlation_count(states, threshold)
    assert sure_above <= count <= sure_above + maybe


def test_batched_counts_equal_one_batch_at_a_time_across_chunks(monkeypatch):
    rng = np.random.default_rng(2)
    batches = rng.integers(0, 4, size=(7, 10, 3, 5, 5)).astype(np.uint8)  # few levels: many correlated pairs
    batches[3, 4] = 9  # a constant state
    one_by_one = [correlation_count(b, 0.5) for b in batches]
    assert batched_correlation_counts(batches, 0.5).tolist() == one_by_one
    monkeypatch.setattr(metrics, "_CHUNK_BYTES", 2 * 10 * 75 * 4)  # two updates a chunk: 4 chunks, last short
    assert batched_correlation_counts(batches, 0.5).tolist() == one_by_one
    assert batched_correlation_counts(batches, 0.5).dtype == np.int64


# ------------------------------------------------------------------------------------------------------------
# running means


def test_running_means_average_since_the_last_pop():
    means = RunningMeans()
    assert not means
    means.add({"a": 1.0, "b": 10.0})
    means.add_many({"a": np.array([2.0, 3.0])})
    assert means
    assert means.pop() == pytest.approx({"a": 2.0, "b": 10.0})
    assert not means and means.pop() == {}


# ------------------------------------------------------------------------------------------------------------
# the update window, fed with batches of a real memory


def _memory(obs_shape: tuple[int, ...], kind: str = "uniform", episode_length: int = 25, n: int = 400, seed: int = 0):
    """A real replay memory holding ``n`` transitions of random states in episodes of ``episode_length``."""
    dtype = np.uint8 if len(obs_shape) > 1 else np.float32
    cfg = Config(replay=ReplayConfig(kind=kind, capacity=1000, batch_size=16))
    memory = make_replay(cfg, obs_shape, np.dtype(dtype), seed)
    rng = np.random.default_rng(seed)
    for t in range(n):
        obs = (rng.random(obs_shape) * (255 if dtype == np.uint8 else 1)).astype(dtype)
        ends = (t + 1) % episode_length == 0
        memory.add(obs, int(rng.integers(2)), 1.0, obs, ends, False)
    return memory


def _updates(memory, n: int, batch: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    for k in range(n):
        b = memory.sample(batch)
        b.obs[: k % 3] = b.obs[0].ravel()[0]  # some constant states
        b.obs[k % 3 : k % 3 + 4] = b.obs[k % 3] // 2 + 1 if b.obs.dtype == np.uint8 else b.obs[k % 3] * 2 + 1
        r = SimpleNamespace(td_errors=rng.standard_normal(batch).astype(np.float32) * 2, loss=float(k), q_mean=0.5 * k)
        yield b, r


def _expected_row(b, r, loss: str, ref_var: np.ndarray, held: int) -> dict[str, float]:
    """One update's scalars computed on their own, by the definitions."""
    td = np.abs(r.td_errors.astype(np.float64))
    per_sample = np.where(td < 1, 0.5 * td**2, td - 0.5) if loss == "huber" else td**2
    return {
        "td_error/mean": td.mean(),
        "td_error/median": np.median(td),
        "td_error/max": td.max(),
        "td_error/std": td.std(),
        "losses/td_loss": r.loss,
        "losses/td_loss_unweighted": per_sample.mean(),
        "losses/q_values": r.q_mean,
        "replay/sample_age": float(np.mean(b.ages)),
        "replay/is_weight_mean": float(np.mean(b.weights)),
        "replay/correlation_count": correlation_count(b.obs, 0.8),
        "iid/episode_diversity": len(set(b.episodes.tolist())) / min(len(b.episodes), held),
        "iid/state_diversity": state_diversity(state_view(b.obs[None], b.obs.ndim - 1), ref_var)[0],
    }


@pytest.mark.parametrize("obs_shape, loss", [((4,), "huber"), ((2, 9, 9), "mse")])
def test_window_values_equal_a_per_update_loop(obs_shape, loss):
    memory = _memory(obs_shape)
    window = UpdateWindow(correlation_threshold=0.8, loss=loss, seed=7)
    updates = list(_updates(memory, 23, 16))
    for b, r in updates:
        window.add(b, r, memory)
    values = window.pop(memory)

    # the window's reference: REFERENCE_SIZE draws with its own generator, seeded by (seed, 0x11D)
    rng = np.random.default_rng(np.random.SeedSequence([7, 0x11D]))
    ref_var = reference_variance(reference_view(memory, len(obs_shape), rng))
    expected: dict[str, list[float]] = {}
    for b, r in updates:
        for key, value in _expected_row(b, r, loss, ref_var, memory.episodes_held()).items():
            expected.setdefault(key, []).append(value)
    assert set(values) == set(expected)
    for key in expected:
        assert len(values[key]) == len(updates), key
        np.testing.assert_allclose(values[key], expected[key], rtol=1e-6, err_msg=key)
    assert sum(expected["replay/correlation_count"]) > 0  # the data did exercise the count
    assert memory.episodes_held() == 16  # 400 transitions in episodes of 25


def test_td_error_statistics_by_hand():
    memory = _memory((4,))
    window = UpdateWindow(correlation_threshold=None, iid=False)
    b = memory.sample(4)
    window.add(b, SimpleNamespace(td_errors=np.array([0.5, -1.0, 2.0, -4.5], np.float32), loss=0.0, q_mean=0.0))
    values = window.pop()
    expected = {"td_error/mean": 2.0, "td_error/median": 1.5, "td_error/max": 4.5, "td_error/std": np.sqrt(2.375)}
    for key, value in expected.items():
        assert values[key][0] == pytest.approx(value), key
    assert values["losses/td_loss_unweighted"][0] == pytest.approx((0.125 + 0.5 + 1.5 + 4.0) / 4)


def test_one_episode_memory_and_none_batches_are_not_diverse():
    """Consecutive batches (``none``) from a memory of many episodes score low on both measures; a memory
    holding a single episode gives episode diversity 1 (nothing better was possible)."""
    memory = _memory((4,), kind="none", episode_length=100)
    window = UpdateWindow(correlation_threshold=None, seed=1)
    for _ in range(5):
        window.add(memory.sample(16), SimpleNamespace(td_errors=np.zeros(16, np.float32), loss=0.0, q_mean=0.0), memory)
    values = window.pop(memory)
    assert memory.episodes_held() == 4
    # 16 newest transitions: one episode of the 4 held, so 1/min(16, 4)
    np.testing.assert_allclose(values["iid/episode_diversity"], 1 / 4)
    single = _memory((4,), kind="uniform", episode_length=1000, n=100)
    window.add(single.sample(16), SimpleNamespace(td_errors=np.zeros(16, np.float32), loss=0.0, q_mean=0.0), single)
    assert window.pop(single)["iid/episode_diversity"][0] == 1.0


def test_reference_is_refreshed_once_per_log_window():
    memory = _memory((4,))
    draws = []
    original = memory.reference_obs
    memory.reference_obs = lambda n, rng: draws.append(n) or original(n, rng)  # count the draws
    window = UpdateWindow(correlation_threshold=None, refresh_every=10)
    for pops in ([4], [4], [2], [5], [9], [1]):  # updates added before each pop
        for b, r in _updates(memory, pops[0], 16):
            window.add(b, r, memory)
        window.pop(memory)
    # first pop; then when 10 updates have accumulated since: after 4+4+2, after 5+9, not after 1; each
    # reference is REFERENCE_SIZE draws: REFERENCE_CHUNK, then the rest at once (small states)
    assert draws == [REFERENCE_CHUNK, REFERENCE_SIZE - REFERENCE_CHUNK] * 3


def test_window_pops_once_skips_what_is_off_and_needs_the_memory_for_iid():
    memory = _memory((4,))
    window = UpdateWindow(correlation_threshold=None, iid=False)
    assert window.pop() == {}
    for b, r in _updates(memory, 3, 8):
        window.add(b, r)
    values = window.pop()
    assert "replay/correlation_count" not in values and "iid/state_diversity" not in values
    assert len(values["td_error/mean"]) == 3
    assert window.pop() == {}  # the window starts over
    with pytest.raises(ValueError, match="needs the memory"):
        UpdateWindow(correlation_threshold=None).add(b, r)


@pytest.mark.parametrize("loss", ["huber", "mse"])
def test_unweighted_loss_is_the_agents_loss_without_weights(loss):
    """On the live path: for a batch with IS weights of 1 the agent's own loss equals the window's unweighted
    loss of the agent's δ; with weights it is their weighted mean, and the unweighted one does not move."""
    memory = _memory((4,))
    agent_cfg = dataclasses.replace(Config().agent, loss=loss, hidden_sizes=(16,))
    batch = memory.sample(16)
    batch.rewards = batch.rewards * 3  # TD errors on both sides of the Huber kink
    values = {}
    for name, weights in (("ones", np.ones(16, np.float32)), ("weighted", np.linspace(0.01, 1, 16, dtype=np.float32))):
        torch.manual_seed(0)
        agent = DQNAgent(agent_cfg, (4,), 2, torch.device("cpu"))
        result = agent.learn(dataclasses.replace(batch, weights=weights))
        window = UpdateWindow(correlation_threshold=None, iid=False, loss=loss)
        window.add(dataclasses.replace(batch, weights=weights), result)
        values[name] = (result.loss, window.pop()["losses/td_loss_unweighted"][0])
    assert values["ones"][1] == pytest.approx(values["ones"][0], rel=1e-5)
    assert values["weighted"][1] == pytest.approx(values["ones"][1], rel=1e-6)
    assert values["weighted"][0] < 0.9 * values["weighted"][1]


def test_uniform_batches_read_one_when_rare_far_states_carry_the_variance():
    """A memory whose spread comes mostly from rare far states (0.4% of them 30σ away in every feature, as
    zero-padded frame stacks are from Pong's play): uniform batches must still read about 1. A reference that
    often misses those states (256 draws: 10 of them on average) underestimates σ² for a whole window, and
    since E[1/σ̂²] ≫ 1/σ² the measure read 2.43 here; with 4,096 draws it reads 1.04 (these seeds)."""
    cfg = Config(replay=ReplayConfig(kind="uniform", capacity=20_000, batch_size=32))
    memory = make_replay(cfg, (4,), np.dtype(np.float32), 0)
    rng = np.random.default_rng(5)
    states = rng.standard_normal((20_000, 4)).astype(np.float32)
    states[rng.random(20_000) < 0.004] += 30.0
    for t, obs in enumerate(states):
        memory.add(obs, 0, 0.0, obs, (t + 1) % 200 == 0, False)
    window = UpdateWindow(correlation_threshold=None, refresh_every=50, seed=3)
    values = []
    for _ in range(40):  # 40 log windows of 50 uniform batches, each with its own reference
        for _ in range(50):
            window.add(memory.sample(32), SimpleNamespace(td_errors=np.zeros(32, np.float32), loss=0, q_mean=0), memory)
        values.append(window.pop(memory)["iid/state_diversity"])
    # 2,000 batches; each one's value has sd ≈ 1.4 (a far state in 12% of batches), so the mean's is ≈ 0.03
    assert abs(np.concatenate(values).mean() - 1) < 0.12


def numpy_correlation_counts(states: np.ndarray, threshold: float) -> np.ndarray:
    """The counts as numpy's elementwise passes compute them (the implementation before the compiled one)."""
    u, b = states.shape[:2]
    x = states.reshape(u, b, -1).astype(np.float32)
    x -= x.mean(axis=2, keepdims=True, dtype=np.float64).astype(np.float32)
    r = x @ x.transpose(0, 2, 1)
    squared_norms = np.diagonal(r, axis1=1, axis2=2)
    inv = np.zeros(squared_norms.shape, dtype=np.float32)
    np.divide(1.0, np.sqrt(squared_norms), out=inv, where=squared_norms > 0)
    r *= inv[:, :, None]
    r *= inv[:, None, :]
    above = (np.abs(r, out=r) > threshold) & np.triu(np.ones((b, b), dtype=bool), k=1)
    return np.count_nonzero(above.reshape(u, -1), axis=1)


@pytest.mark.parametrize("features", [2, 4, 7, 8, 30])
def test_compiled_counts_equal_numpy_elementwise_counts_bit_for_bit(features):
    """The compiled centring (rows under 8 numbers) and counting give numpy's counts exactly, also for
    near-duplicate, constant and wildly scaled states (where float32 rounding decides)."""
    rng = np.random.default_rng(features)
    for trial in range(40):
        states = rng.normal(size=(5, 48, features)).astype(np.float32)
        if trial % 4 == 1:  # strongly correlated: many pairs near any threshold
            states = states[:, :1] * rng.uniform(0.5, 2, size=(5, 48, 1)) + rng.normal(scale=0.3, size=states.shape)
        elif trial % 4 == 2:  # constant and repeated states
            states[:, ::3] = 1.5
            states[:, 1::3] = states[:, 2::3]
        elif trial % 4 == 3:  # magnitudes from 1e-12 to 1e12: the float64 mean's summation order matters
            states = states * 10.0 ** rng.integers(-12, 12, size=states.shape)
        states = states.astype(np.float32)
        for threshold in (0.1, 0.8, 0.95):
            expected = numpy_correlation_counts(states, threshold)
            assert np.array_equal(batched_correlation_counts(states, threshold), expected)


@pytest.mark.parametrize("loss", ["huber", "mse"])
def test_the_compiled_td_measures_are_numpys_bit_for_bit(loss):
    assert exact_measures_usable()
    rng = np.random.default_rng(4)
    for u, b in ((1, 1), (3, 8), (20, 64), (7, 100), (2, 128), (3, 129)):  # 129: numpy's own
        raw = (rng.normal(size=(u, b)) * 10.0 ** rng.uniform(-4, 4, size=(u, b))).astype(np.float32)
        raw[0, 0] = -0.0
        if u > 2:
            raw[1, :] = np.round(raw[1])  # ties
            raw[2, b // 2] = np.nan
        weights = rng.uniform(0, 1, size=(u, b)).astype(np.float32)
        with np.errstate(invalid="ignore"):
            got, want = td_measures(raw, weights, loss), _numpy_td_measures(raw, weights, loss)
        assert list(got) == list(want)
        for key in want:
            assert got[key].dtype == want[key].dtype and got[key].tobytes() == want[key].tobytes(), key
    with pytest.raises(ValueError, match="unknown loss"):  # anything else: numpy's, with its error
        td_measures(raw, weights, "l1")


def test_gram_is_numpys_product_bit_for_bit():
    """The Gram matrices of the correlation count (a general product where the BLAS gives the same bits) are
    numpy's ``x @ x.transpose(0, 2, 1)`` exactly, for short rows and long ones."""
    rng = np.random.default_rng(11)
    for d in (2, 4, 7, 8, 20):
        for b in (5, 64, 128):
            x = (rng.normal(size=(3, b, d)) * 10.0 ** rng.uniform(-4, 4, size=(3, b, d))).astype(np.float32)
            x -= x.mean(axis=2, keepdims=True)
            assert gram(x).tobytes() == (x @ x.transpose(0, 2, 1)).tobytes()
