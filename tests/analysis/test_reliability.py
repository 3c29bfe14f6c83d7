"""Intervals from fewer than 5 seeds per group are marked unreliable in the tables themselves (issue 35)."""

from __future__ import annotations

from per_cli.analysis.plot import make_plots
from per_cli.analysis.tables import UNRELIABLE, with_ci
from tests.runfactory import linear_returns, write_run


def test_with_ci_marks_intervals_from_few_seeds():
    assert with_ci(1.0, 0.5, 1.5, seeds=2).endswith(UNRELIABLE)
    assert UNRELIABLE not in with_ci(1.0, 0.5, 1.5, seeds=5)
    assert with_ci(1.0, float("nan"), float("nan"), seeds=1) == "1.0"  # no interval, nothing to mark


def test_tables_of_two_seeds_say_unreliable(tmp_path):
    for kind, level in (("uniform", 100.0), ("prioritized", 150.0)):
        for seed in (1, 2):
            returns = linear_returns(10, 1000, lambda s, lv=level, sd=seed: lv + sd + 0 * s)
            write_run(tmp_path / f"{kind}_s{seed}", replay=kind, seed=seed, returns=returns, tensorboard=False,
                      total_steps=1000)  # fmt: skip
    report = make_plots(tmp_path, workers=1)
    results = (report.out / "summary.md").read_text()
    assert UNRELIABLE in results
    comparisons = [p for p in report.files if p.name.startswith("comparisons") and p.suffix == ".md"]
    assert comparisons and all(UNRELIABLE in p.read_text() for p in comparisons)
    factors = report.out / "factors.md"
    assert not factors.exists() or UNRELIABLE in factors.read_text()
