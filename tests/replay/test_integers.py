"""``uniform_integer`` draws what numba's ``Generator.integers`` draws, value for value, leaving the generator in
the same state, over every branch (one value, ranges below, at and above 2**32 values)."""

from __future__ import annotations

import numba
import numpy as np
import pytest

from per_cli.replay.integers import uniform_integer


@numba.njit(cache=True)
def _ours(generator, lows, highs, out):
    for i in range(out.shape[0]):
        out[i] = uniform_integer(generator, lows[i], highs[i])


@numba.njit(cache=True)
def _numbas(generator, lows, highs, out):
    for i in range(out.shape[0]):
        out[i] = generator.integers(lows[i], highs[i])


@numba.njit(cache=True)
def _one(generator, low, high):
    return uniform_integer(generator, low, high)


def _spans(rng: np.random.Generator, n: int) -> np.ndarray:
    """Ranges of every branch, shuffled: one value, small, up to 2**31, at 2**32 (the buffered path's edge), and
    wider than 2**32 (``integers`` itself)."""
    parts = [
        np.ones(n, dtype=np.int64),
        rng.integers(2, 20, n),
        rng.integers(20, 2**31, n),
        np.repeat(np.array([2**32 - 1, 2**32, 2**32 + 1]), n // 3 + 1)[:n],
        rng.integers(2**33, 2**40, n),
    ]
    spans = np.concatenate(parts)
    rng.shuffle(spans)
    return spans


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_uniform_integer_draws_what_integers_draws(seed):
    rng = np.random.default_rng(100 + seed)
    spans = _spans(rng, 4_000)
    lows = rng.integers(-(10**6), 10**6, len(spans))
    ours, theirs = np.random.default_rng(seed), np.random.default_rng(seed)
    got, want = np.empty(len(spans), dtype=np.int64), np.empty(len(spans), dtype=np.int64)
    _ours(ours, lows, lows + spans, got)
    _numbas(theirs, lows, lows + spans, want)
    np.testing.assert_array_equal(got, want)
    assert ours.bit_generator.state == theirs.bit_generator.state
    assert ((got >= lows) & (got < lows + spans)).all()


def test_an_empty_range_is_refused_as_integers_refuses_it():
    with pytest.raises(ValueError, match="high <= low"):
        _one(np.random.default_rng(0), 5, 5)
