"""The correlation count (its definition, its batched and compiled parts) and the running means (the TD-error
statistics' row reductions: tests/train/measures/test_reductions.py; every measure of an update:
test_update_measures.py).

Every test here runs with warnings as errors: a constant state must not raise a NaN or divide warning.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from per_cli.train.measures import metrics
from per_cli.train.measures.metrics import (
    RunningMeans,
    batched_correlation_counts,
    correlation_count,
    gram,
    totals,
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
    means.add_totals(totals({"a": np.array([1.0]), "b": np.array([10.0])}))
    means.add_totals(totals({"a": np.array([2.0, 3.0])}))
    assert means.pop() == pytest.approx({"a": 2.0, "b": 10.0})
    assert means.pop() == {}


def test_running_means_rebuilt_from_their_state_dict_continue_the_same():
    means = RunningMeans()
    means.add_totals(totals({"b": np.array([1.0]), "a": np.array([2.0])}))
    means.add_totals(totals({"a": np.array([3.0, 4.5])}))
    state = means.state_dict()
    assert state == {"sums": {"b": 1.0, "a": 9.5}, "counts": {"b": 1, "a": 3}}
    assert type(state["sums"]) is dict and type(state["counts"]) is dict  # plain dicts, not defaultdicts
    rebuilt = RunningMeans.from_state_dict(state)
    for m in (means, rebuilt):
        m.add_totals(totals({"c": np.array([1.0]), "a": np.array([0.5])}))
    assert list(rebuilt.pop().items()) == list(means.pop().items()) == [("b", 1.0), ("a", 2.5), ("c", 1.0)]
    assert state["counts"] == {"b": 1, "a": 3}  # the state is a copy
    assert RunningMeans.from_state_dict(RunningMeans().state_dict()).pop() == {}


def numpy_correlations(states: np.ndarray) -> np.ndarray:
    """|r| of every pair i < j of each batch (U, pairs), float32, as numpy's elementwise passes compute them (the
    implementation before the compiled one): numpy's centring, numpy's product, scaled by the inverse norms."""
    u, b = states.shape[:2]
    x = states.reshape(u, b, -1).astype(np.float32)
    x -= x.mean(axis=2, keepdims=True, dtype=np.float64).astype(np.float32)
    r = x @ x.transpose(0, 2, 1)
    squared_norms = np.diagonal(r, axis1=1, axis2=2)
    inv = np.zeros(squared_norms.shape, dtype=np.float32)
    np.divide(1.0, np.sqrt(squared_norms), out=inv, where=squared_norms > 0)
    r *= inv[:, :, None]
    r *= inv[:, None, :]
    upper_i, upper_j = np.triu_indices(b, k=1)
    return np.abs(r)[:, upper_i, upper_j]


@pytest.mark.parametrize("features", [2, 4, 7, 8, 30])
def test_compiled_counts_equal_numpy_elementwise_counts_to_float32_rounding(features):
    """The compiled centring (rows under 8 numbers), the Gram matrix by shape (``gram``) and the compiled
    counting count what numpy's elementwise passes count, also for near-duplicate, constant and wildly scaled
    states: exactly, but for pairs whose |r| lies within float32 rounding (1e-5) of the threshold."""
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
        r = numpy_correlations(states)
        for threshold in (0.1, 0.8, 0.95):
            sure, maybe = (r > threshold + 1e-5).sum(axis=1), (np.abs(r - threshold) <= 1e-5).sum(axis=1)
            counts = batched_correlation_counts(states, threshold)
            assert ((sure <= counts) & (counts <= sure + maybe)).all()
            assert maybe.sum() <= 0.01 * sure.sum() + 2  # (the comparison leaves little to chance)


def test_gram_is_numpys_product_to_float32_rounding():
    """The Gram matrices of the correlation count (a general product for short rows, numpy's for long ones) are
    numpy's ``x @ x.transpose(0, 2, 1)`` to float32 rounding of the products' terms."""
    rng = np.random.default_rng(11)
    for d in (2, 4, 7, 8, 20):
        for b in (5, 64, 128):
            x = (rng.normal(size=(3, b, d)) * 10.0 ** rng.uniform(-4, 4, size=(3, b, d))).astype(np.float32)
            x -= x.mean(axis=2, keepdims=True)
            got, want = gram(x), x @ x.transpose(0, 2, 1)
            assert got.dtype == np.float32 and got.shape == (3, b, b)
            scale = np.abs(x).astype(np.float64) @ np.abs(x).transpose(0, 2, 1).astype(np.float64)  # Σ |x_i x_j|
            assert (np.abs(got.astype(np.float64) - want) <= 4 * d * np.finfo(np.float32).eps * scale).all()
