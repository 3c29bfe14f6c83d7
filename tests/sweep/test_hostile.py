"""Hostile and broken input to ``per grid`` (issue 45): a full disk, on a real, small tmpfs (a run's lock holds
without its pid line; a run whose worker failed it but whose summary.json could not say so is ``failed`` in the
table), summary values of the wrong type, and a grid.yaml whose aliases expand past its size."""

from __future__ import annotations

import contextlib
import io
import json

from per_cli.rundir.locks import hold_lock
from per_cli.sweep.grid import build_request, plan_grid
from per_cli.sweep.report import report
from per_cli.sweep.status import write_manifest

from ..conftest import CONFIGS


def _fill(disk):
    with contextlib.suppress(OSError):  # (ENOSPC: the disk is full, as wanted)
        (disk / "fill").write_bytes(b"x" * 1_000_000)


def test_a_run_lock_is_held_on_a_full_disk(tiny_disk):
    _fill(tiny_disk)
    lock = hold_lock(tiny_disk / "run.lock")  # was: OSError 28 from writing the pid, a traceback in the worker
    lock.release()


def test_a_run_the_worker_failed_is_failed_in_the_table_when_its_summary_could_not_say_so(tmp_path):
    plan = plan_grid(build_request("cartpole", "uniform", "1,2", None, ["train.total_steps=2000"], None, CONFIGS))
    first, second = (spec.name for spec in plan.runs)
    for name in (first, second):  # what a worker leaves when the disk fills before its last summary.json
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text(json.dumps({"status": "running"}))
    error = "the disk is full: no space left on the file system at /runs while writing /runs/x; free space there"
    ran = {first: {"status": "failed", "error": error}}
    out = io.StringIO()
    code = report(plan, tmp_path, ran, {first, second}, False, False, out)
    rows = {line.split()[0]: line for line in out.getvalue().splitlines() if line.startswith("cartpole")}
    assert rows[first].split()[1] == "failed" and "the disk is full" in rows[first]
    assert "its summary.json could not record it" in rows[first]
    assert rows[second].split()[1] == "unfinished"  # no result from its worker: the disk's word stands
    assert code == 1 and "1 failed, 1 unfinished" in out.getvalue()


def test_a_summary_value_that_is_no_number_is_a_blank_cell_not_a_traceback(tmp_path):
    # issue 45: final_return_mean "abc" in a run's summary.json
    plan = plan_grid(build_request("cartpole", "uniform", "1", None, ["train.total_steps=2000"], None, CONFIGS))
    (spec,) = plan.runs
    (tmp_path / spec.name).mkdir()
    summary = {"status": "completed", "total_steps": 2000, "final_return_mean": "abc", "wall_time_s": [1]}
    (tmp_path / spec.name / "summary.json").write_text(json.dumps(summary))
    out = io.StringIO()
    assert report(plan, tmp_path, {}, set(), False, False, out) == 0
    (row,) = [line.split() for line in out.getvalue().splitlines() if line.startswith("cartpole")]
    assert row[:5] == [spec.name, "skipped", "2000", "-", "-"], row  # (steps, wall_s, return)


def test_a_run_whose_lock_cannot_be_opened_fails_in_one_line_not_a_worker_traceback(tmp_path):
    # an OSError outside the run's own handling (its lock; on a full disk, the lock file's creation) killed the
    # worker with a traceback, and the table said only "worker process died"
    import subprocess
    import sys

    sets = ["train.total_steps=300", "train.learning_starts=100", "replay.capacity=1000", "replay.batch_size=32"]
    args = ["grid", "--envs", "cartpole", "--replays", "uniform", "--seeds", "1", "--workers", "1", "--runs-dir",
            str(tmp_path), "--name", "g"]  # fmt: skip
    for item in sets:
        args += ["--set", item]
    plan = plan_grid(build_request("cartpole", "uniform", "1", None, sets, None, CONFIGS))
    (tmp_path / "g" / ".locks" / f"{plan.runs[0].name}.lock").mkdir(parents=True)  # a directory: os.open fails
    write_manifest(tmp_path / "g", "per grid", plan.request.manifest(), [r.manifest() for r in plan.runs])
    done = subprocess.run([sys.executable, "-m", "per_cli", *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "worker process died" not in done.stdout, done.stdout + done.stderr
    (row,) = [line for line in done.stdout.splitlines() if line.startswith("cartpole")]
    assert row.split()[1] == "failed" and "Is a directory" in row


def test_a_grid_yaml_whose_aliases_expand_past_its_size_is_refused_at_once(tmp_path):
    import time

    from per_cli.sweep.status import read_manifest

    plan = plan_grid(build_request("cartpole", "uniform", "1", None, ["train.total_steps=2000"], None, CONFIGS))
    write_manifest(tmp_path, "per grid", plan.request.manifest(), [r.manifest() for r in plan.runs])
    assert read_manifest(tmp_path)["runs"][0]["name"] == plan.runs[0].name  # what per writes reads back
    lines = ["l0: &l0 [lol]"] + [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, 30)]
    (tmp_path / "grid.yaml").write_text("\n".join(lines) + "\n")  # 10^29 values
    started = time.perf_counter()
    assert read_manifest(tmp_path) is None  # unreadable, as a malformed one is: never expanded
    assert time.perf_counter() - started < 1
