"""The metric definitions: correlation count, TD-error statistics, the update window and running means.

Every test here runs with warnings as errors: a constant state must not raise a NaN or divide warning.
"""

from __future__ import annotations

from itertools import combinations
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from per_cli.train import metrics
from per_cli.train.metrics import (
    RunningMeans,
    UpdateWindow,
    batched_correlation_counts,
    correlation_count,
    td_error_stats,
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
# TD-error statistics, running means


def test_td_error_stats():
    td = np.array([0.5, 1.0, 2.0, 4.5], dtype=np.float32)
    assert td_error_stats(td) == pytest.approx(
        {"td_error/mean": 2.0, "td_error/median": 1.5, "td_error/max": 4.5, "td_error/std": np.sqrt(2.375)}
    )


def test_running_means_average_since_the_last_pop():
    means = RunningMeans()
    assert not means
    means.add({"a": 1.0, "b": 10.0})
    means.add_many({"a": np.array([2.0, 3.0])})
    assert means
    assert means.pop() == pytest.approx({"a": 2.0, "b": 10.0})
    assert not means and means.pop() == {}


# ------------------------------------------------------------------------------------------------------------
# the update window


def _updates(n: int, batch: int, obs_shape: tuple[int, ...], seed: int = 0):
    rng = np.random.default_rng(seed)
    for k in range(n):
        obs = rng.standard_normal((batch, *obs_shape)).astype(np.float32)
        obs[: k % 3] = obs[0, ...].ravel()[0]  # some constant states
        obs[k % 3 : k % 3 + 4] = obs[k % 3] * 2 + 1  # and some correlated ones
        b = SimpleNamespace(
            obs=obs,
            ages=rng.integers(0, 1000, size=batch),
            weights=rng.random(batch).astype(np.float32),
        )
        r = SimpleNamespace(td_errors=rng.standard_normal(batch).astype(np.float32), loss=float(k), q_mean=0.5 * k)
        yield b, r


@pytest.mark.parametrize("obs_shape", [(4,), (2, 6, 6)])
def test_window_values_equal_a_per_update_loop(obs_shape):
    window = UpdateWindow(correlation_threshold=0.8)
    updates = list(_updates(23, 16, obs_shape))
    for b, r in updates:
        window.add(b, r)
    values = window.pop()

    expected: dict[str, list[float]] = {}
    for b, r in updates:
        row = {
            **td_error_stats(np.abs(r.td_errors)),
            "losses/td_loss": r.loss,
            "losses/q_values": r.q_mean,
            "replay/sample_age": float(np.mean(b.ages)),
            "replay/is_weight_mean": float(np.mean(b.weights)),
            "replay/correlation_count": correlation_count(b.obs, 0.8),
        }
        for key, value in row.items():
            expected.setdefault(key, []).append(value)
    assert set(values) == set(expected)
    for key in expected:
        assert len(values[key]) == len(updates), key
        np.testing.assert_allclose(values[key], expected[key], rtol=1e-6, err_msg=key)
    assert sum(expected["replay/correlation_count"]) > 0  # the data did exercise the count


def test_window_pops_once_and_skips_correlation_when_off():
    window = UpdateWindow(correlation_threshold=None)
    assert window.pop() == {}
    for b, r in _updates(3, 8, (4,)):
        window.add(b, r)
    values = window.pop()
    assert "replay/correlation_count" not in values and len(values["td_error/mean"]) == 3
    assert window.pop() == {}  # the window starts over
