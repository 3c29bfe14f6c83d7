"""Below 5 seeds per group the tables print no interval, only the point and "no interval (n = 3)", and beside a
Mann–Whitney p the smallest p the test can reach (issues 35 and 47)."""

from __future__ import annotations

import csv
import io

from per_cli.analysis.comparisons import compare_pair
from per_cli.analysis.plot import make_plots
from per_cli.analysis.tables import with_ci
from tests.runfactory import linear_returns, write_run


def test_with_ci_refuses_an_interval_below_five_seeds():
    assert with_ci(1.0, 0.5, 1.5, seeds=3) == "1.0, no interval (n = 3)"
    assert with_ci(1.0, 0.5, 1.5, seeds=5) == "1.0 [0.5, 1.5]"
    assert with_ci(1.0, float("nan"), float("nan")) == "1.0"  # no interval and no count: the point


def test_compare_pair_gives_no_interval_at_three_seeds_and_the_smallest_reachable_p():
    x, y = [10.0, 11.0, 12.0], [1.0, 2.0, 3.0]  # every x above every y: the most extreme 3 vs 3 ranking
    m = compare_pair(x, y, reps=200)
    assert m["p_improvement_ci_low"] != m["p_improvement_ci_low"]  # NaN: no interval
    assert m["mann_whitney_p"] == m["mann_whitney_p_min"] == 0.1  # 2 / C(6, 3): it can never read < 0.05


def _runs(root, seeds):
    for kind, level in (("uniform", 100.0), ("prioritized", 150.0)):
        for seed in seeds:
            returns = linear_returns(10, 1000, lambda s, lv=level, sd=seed: lv + sd + 0 * s)
            write_run(root / f"{kind}_s{seed}", replay=kind, seed=seed, returns=returns, tensorboard=False,
                      total_steps=1000)  # fmt: skip


def test_tables_of_three_seeds_print_no_interval_and_the_smallest_p(tmp_path):
    _runs(tmp_path, (1, 2, 3))
    report = make_plots(tmp_path, workers=1)
    summary = (report.out / "summary.md").read_text()
    rows = [line for line in summary.splitlines() if line.startswith("| CartPole-v1")]
    assert len(rows) == 2 and all("no interval (n = 3)" in r and "[" not in r for r in rows)
    comparisons = (report.out / "comparisons.md").read_text()
    assert "no interval (n = 3)" in comparisons
    assert "smallest reachable p at 3 vs 3: 0.1" in comparisons
    row = next(csv.DictReader(io.StringIO((report.out / "comparisons.csv").read_text())))
    assert row["p_improvement_ci_low"] == "" and float(row["mann_whitney_p_min"]) == 0.1
    shares = list(csv.DictReader(io.StringIO((report.out / "factors.csv").read_text())))
    assert shares and all(s["ci_low"] == "" for s in shares)
    assert "no interval (n = 3)" in (report.out / "factors.md").read_text()


def test_small_groups_with_ties_get_the_exact_p_never_below_the_smallest_reachable():
    """3 vs 3 with a tie: scipy's default (the normal approximation) says 0.076, below the 0.1 that no split of
    six scores can go under; the exact permutation p is 0.1."""
    m = compare_pair([30.0, 31.0, 31.0], [1.0, 2.0, 3.0], reps=100)
    assert m["mann_whitney_p"] >= m["mann_whitney_p_min"] == 0.1
