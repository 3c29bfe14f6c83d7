"""Kinds against `uniform`: the probability of improvement is its definition, its CI and the Mann-Whitney p
separate a real shift from seed noise, and `per plot` writes the table for a kinds grid but not for a sweep."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats as sps

from per_cli.analysis.comparisons import compare_pair, probability_of_improvement
from per_cli.analysis.plot import make_plots

from ..runfactory import write_run

scores = st.lists(st.integers(-5, 5).map(float), min_size=1, max_size=12)  # small integers: many ties


@given(x=scores, y=scores)
def test_probability_of_improvement_is_its_definition(x, y):
    """P(X > Y) + P(X = Y) / 2 counted over every pair, ties included."""
    pairs = [(a > b) + 0.5 * (a == b) for a in x for b in y]
    assert probability_of_improvement(np.array(x), np.array(y)) == pytest.approx(np.mean(pairs))


def test_batched_probabilities_equal_one_at_a_time():
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 4, (50, 7)).astype(float), rng.integers(0, 4, (50, 5)).astype(float)
    batched = probability_of_improvement(x, y)
    assert batched == pytest.approx([probability_of_improvement(a, b) for a, b in zip(x, y, strict=True)])


def test_a_shift_is_found_and_seed_noise_is_not():
    rng = np.random.default_rng(3)
    base = rng.normal(100, 10, 40)
    better = compare_pair(rng.normal(115, 10, 40), base, reps=2000)
    assert better["p_improvement"] > 0.8 and better["p_improvement_ci_low"] > 0.5
    assert better["iqm_difference_ci_low"] > 0 and better["mann_whitney_p"] < 0.001
    same = compare_pair(rng.normal(100, 10, 40), base, reps=2000)
    assert same["p_improvement_ci_low"] < 0.5 < same["p_improvement_ci_high"]
    assert same["iqm_difference_ci_low"] < 0 < same["iqm_difference_ci_high"] and same["mann_whitney_p"] > 0.05


def test_p_is_scipys_two_sided_mann_whitney():
    rng = np.random.default_rng(5)
    x, y = rng.normal(1, 1, 12), rng.normal(0, 1, 9)
    expected = sps.mannwhitneyu(x, y, alternative="two-sided").pvalue
    assert compare_pair(x, y, reps=200)["mann_whitney_p"] == pytest.approx(expected)


def test_one_seed_gives_points_without_intervals():
    out = compare_pair(np.array([3.0]), np.array([1.0, 2.0]), reps=100)
    assert out["p_improvement"] == 1.0 and np.isnan(out["p_improvement_ci_low"]) and np.isnan(out["mann_whitney_p"])


def test_per_plot_compares_each_kind_with_uniform(tmp_path):
    """Real run directories (TensorBoard files and metrics.csv): `none` ends below every `uniform` run,
    `combined` level with it."""
    finals = {"uniform": [100, 110, 120, 130], "none": [10, 20, 30, 40], "combined": [105, 115, 125, 128]}
    for kind, values in finals.items():
        for seed, final in enumerate(values, start=1):
            returns = [(s, final * s / 1000) for s in range(100, 1001, 100)]
            write_run(tmp_path / f"cartpole__{kind}__s{seed}", replay=kind, seed=seed, returns=returns,
                      final_return=float(final))  # fmt: skip
    make_plots(tmp_path, workers=1)
    rows = {r["replay"]: r for r in csv.DictReader(io.StringIO((tmp_path / "plots" / "comparisons.csv").read_text()))}
    assert set(rows) == {"none", "combined"}
    assert float(rows["none"]["p_improvement"]) == 0.0 and float(rows["none"]["mann_whitney_p"]) < 0.05
    assert float(rows["combined"]["p_improvement"]) == pytest.approx(9 / 16)  # 9 of the 16 pairs won, no ties
    assert float(rows["none"]["iqm_difference"]) == pytest.approx(25.0 - 115.0)
    text = (tmp_path / "plots" / "comparisons.md").read_text()
    assert "P(kind > uniform)" in text and "| CartPole-v1 | none |" in text


def test_a_sweep_within_one_kind_has_no_baseline(tmp_path):
    for alpha in (0.0, 1.0):
        for seed in (1, 2):
            write_run(tmp_path / f"cartpole__prioritized__s{seed}__a{alpha}", replay="prioritized", seed=seed,
                      returns=[(100, 1.0)], final_return=1.0, overrides={"replay.alpha": alpha})  # fmt: skip
    report = make_plots(tmp_path, workers=1)
    assert "comparisons.md" not in {p.name for p in report.files}


def test_bold_follows_the_holm_adjusted_p_over_the_tables_family(tmp_path):
    """5 vs 5 seeds: `none` below every `uniform` run (exact p 2/252 = 0.0079), `combined` and `prioritized` above
    in 23 of 25 pairs (p 0.032 each). Raw, all three are below 0.05; Holm over the family of 3 keeps only `none`
    (3 × 0.0079 = 0.024; then 2 × 0.032 = 0.063)."""
    finals = {"uniform": [10, 20, 30, 40, 50], "none": [1, 2, 3, 4, 5], "combined": [35, 55, 65, 75, 85],
              "prioritized": [35, 56, 66, 76, 86]}  # fmt: skip
    for kind, values in finals.items():
        for seed, final in enumerate(values, start=1):
            write_run(tmp_path / f"cartpole__{kind}__s{seed}", replay=kind, seed=seed, tensorboard=False,
                      returns=[(100, float(final))], final_return=float(final))  # fmt: skip
    make_plots(tmp_path, workers=1)
    rows = {r["replay"]: r for r in csv.DictReader(io.StringIO((tmp_path / "plots" / "comparisons.csv").read_text()))}
    raw = {k: float(r["mann_whitney_p"]) for k, r in rows.items()}
    adjusted = {k: float(r["mann_whitney_p_holm"]) for k, r in rows.items()}
    assert raw["none"] == pytest.approx(2 / 252, rel=1e-5) and all(p < 0.05 for p in raw.values())
    assert adjusted["none"] == pytest.approx(3 * 2 / 252, rel=1e-5)
    assert adjusted["combined"] == adjusted["prioritized"] == pytest.approx(2 * raw["combined"], rel=1e-5)
    assert adjusted["combined"] > 0.05
    lines = {line.split(" | ")[1]: line for line in (tmp_path / "plots" / "comparisons.md").read_text().splitlines()
             if line.startswith("| CartPole-v1")}  # fmt: skip
    assert lines["none"].count("**") == 4  # the difference and the adjusted p
    assert "**" not in lines["combined"] and "**" not in lines["prioritized"]
    assert "its 3 tests" in (tmp_path / "plots" / "comparisons.md").read_text()  # the family is named
