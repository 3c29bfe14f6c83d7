"""IQM, stratified bootstrap CIs, the per-step mean band and Spearman's ρ, against hand values and SciPy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats as sps

from per_cli.analysis.stats import holm, iqm, mean_band, smallest_p, spearman, stratified_bootstrap_ci


def test_iqm_by_hand():
    assert iqm(np.array([1.0, 2.0, 3.0, 4.0])) == 2.5  # the middle two
    assert iqm(np.array([100.0, 1.0, 3.0, 2.0, 4.0])) == 3.0  # one cut from each end of 5
    assert iqm(np.array([7.0])) == 7.0
    assert iqm(np.array([1.0, 2.0, 9.0])) == 4.0  # n < 4: nothing cut, the mean
    assert np.isnan(iqm(np.array([])))
    np.testing.assert_allclose(iqm(np.array([[1.0, 2.0, 3.0, 4.0], [0.0, 0.0, 8.0, 8.0]]), axis=-1), [2.5, 4.0])


@pytest.mark.parametrize("n", range(1, 14))
def test_iqm_is_scipy_trim_mean(n):
    x = np.random.default_rng(n).standard_normal(n) * 10
    assert iqm(x) == pytest.approx(sps.trim_mean(x, 0.25))


def test_bootstrap_of_identical_scores_is_a_point():
    assert stratified_bootstrap_ci([np.full(5, 3.0)]) == (3.0, 3.0, 3.0)


def test_bootstrap_is_stratified():
    # resampling within each stratum keeps three 0s and three 10s in every sample: the mean never moves;
    # pooled resampling of the same six scores would spread it over [0, 10]
    point, lo, hi = stratified_bootstrap_ci([np.zeros(3), np.full(3, 10.0)], lambda x, axis: x.mean(axis=axis))
    assert (point, lo, hi) == (5.0, 5.0, 5.0)
    pooled = stratified_bootstrap_ci([np.array([0.0, 0, 0, 10, 10, 10])], lambda x, axis: x.mean(axis=axis))
    assert pooled[1] < 3 and pooled[2] > 7


def test_bootstrap_percentile_ci_matches_scipy():
    x = np.random.default_rng(0).normal(100, 20, size=12)
    point, lo, hi = stratified_bootstrap_ci([x], lambda a, axis: a.mean(axis=axis), reps=40_000)
    ref = sps.bootstrap((x,), np.mean, method="percentile", n_resamples=40_000, random_state=1).confidence_interval
    assert point == pytest.approx(x.mean())
    assert lo == pytest.approx(ref.low, abs=0.6) and hi == pytest.approx(ref.high, abs=0.6)  # ~5% of the width
    # and the width is the normal theory's 2 × 1.96 σ/√n (σ with ddof 0, the bootstrap's)
    assert hi - lo == pytest.approx(2 * 1.96 * x.std() / np.sqrt(len(x)), rel=0.05)


def test_bootstrap_iqm_ci_brackets_the_point_and_is_reproducible():
    scores = np.array([10.0, 200.0, 210.0, 220.0, 230.0, 500.0])
    point, lo, hi = stratified_bootstrap_ci([scores], iqm)
    assert point == pytest.approx(215.0)  # cut one from each end
    assert 10.0 <= lo <= point <= hi <= 500.0
    assert stratified_bootstrap_ci([scores], iqm) == (point, lo, hi)


def test_bootstrap_of_nothing_is_nan():
    assert all(np.isnan(v) for v in stratified_bootstrap_ci([np.array([])]))


def test_mean_band_with_seeds_that_stop_early():
    curves = np.array(
        [
            [1.0, 2.0, 3.0, 4.0],
            [3.0, 4.0, 5.0, np.nan],  # in progress: stopped before the last point
            [2.0, 3.0, np.nan, np.nan],
        ]
    )
    mean, lo, hi = mean_band(curves)
    np.testing.assert_allclose(mean, [2.0, 3.0, 4.0, 4.0])
    assert np.isnan(lo[3]) and np.isnan(hi[3])  # one seed: no band
    for k, present in enumerate([[1, 3, 2], [2, 4, 3], [3, 5]]):
        assert min(present) <= lo[k] <= mean[k] <= hi[k] <= max(present)
    # two seeds at point 2: bootstrap means are 3, 4 or 5 -> the percentile band is [3, 5]
    assert (lo[2], hi[2]) == (3.0, 5.0)


def test_mean_band_of_one_seed_or_identical_seeds():
    one = mean_band(np.array([[1.0, 2.0]]))
    np.testing.assert_allclose(one[0], [1.0, 2.0])
    assert np.isnan(one[1]).all() and np.isnan(one[2]).all()
    same = mean_band(np.array([[1.0, 2.0], [1.0, 2.0]]))
    np.testing.assert_allclose(same[1], [1.0, 2.0])
    np.testing.assert_allclose(same[2], [1.0, 2.0])


def test_spearman_matches_scipy_with_ties():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 5, 30).astype(float)
    y = x * 2 + rng.integers(0, 4, 30)
    assert spearman(x, y) == pytest.approx(sps.spearmanr(x, y).statistic)
    assert spearman(np.arange(5.0), -np.arange(5.0)) == pytest.approx(-1.0)
    assert np.isnan(spearman(np.ones(4), np.arange(4.0)))
    assert np.isnan(spearman(np.arange(2.0), np.arange(2.0)))


def test_holm_by_hand_from_its_definition():
    # sorted: 0.005, 0.01, 0.03, 0.04 -> 4·0.005 = 0.02, 3·0.01 = 0.03, 2·0.03 = 0.06, max(1·0.04, 0.06) = 0.06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    adjusted = holm([np.nan, 0.02, 0.5])  # a test not run is not in the family: m = 2
    assert np.isnan(adjusted[0]) and adjusted[1:] == pytest.approx([0.04, 0.5])
    assert holm([0.6, 0.7]) == pytest.approx([1.0, 1.0])  # capped at 1


@given(st.lists(st.floats(0, 1), min_size=1, max_size=30))
def test_holm_is_monotone_and_never_below_the_raw_p(p):
    adjusted = holm(p)
    assert np.all(adjusted >= np.array(p) - 1e-15) and np.all(adjusted <= 1.0)
    order = np.argsort(p, kind="stable")
    assert np.all(np.diff(adjusted[order]) >= 0)  # a smaller raw p never gets a larger adjusted p


def test_smallest_reachable_mann_whitney_p():
    assert smallest_p(3, 3) == pytest.approx(0.1) and smallest_p(5, 5) == pytest.approx(2 / 252)
    assert smallest_p(1, 1) == 1.0
