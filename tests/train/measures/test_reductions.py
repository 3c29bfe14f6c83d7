"""The compiled row reductions (per_cli.train.measures.reductions) give numpy's own reductions of each row, bit for
bit: for short rows (one after another), pairwise rows (8 to 128) and longer ones (split in halves), with NaN, ±0,
ties, infinities and values over 8 orders of magnitude."""

from __future__ import annotations

import numpy as np
import pytest

from per_cli.train.measures.reductions import pairwise_sum, row_means, row_means64, row_stds, sorted_medians

pytestmark = pytest.mark.filterwarnings("error")

WIDTHS = [*range(1, 20), 31, 63, 64, 65, 100, 127, 128, 129, 130, 136, 255, 256, 257, 300, 1000, 1031]


def _rows(rng: np.random.Generator, b: int) -> np.ndarray:
    """(6, b) float32 rows: wide magnitudes, one with -0.0 and ties, one with NaN, one with inf, one of zeros."""
    x = (rng.normal(size=(6, b)) * 10.0 ** rng.uniform(-4, 4, size=(6, b))).astype(np.float32)
    x[1] = np.round(x[1])
    x[1, 0] = -0.0
    x[2, b // 2] = np.nan
    x[3, b - 1] = np.inf
    x[4] = 0.0
    return x


def _same(got: np.ndarray, want: np.ndarray) -> bool:
    return got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()


@pytest.mark.parametrize("b", WIDTHS)
def test_each_row_reduction_is_numpys_own(b):
    rng = np.random.default_rng(b)
    x = _rows(rng, b)
    d = np.abs(x)
    with np.errstate(invalid="ignore"):  # (inf - inf in the row with inf: numpy's NaN, and its warning)
        pairs = [
            (row_means(d), d.mean(axis=1)),
            (row_means(x), x.mean(axis=1)),
            (row_means64(x), x.astype(np.float64).mean(axis=1)),
            (row_stds(d), d.std(axis=1)),
            (row_stds(x.astype(np.float64)), x.astype(np.float64).std(axis=1)),
            (sorted_medians(np.sort(d, axis=1)), np.median(d, axis=1)),
        ]
    for j, (got, want) in enumerate(pairs):
        assert _same(got, want), (j, got, want)
    ages = rng.integers(0, 10**9, size=(3, b))  # (integer sums below 2⁵³: exact in any order)
    assert _same(row_means64(ages), np.add.reduce(ages, axis=1, dtype=np.float64) / b)


def test_pairwise_sum_is_numpys_sum_for_every_length():
    rng = np.random.default_rng(0)
    for n in range(0, 1100, 7):
        a32 = (rng.normal(size=n) * 10.0 ** rng.uniform(-6, 6, size=n)).astype(np.float32)
        a64 = a32.astype(np.float64) * np.pi
        assert pairwise_sum(a32, n, np.float32(0.0)) == np.add.reduce(a32), n
        assert pairwise_sum(a64, n, 0.0) == np.add.reduce(a64), n
