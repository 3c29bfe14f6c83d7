"""measures.md / measures.csv: per group, the mean over runs of each run's mean batch measure."""

from __future__ import annotations

import csv
import io

import pytest

from per_cli.analysis.plot import make_plots

from ..runfactory import write_run


def test_measures_table_averages_each_runs_mean_per_group(tmp_path):
    # uniform: seed s logs state diversity s/10 and 3s/10 (run mean 2s/10); none logs 0.1 and no count
    for seed in (1, 2, 3):
        updates = {"iid/state_diversity": [(100, seed / 10), (200, 3 * seed / 10)],
                   "replay/correlation_count": [(100, 50.0), (200, 70.0)]}  # fmt: skip
        write_run(tmp_path / f"u{seed}", replay="uniform", seed=seed, returns=[(100, 10.0), (200, 20.0 + seed)],
                  updates=updates)  # fmt: skip
        write_run(tmp_path / f"n{seed}", replay="none", seed=seed, returns=[(100, 10.0), (200, 20.0 + seed)],
                  updates={"iid/state_diversity": [(100, 0.1), (200, 0.1)]})  # fmt: skip
    write_run(tmp_path / "failed", replay="uniform", seed=4, status="failed",
              updates={"iid/state_diversity": [(100, 99.0)]})  # fmt: skip (not completed: left out)
    report = make_plots(tmp_path, workers=1)
    rows = list(csv.DictReader(io.StringIO((report.out / "measures.csv").read_text())))
    got = {(r["replay"], r["tag"]): r for r in rows}
    uniform = got[("uniform", "iid/state_diversity")]
    assert int(uniform["runs"]) == 3 and float(uniform["mean"]) == pytest.approx(0.4)  # mean of 0.2, 0.4, 0.6
    assert uniform["ci_low"] == uniform["ci_high"] == ""  # 3 runs: no bootstrap interval
    assert float(got[("uniform", "replay/correlation_count")]["mean"]) == pytest.approx(60.0)
    assert float(got[("none", "iid/state_diversity")]["mean"]) == pytest.approx(0.1)
    assert ("none", "replay/correlation_count") not in got  # never logged: no row, a dash in the table
    text = (report.out / "measures.md").read_text()
    assert "| none | – | 0.100, no interval (n = 3) | – |" in text  # 3 runs: no bootstrap interval


def test_a_runs_mean_weights_each_episode_by_its_steps(tmp_path):
    """metrics.csv holds each episode's mean |δ| over its updates: two short early episodes (10 steps) at 1.0 and
    a long late one (100 steps) at 0.1 are a run mean of (10 + 10 + 10) / 120 = 0.25 over its updates, not the
    0.7 of the three episodes' values."""
    for seed in range(1, 6):
        write_run(tmp_path / f"u{seed}", seed=seed, returns=[(10, 1.0), (20, 1.0), (120, 1.0)], lengths=[10, 10, 100],
                  updates={"td_error/mean": [(10, 1.0), (20, 1.0), (120, 0.1)]}, tensorboard=False)  # fmt: skip
    report = make_plots(tmp_path, workers=1)
    rows = {r["tag"]: r for r in csv.DictReader(io.StringIO((report.out / "measures.csv").read_text()))}
    assert float(rows["td_error/mean"]["mean"]) == pytest.approx(0.25)
    assert "weighted by the episode's env steps" in (report.out / "measures.md").read_text()
