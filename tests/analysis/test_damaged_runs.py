"""Runs whose files are damaged (issue 35): reported by per plot, their cut rows never used, their curves
never held past their last logged step."""

from __future__ import annotations

import numpy as np

from per_cli.analysis.plot import make_plots
from per_cli.analysis.runs import find_run_dirs, load_run
from per_cli.rundir.readers import read_metrics_csv
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


def _plot_notes(tmp_path):
    report = make_plots(tmp_path, workers=1)
    return report, "\n".join(report.notes)


def test_a_config_yaml_without_settings_is_named_in_a_note(tmp_path):
    # issue 45: a run whose config.yaml is [] was merged into the train_freq 4 group with no note
    for seed in (1, 2):
        write_run(tmp_path / f"four{seed}", seed=seed, returns=RETURNS, overrides={"train.train_freq": 4},
                  tensorboard=False)
    for name, text in (("listed", "[]\n"), ("empty", ""), ("scalar", "abc\n")):
        (write_run(tmp_path / name, returns=RETURNS, tensorboard=False) / "config.yaml").write_text(text)
    report, notes = _plot_notes(tmp_path)
    assert "listed: config.yaml holds a list ([]), not a mapping of settings" in notes
    assert "empty: config.yaml holds nothing, not a mapping" in notes
    assert "scalar: config.yaml holds a str ('abc'), not a mapping" in notes


def test_an_alias_bomb_in_a_runs_config_yaml_costs_that_run_its_settings_only(tmp_path):
    import time

    big = "x" * 500_000
    bomb = f"env:\n  kwargs:\n    a: &s {big}\n    b: [" + ", ".join(["*s"] * 99_000) + "]\n"  # 50 GB expanded
    (write_run(tmp_path / "bomb", returns=RETURNS, tensorboard=False) / "config.yaml").write_text(bomb)
    started = time.perf_counter()
    run = load_run(tmp_path / "bomb", tmp_path)
    assert time.perf_counter() - started < 5
    assert run.config == {}
    assert "config.yaml cannot be read (its YAML aliases expand to more than 1 MB" in run.read_error


def test_summary_values_of_the_wrong_type_are_left_out_and_said(tmp_path):
    import json

    run_dir = write_run(tmp_path / "abc", returns=RETURNS, tensorboard=False, total_steps=4000)
    summary = json.loads((run_dir / "summary.json").read_text())
    summary.update(final_return_mean="abc", seed=True, total_steps=float("inf"), env=["x"])
    (run_dir / "summary.json").write_text(json.dumps(summary))
    run = load_run(run_dir, tmp_path)
    assert run.final_return is None and run.end_step is None and run.env == "CartPole-v1"
    for key in ("final_return_mean is 'abc', not a number", "seed is True, not a whole number",
                "total_steps is inf, not a number", "env is ['x'], not a string"):
        assert f"summary.json: {key}; left out" in run.read_error
    report, notes = _plot_notes(tmp_path)
    assert notes.startswith("abc: summary.json: ") and "final_return_mean is 'abc'" in notes


def test_a_summary_nested_too_deep_is_unreadable_not_a_traceback(tmp_path):
    run_dir = write_run(tmp_path / "deep", returns=RETURNS, tensorboard=False)
    (run_dir / "summary.json").write_text('{"status": "completed", "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    run = load_run(run_dir, tmp_path)
    assert run.status == "unreadable" and "RecursionError" in run.read_error
