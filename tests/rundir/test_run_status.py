"""A run's status is always true: interrupted (Ctrl-C, SIGTERM) and resumable, failed on divergence with the
likely cause, and a summary that cannot be parsed is reported as unreadable."""

from __future__ import annotations

import json
import pickle
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from typer.testing import CliRunner

from per_cli.cli import app
from per_cli.config.schema import AgentConfig
from per_cli.rundir.logger import FAILED, INTERRUPTED, UNREADABLE, read_summary, write_summary
from per_cli.rundir.machine import machine
from per_cli.train.checkpoints.checkpoint import latest_checkpoint
from per_cli.train.loop.stopping import RunDiverged, RunInterrupted, check_logged, check_update

from ..conftest import CONFIGS, REPO, TINY_CARTPOLE, ctrl_c_as_in_a_terminal

LONG_RUN = [*TINY_CARTPOLE, "train.total_steps=1000000", "train.checkpoint_every=100", "train.eval_episodes=0"]


def _per_train(runs_dir, name: str) -> subprocess.Popen:
    args = [sys.executable, "-m", "per_cli", "train", "--config", str(CONFIGS / "cartpole_uniform.yaml"),
            "--runs-dir", str(runs_dir), "--name", name, "--device", "cpu"]  # fmt: skip
    for item in LONG_RUN:
        args += ["--set", item]
    return subprocess.Popen(args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=ctrl_c_as_in_a_terminal)  # fmt: skip


def _checkpoint_step(run_dir) -> int:
    latest = latest_checkpoint(run_dir)
    return -1 if latest is None else int(latest.name.split("_")[1])


def test_sigterm_and_ctrl_c_end_a_real_run_as_interrupted_and_resumable(tmp_path):
    procs = {sig: _per_train(tmp_path, sig.name) for sig in (signal.SIGTERM, signal.SIGINT)}
    deadline = time.monotonic() + 180
    # both train at once: signal each once it has a checkpoint from after its first updates (step 300; learning
    # starts at 100), so the signal never waits on the first call's numba compile (a cold cache under load)
    for sig, proc in procs.items():
        while _checkpoint_step(tmp_path / sig.name) < 300:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no checkpoint at step 300 within 180 s"
            time.sleep(0.2)
        proc.send_signal(sig)
    for sig, proc in procs.items():
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 128 + sig, err  # 143 for SIGTERM, 130 for Ctrl-C
        assert "Traceback" not in err
        assert f"interrupted by {sig.name}" in err
        summary = read_summary(tmp_path / sig.name)
        assert summary["status"] == INTERRUPTED, summary
        assert "traceback" not in summary and "per train --resume" in summary["error"]
        assert summary["total_steps"] >= 300

    run_dir = tmp_path / "SIGTERM"  # resumable: continue it a little further
    step = _checkpoint_step(run_dir)
    more = CliRunner().invoke(
        app, ["train", "--resume", str(run_dir), "--set", f"train.total_steps={step + 50}", "--quiet"]
    )
    assert more.exit_code == 0, more.output
    summary = read_summary(run_dir)
    assert summary["status"] == "completed" and summary["resumed_from_step"] == step
    assert summary["total_steps"] == step + 50


def test_a_diverging_run_fails_naming_the_learning_rate_without_numpy_warnings(tmp_path):
    sets = [arg for kv in TINY_CARTPOLE for arg in ("--set", kv)]
    diverging = ["--set", "agent.lr=1e30", "--set", "agent.max_grad_norm=null", "--set", "agent.loss=mse"]
    with _no_runtime_warnings():
        result = CliRunner().invoke(
            app, ["train", "--config", str(CONFIGS / "cartpole_uniform.yaml"), *sets, *diverging,
                  "--runs-dir", str(tmp_path), "--name", "d", "--quiet"],  # fmt: skip
        )
    assert result.exit_code == 1, result.output
    summary = read_summary(tmp_path / "d")
    assert summary["status"] == FAILED
    assert "at step" in summary["error"] and "learning rate (agent.lr=1e30) is probably too high" in summary["error"]
    assert summary["engine"] == "numba" and "engine_note" not in summary  # auto picks numba for a CPU MLP
    assert summary["machine"] == machine()  # (what computed it, failed runs included)
    assert "RuntimeWarning" not in result.output


class _no_runtime_warnings:  # noqa: N801 - used as a context manager
    def __enter__(self):
        import warnings

        self._catch = warnings.catch_warnings(record=True)
        self.caught = self._catch.__enter__()
        warnings.simplefilter("always")
        return self

    def __exit__(self, *exc):
        self._catch.__exit__(*exc)
        leaked = [w for w in self.caught if issubclass(w.category, RuntimeWarning)]
        assert not leaked, [str(w.message) for w in leaked]


@pytest.mark.parametrize(
    ("loss", "q", "what"),
    [(float("inf"), 1.0, "the loss became inf at step 7"), (1.0, float("nan"), "the Q values became nan at step 7")],
)
def test_check_update_names_what_diverged_and_the_likely_cause(loss, q, what):
    with pytest.raises(RunDiverged) as info:
        check_update(loss, q, 7, AgentConfig(lr=1e6))
    assert what in str(info.value)
    assert "the learning rate (agent.lr=1e6) is probably too high" in str(info.value)


def test_td_errors_too_large_to_square_end_the_run_at_the_next_window():
    td = np.asarray([[3e19, 1.0]], dtype=np.float32)  # finite, but δ² overflows float32
    with np.errstate(over="ignore"):
        values = {"td_error/mean": np.abs(td).mean(axis=1), "td_error/std": td.std(axis=1)}
    check_logged({"td_error/mean": values["td_error/mean"]}, 9, AgentConfig())
    with pytest.raises(RunDiverged, match=r"td_error/std became inf at step 9: gradients are not clipped"):
        check_logged(values, 9, AgentConfig(max_grad_norm=None))


def test_likely_causes_other_than_the_learning_rate():
    with pytest.raises(RunDiverged, match=r"agent.loss=huber"):
        check_update(float("nan"), 1.0, 1, AgentConfig(loss="mse"))
    with pytest.raises(RunDiverged, match=r"agent.lr=0.001, agent.gamma=0.99; lower the learning rate"):
        check_update(float("nan"), 1.0, 1, AgentConfig())


def test_run_interrupted_carries_its_signal_through_pickling():
    exc = pickle.loads(pickle.dumps(RunInterrupted(signal.SIGTERM)))
    assert isinstance(exc, KeyboardInterrupt) and exc.exit_code == 143 and str(exc) == "interrupted by SIGTERM"
    assert RunInterrupted(signal.SIGINT).exit_code == 130


def test_read_summary_absent_valid_and_unreadable(tmp_path):
    assert read_summary(tmp_path) is None
    write_summary(tmp_path, {"status": "completed", "x": float("nan")})
    assert read_summary(tmp_path) == {"status": "completed", "x": None}
    (tmp_path / "summary.json").write_text('{"status": "runn')  # truncated by a full disk
    unreadable = read_summary(tmp_path)
    assert unreadable["status"] == UNREADABLE and "summary.json" in unreadable["error"]
    (tmp_path / "summary.json").write_text(json.dumps([1, 2]))
    assert read_summary(tmp_path)["status"] == UNREADABLE
