"""Runs whose files are damaged (issue 35): reported by per plot, their cut rows never used, their curves
never held past their last logged step."""

from __future__ import annotations

import numpy as np

from per_cli.analysis.plot import make_plots
from per_cli.analysis.readers import read_metrics_csv
from per_cli.analysis.runs import find_run_dirs, load_run
from tests.runfactory import linear_returns, write_run

RETURNS = linear_returns(20, 2000, lambda s: 130.0 + 0 * s)


def _cut_mid_line(path):
    text = path.read_text()
    last = text.rstrip("\r\n").rsplit("\n", 1)[1]
    cut = text.rstrip("\r\n")[: -len(last) + last.index(",", last.index(",") + 1) + 2]  # inside the return cell
    path.write_text(cut)


def test_a_metrics_csv_cut_mid_line_loses_its_partial_row_and_is_reported(tmp_path):
    run_dir = write_run(tmp_path / "cut", returns=RETURNS, tensorboard=False, total_steps=4000)
    _cut_mid_line(run_dir / "metrics.csv")
    (run_dir / "events.out.tfevents.1.host.1.0").write_bytes(b"")
    steps, values = read_metrics_csv(run_dir / "metrics.csv")["charts/episodic_return"]
    assert len(steps) == 19 and np.all(values == 130.0)  # the cut row (return "1") is not taken for a value

    run = load_run(run_dir, tmp_path, tags={"charts/episodic_return"})
    assert "metrics.csv ends in the middle of a line" in run.read_error
    assert "is empty (0 bytes)" in run.read_error
    assert run.end_step is None  # its curve stops at its last whole row, not at total_steps

    report = make_plots(tmp_path, workers=1)
    assert any(note.startswith("cut: metrics.csv ends in the middle") for note in report.notes)


def test_a_healthy_completed_run_holds_its_last_value_to_its_end(tmp_path):
    run_dir = write_run(tmp_path / "ok", returns=RETURNS, tensorboard=False, total_steps=4000)
    run = load_run(run_dir, tmp_path, tags={"charts/episodic_return"})
    assert run.read_error is None and run.end_step == 4000.0


def test_a_completed_run_without_config_yaml_is_reported(tmp_path):
    run_dir = write_run(tmp_path / "bare", returns=RETURNS, tensorboard=False, total_steps=2000)
    (run_dir / "config.yaml").unlink()
    report = make_plots(tmp_path, workers=1)
    assert any(note.startswith("bare: config.yaml is missing") for note in report.notes)


def test_runs_set_aside_are_never_found(tmp_path):
    write_run(tmp_path / "grid" / "run", returns=RETURNS, tensorboard=False)
    write_run(tmp_path / "grid" / ".set-aside" / "run-1", returns=RETURNS, tensorboard=False)
    assert find_run_dirs(tmp_path) == [tmp_path / "grid" / "run"]
