"""A run directory is claimed atomically (issue 45): two ``per train --name same`` started together, or a resume
of a run in progress, leave one run training and the other refused in one line, exit 2, having written nothing."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
import yaml

from per_cli.errors import ConfigError
from per_cli.rundir.claim import LOCK_FILE, claim_existing, claim_free_name, claim_new

from ..conftest import CONFIGS, TINY_CARTPOLE


def _train(runs_dir, *args: str) -> subprocess.Popen:
    sets = [arg for item in TINY_CARTPOLE for arg in ("--set", item)]
    command = [sys.executable, "-m", "per_cli", "train", "--config", str(CONFIGS / "cartpole_uniform.yaml"),
               "--runs-dir", str(runs_dir), "--quiet", "--device", "cpu", *sets, *args]  # fmt: skip
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_runs_started_together_with_one_name_train_one_and_refuse_the_other(tmp_path):
    uniform = _train(tmp_path, "--name", "same", "--set", "train.total_steps=1500")
    prioritized = _train(tmp_path, "--name", "same", "--set", "replay.kind=prioritized", "--set",
                         "train.total_steps=2500")  # fmt: skip
    outcomes = {name: (proc.wait(timeout=300), proc.stderr.read()) for name, proc in
                (("uniform", uniform), ("prioritized", prioritized))}  # fmt: skip
    assert sorted(code for code, _ in outcomes.values()) == [0, 2], outcomes
    (winner,) = [name for name, (code, _) in outcomes.items() if code == 0]
    (loser_err,) = [err for code, err in outcomes.values() if code == 2]
    assert len(loser_err.strip().splitlines()) == 1 and "already exists; choose another --name" in loser_err
    run_dir = tmp_path / "same"
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    summary = json.loads((run_dir / "summary.json").read_text())
    steps = {"uniform": 1500, "prioritized": 2500}[winner]
    assert config["replay"]["kind"] == winner and config["train"]["total_steps"] == steps
    assert summary["status"] == "completed" and summary["total_steps"] == steps
    assert summary["replay"].startswith(winner)
    assert len(list(run_dir.glob("events.out.tfevents.*"))) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["same"]  # the refused one wrote nothing beside it either


def test_a_resume_of_a_run_in_progress_is_refused(tmp_path):
    run = _train(tmp_path, "--name", "r", "--set", "train.total_steps=200000", "--set", "train.checkpoint_every=100")
    run_dir = tmp_path / "r"
    try:
        deadline = time.monotonic() + 120
        while not (run_dir / "checkpoints" / "latest").exists():  # it trains, and has a checkpoint to resume
            assert run.poll() is None and time.monotonic() < deadline, run.stderr.read() if run.poll() else "timeout"
            time.sleep(0.1)
        before = sorted(p.name for p in run_dir.iterdir())
        resume = subprocess.run([sys.executable, "-m", "per_cli", "train", "--resume", str(run_dir), "--quiet"],
                                capture_output=True, text=True, timeout=120)  # fmt: skip
        assert resume.returncode == 2, resume.stderr
        assert len(resume.stderr.strip().splitlines()) == 1
        assert f"is being trained by another process (pid {run.pid})" in resume.stderr
        assert sorted(p.name for p in run_dir.iterdir()) == before
    finally:
        run.terminate()
        run.wait(timeout=60)


def test_a_default_name_taken_in_the_same_second_gets_the_next_free_one(tmp_path):
    first = claim_free_name(tmp_path, "cartpole__uniform__s1__20260101-000000")
    second = claim_free_name(tmp_path, "cartpole__uniform__s1__20260101-000000")
    assert first.path.name == "cartpole__uniform__s1__20260101-000000"
    assert second.path.name == "cartpole__uniform__s1__20260101-000000-2"
    with pytest.raises(ConfigError, match="already exists"):
        claim_new(first.path)
    with pytest.raises(ConfigError, match="being trained by another process"):
        claim_existing(first.path)
    first.release()
    again = claim_existing(first.path)  # released: free to resume
    again.release()
    second.abandon()  # a run that failed before writing anything: its claim leaves no directory behind
    assert not second.path.exists() and (first.path / LOCK_FILE).exists()


def test_a_resume_of_a_grid_run_in_progress_is_refused(tmp_path):
    """A grid trains its runs under its own lock for each (<grid>/.locks/<run>.lock): --resume takes it too."""
    from typer.testing import CliRunner

    from per_cli.cli import app
    from per_cli.rundir.locks import hold_lock

    grid_dir = tmp_path / "g"
    run = CliRunner().invoke(app, ["train", "--config", str(CONFIGS / "cartpole_uniform.yaml"), "--runs-dir",
                                   str(grid_dir), "--name", "run", "--quiet", "--device", "cpu",
                                   *[a for s in [*TINY_CARTPOLE, "train.total_steps=200", "train.checkpoint_every=100"]
                                     for a in ("--set", s)]])  # fmt: skip
    assert run.exit_code == 0, run.output
    (grid_dir / ".locks").mkdir()
    lock = hold_lock(grid_dir / ".locks" / "run.lock", wait_s=0)  # (the grid's worker, training the run)
    args = ["train", "--resume", str(grid_dir / "run"), "--set", "train.total_steps=400", "--quiet"]
    try:
        refused = CliRunner().invoke(app, args)
        assert refused.exit_code == 2 and "is being trained by per grid" in refused.output, refused.output
    finally:
        lock.release()
    assert CliRunner().invoke(app, args).exit_code == 0  # released: it resumes
