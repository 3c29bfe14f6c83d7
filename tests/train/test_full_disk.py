"""A full disk during ``per train`` (issue 35): on a real, small tmpfs, the run ends ``failed`` with a line
naming the disk, and no half-written checkpoint stays; leftovers of a killed run are removed when it resumes."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from per_cli.cli import app
from per_cli.train.checkpoints.checkpoint import latest_checkpoint, remove_leftovers

from ..conftest import CONFIGS, TINY_CARTPOLE

runner = CliRunner()
CHECKPOINTED = [*TINY_CARTPOLE, "train.total_steps=600", "train.checkpoint_every=150", "train.save_replay=true"]


def _train(runs_dir, *sets):
    args = ["train", "--config", str(CONFIGS / "cartpole_uniform.yaml"), "--runs-dir", str(runs_dir), "--name", "r",
            "--quiet", "--device", "cpu"]  # fmt: skip
    for item in sets:
        args += ["--set", item]
    return runner.invoke(app, args)


def test_a_full_disk_fails_the_run_naming_the_disk_and_leaves_no_temporaries(small_disk):
    # a replay memory of 20,000 transitions saved with each checkpoint: about 800 KB, more than the disk has
    result = _train(small_disk, *CHECKPOINTED, "replay.capacity=20000")
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "the disk is full" in lines[0] and str(small_disk) in lines[0], result.output
    summary = json.loads((small_disk / "r" / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["error"].startswith("the disk is full")
    leftovers = [p.name for p in small_disk.rglob("*") if p.name.startswith(".") and p.name != ".lock"]
    assert leftovers == []  # (.lock: the run directory's claim, rundir/claim.py)
    assert (small_disk / "r" / "metrics.csv").stat().st_size > 0  # what was logged is kept


def test_leftovers_of_a_killed_run_are_removed_on_resume(tmp_path):
    assert _train(tmp_path, *CHECKPOINTED).exit_code == 0
    run_dir = tmp_path / "r"
    half = run_dir / "checkpoints" / ".tmp-step_000000000750"
    half.mkdir()
    (half / "trainer.pt").write_bytes(b"half")
    for name in ("checkpoints/.latest.x1y2.tmp", ".summary.json.a1b2.tmp", ".metrics.csv.c3d4.tmp"):
        (run_dir / name).write_text("half")
    assert len(remove_leftovers(tmp_path / "nothing-here")) == 0

    more = runner.invoke(app, ["train", "--resume", str(run_dir), "--set", "train.total_steps=750", "--quiet"])
    assert more.exit_code == 0, more.output
    assert [p for p in run_dir.rglob("*") if p.name.startswith(".") and p.name != ".lock"] == []
    assert latest_checkpoint(run_dir).name == "step_000000000750"


def test_a_cohort_on_a_full_disk_fails_every_member_naming_the_disk(small_disk):
    # issue 45: the members failed in one gradient step, the next sampled from none (an IndexError), and a
    # failed member's files, closed on the full disk, raised again over its recorded failure
    (small_disk / "fill").write_bytes(b"x" * 800_000)
    args = ["train", "--seeds", "1-2", "--runs-dir", str(small_disk), "--quiet", "--device", "cpu"]
    for item in [*TINY_CARTPOLE, "train.gradient_steps=4", "log.every=1"]:
        args += ["--set", item]
    result = runner.invoke(app, args)
    assert result.exit_code == 1, result.output
    summaries = [json.loads(p.read_text()) for p in sorted(small_disk.glob("*/summary.json"))]
    assert [s["status"] for s in summaries] == ["failed", "failed"], result.output
    assert all(s["error"].startswith("the disk is full") for s in summaries)
    lines = result.output.strip().splitlines()  # one line per run, naming it (was one line for the command)
    assert len(lines) == 2 and all(line.startswith("error: run failed: the disk is full") for line in lines)
