"""`per grid` end to end, with real processes: a tiny grid, failure isolation, resume after a real SIGKILL,
Ctrl-C, the Ray backend, --dry-run and bad input."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from per_cli.cli import app

from ..conftest import CONFIGS, ctrl_c_as_in_a_terminal

try:
    import per_cli.train.checkpoints.checkpoint  # noqa: F401

    CHECKPOINTS = True
except ImportError:  # a version without `per train --resume`: unfinished runs start again
    CHECKPOINTS = False

# a run of a few hundred steps and a handful of updates: the grid machinery is under test, not learning
TINY = [
    "train.total_steps=300",
    "train.learning_starts=100",
    "train.train_freq=50",
    "train.gradient_steps=1",
    "train.eval_episodes=1",
    "replay.capacity=1000",
    "replay.batch_size=32",
    "agent.hidden_sizes=[32]",
    "log.tensorboard=false",
]
# agent.lr=1e30 with an unclipped MSE loss diverges at the first updates: the loop stops it (non-finite loss)
# at run time -- a real failing run, not a mock
DIVERGES = ["agent.loss=mse", "agent.max_grad_norm=null"]


def _sets(items):
    return [arg for kv in items for arg in ("--set", kv)]


@pytest.fixture
def configs(tmp_path) -> Path:
    """A configs dir with only cartpole_uniform.yaml, so the tests do not depend on which configs exist."""
    d = tmp_path / "configs"
    d.mkdir()
    shutil.copy(CONFIGS / "cartpole_uniform.yaml", d)
    return d


def _cmd(configs: Path, runs: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "per_cli", "grid", "--configs-dir", str(configs), "--runs-dir", str(runs), *args]


def _grid(configs: Path, runs: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(_cmd(configs, runs, *args), capture_output=True, text=True, timeout=timeout)


def _summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def _starts(grid_dir: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for line in (grid_dir / "grid.log").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] == "start":
            counts[parts[2]] = counts.get(parts[2], 0) + 1
    return counts


def _wait_for(predicate, timeout: float, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"grid exited early ({proc.returncode}): {proc.stderr.read()}")
        time.sleep(0.05)
    raise AssertionError("timed out waiting")


def _status(run_dir: Path) -> str | None:
    try:
        return _summary(run_dir)["status"]
    except (FileNotFoundError, json.JSONDecodeError, KeyError):
        return None


def test_grid_end_to_end_failure_isolation_sweep_names_and_resume(configs, tmp_path):
    runs = tmp_path / "runs"
    args = ["--envs", "cartpole", "--replays", "uniform", "--seeds", "1", "--workers", "1"]
    args += ["--sweep", "agent.lr=1e-3,1e30", *_sets(TINY + DIVERGES)]
    first = _grid(configs, runs, *args)
    assert first.returncode == 1, first.stderr  # one run failed -> exit 1, but the grid went on
    (grid_dir,) = runs.glob("grid-*")
    ok, bad = grid_dir / "cartpole__uniform__s1__agent.lr=1e-3", grid_dir / "cartpole__uniform__s1__agent.lr=1e30"
    assert _summary(ok)["status"] == "completed" and _summary(ok)["total_steps"] == 300
    failed = _summary(bad)
    assert failed["status"] == "failed" and "agent.lr" in failed["error"]  # the divergence names its likely cause
    assert "Traceback" in failed["traceback"]
    assert yaml.safe_load((ok / "config.yaml").read_text())["agent"]["lr"] == pytest.approx(1e-3)
    assert ok.name in first.stdout and "1 completed, 1 failed" in first.stdout
    assert f"per plot {grid_dir}" in first.stdout
    assert "completed" in first.stderr and "failed" in first.stderr  # a line per finished run

    manifest = yaml.safe_load((grid_dir / "grid.yaml").read_text())
    assert manifest["request"]["sweeps"] == [{"key": "agent.lr", "values": ["1e-3", "1e30"]}]
    assert [r["name"] for r in manifest["runs"]] == [ok.name, bad.name]
    assert manifest["runs"][0]["sweep"] == {"agent.lr": "1e-3"}

    # the same command again: the same grid directory, nothing re-run, the failure still reported
    stamp = ok.joinpath("summary.json").stat().st_mtime_ns
    again = _grid(configs, runs, *args)
    assert again.returncode == 1 and "already complete" in again.stdout
    assert list(runs.glob("grid-*")) == [grid_dir]
    assert ok.joinpath("summary.json").stat().st_mtime_ns == stamp
    assert _starts(grid_dir) == {ok.name: 1, bad.name: 1}

    # --retry-failed runs the failed one (only) again
    retry = _grid(configs, runs, *args, "--retry-failed")
    assert retry.returncode == 1
    assert _starts(grid_dir) == {ok.name: 1, bad.name: 2}


def test_resume_after_sigkill_of_the_grid_loses_only_the_run_in_flight(configs, tmp_path):
    runs = tmp_path / "runs"
    # long enough that the run in flight cannot finish between the check below and the kill, even on a loaded
    # machine (at 1,500 steps it sometimes did: ~0.2 s left after its first checkpoint)
    longer = [*TINY, "train.total_steps=6000", "train.train_freq=10"]
    if CHECKPOINTS:  # the run in flight continues from its checkpoint instead of starting again
        longer.append("train.checkpoint_every=500")
    args = ["--envs", "cartpole", "--replays", "uniform", "--seeds", "1-2", "--workers", "1", "--name", "g"]
    args += ["--cohort-size", "1", *_sets(longer)]  # solo runs, one after the other
    grid_dir = runs / "g"
    first, second = grid_dir / "cartpole__uniform__s1", grid_dir / "cartpole__uniform__s2"

    def second_in_flight() -> bool:
        if _status(first) != "completed" or _status(second) != "running":
            return False
        return not CHECKPOINTS or (second / "checkpoints" / "latest").is_file()

    proc = subprocess.Popen(_cmd(configs, runs, *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=ctrl_c_as_in_a_terminal)  # fmt: skip
    try:
        _wait_for(second_in_flight, 90, proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        proc.kill()
    completed_at = _summary(first)["started_at"], first.joinpath("summary.json").stat().st_mtime_ns
    time.sleep(0.5)  # the worker died with the grid: the run in flight stays "running", nobody writes it
    rows = second.joinpath("metrics.csv").read_text()
    time.sleep(0.5)
    assert _status(second) == "running" and second.joinpath("metrics.csv").read_text() == rows

    dry = _grid(configs, runs, *args, "--dry-run")
    assert dry.returncode == 0
    states = {line.split()[0]: line.split()[-2:] for line in dry.stdout.splitlines() if line.startswith("cartpole")}
    again = "resume" if CHECKPOINTS else "restart"
    assert states == {first.name: ["completed", "skip"], second.name: ["unfinished", again]}

    resumed = _grid(configs, runs, *args)
    assert resumed.returncode == 0, resumed.stderr
    assert _status(first) == _status(second) == "completed"
    assert (_summary(first)["started_at"], first.joinpath("summary.json").stat().st_mtime_ns) == completed_at
    assert _starts(grid_dir) == {first.name: 1, second.name: 2}
    if CHECKPOINTS:
        assert _summary(second)["resumed_from_step"] >= 500 and "resumed from step" in resumed.stderr


def test_dead_worker_fails_only_its_run_and_ctrl_c_stops_cleanly(configs, tmp_path):
    runs = tmp_path / "runs"
    args = ["--envs", "cartpole", "--replays", "uniform", "--seeds", "1-2", "--workers", "2", "--name", "g"]
    args += _sets([*TINY, "train.total_steps=100000"])
    grid_dir = runs / "g"
    one, two = grid_dir / "cartpole__uniform__s1", grid_dir / "cartpole__uniform__s2"
    proc = subprocess.Popen(_cmd(configs, runs, *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=ctrl_c_as_in_a_terminal)  # fmt: skip
    try:
        _wait_for(lambda: _status(one) == _status(two) == "running", 90, proc)
        pids = [int((grid_dir / ".locks" / f"{run.name}.lock").read_text()) for run in (one, two)]
        os.kill(pids[0], signal.SIGKILL)  # a worker dies (think: the OOM killer): its run fails, the grid goes on
        _wait_for(lambda: _status(one) == "failed", 30, proc)
        assert _status(two) == "running"
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "worker process died (signal SIGKILL)" in _summary(one)["error"]
    s2 = _summary(two)
    assert s2["status"] == "interrupted", s2  # a real status (whole JSON: written atomically), resumable
    assert "interrupted" in out
    with pytest.raises(ProcessLookupError):  # the other worker is gone too
        os.kill(pids[1], 0)
    dry = _grid(configs, runs, *args, "--dry-run")
    states = {line.split()[0]: line.split()[-2:] for line in dry.stdout.splitlines() if line.startswith("cartpole")}
    assert states == {one.name: ["failed", "skip"], two.name: ["interrupted", "restart"]}


def test_ray_backend_trains_cohorts_and_returns_files_to_the_driver(configs, tmp_path):
    pytest.importorskip("ray")
    from per_cli.config import load_config
    from per_cli.train.loop.trainer import build_member, run_member

    from ..train.checkpoints.test_checkpoint import _rows

    runs = tmp_path / "runs"
    sets = _sets([*TINY, "log.tensorboard=true"])
    args = ["--envs", "cartpole", "--replays", "uniform", "--seeds", "1-3", "--backend", "ray", "--workers", "2", *sets]
    done = _grid(configs, runs, *args, "--cohort-size", "2", timeout=180)
    assert done.returncode == 0, done.stderr
    assert "cohorts of up to 2 (2 tasks)" in done.stderr  # seeds 1-2 as one Ray task, seed 3 as a cohort of one
    (grid_dir,) = runs.glob("grid-*")
    for s in (1, 2, 3):
        run_dir = grid_dir / f"cartpole__uniform__s{s}"
        assert _summary(run_dir)["status"] == "completed"
        names = {p.name for p in run_dir.iterdir()}
        assert {"config.yaml", "metrics.csv", "summary.json"} <= names
        assert any(n.startswith("events.out.tfevents") for n in names)
    assert not list(grid_dir.glob(".incoming-*"))
    solo = build_member(load_config(grid_dir / "cartpole__uniform__s2" / "config.yaml"))
    run_member(solo, tmp_path / "solo2")
    assert _rows(grid_dir / "cartpole__uniform__s2") == _rows(tmp_path / "solo2")  # a member is its solo run


def test_dry_run_prints_the_plan_and_writes_nothing(configs, tmp_path):
    runs = tmp_path / "runs"
    done = _grid(
        configs, runs, "--envs", "cartpole", "--seeds", "1-2", "--sweep", "replay.capacity=1000,5000", "--dry-run"
    )
    assert done.returncode == 0, done.stderr
    names = [line.split()[0] for line in done.stdout.splitlines() if line.startswith("cartpole__")]
    assert names == [
        "cartpole__uniform__s1__replay.capacity=1000",
        "cartpole__uniform__s1__replay.capacity=5000",
        "cartpole__uniform__s2__replay.capacity=1000",
        "cartpole__uniform__s2__replay.capacity=5000",
    ]
    assert "note:" not in done.stdout + done.stderr  # default kinds without a config: not run, and not mentioned
    assert "4 runs: 4 to run, 0 to skip" in done.stdout
    assert not runs.exists()


def test_sweep_axes_multiply_with_yaml_values_and_deterministic_names(configs):
    from per_cli.sweep.grid import build_request, plan_grid

    sweeps = ["agent.hidden_sizes=[64,64],[32]", "replay.capacity=1e3,5000"]
    sets = ["train.total_steps=500", "train.learning_starts=100"]
    plan = plan_grid(build_request("CartPole-v1", "uniform", "1,7", sweeps, sets, None, configs))
    assert [r.name for r in plan.runs] == [
        f"cartpole__uniform__s{seed}__agent.hidden_sizes={h}__replay.capacity={c}"
        for seed in (1, 7)
        for h in ("64-64", "32")
        for c in ("1e3", "5000")
    ]
    first = plan.runs[0].config
    assert first["agent"]["hidden_sizes"] == [64, 64] and first["replay"]["capacity"] == 1000
    assert first["env"]["id"] == "CartPole-v1" and first["seed"] == 1 and first["train"]["total_steps"] == 500
    assert plan.runs[0].source.endswith("cartpole_uniform.yaml")  # the alias finds the env's own config


def test_a_config_without_envs_runs_as_it_is_its_env_and_its_kind():
    """issue 10's two-factor command as written: no --envs, no --replays."""
    from per_cli.sweep.grid import build_request, plan_grid

    sweeps = ["replay.window=64,10000", "replay.alpha=0,0.7"]
    plan = plan_grid(build_request(None, None, "1-2", sweeps, None, Path("seed001/cartpole_per"), CONFIGS))
    assert [r.name for r in plan.runs] == [
        f"cartpole__prioritized__s{seed}__replay.window={w}__replay.alpha={a}"
        for seed in (1, 2)
        for w in ("64", "10000")
        for a in ("0", "0.7")
    ]
    assert {r.config["env"]["max_episode_steps"] for r in plan.runs} == {200}  # the config's own settings
    (run,) = plan_grid(build_request(None, "uniform", "1", None, None, Path("seed001/cartpole_per"), CONFIGS)).runs
    assert run.name == "cartpole__uniform__s1"  # --replays still picks the kinds


def test_hindsight_labels_find_the_her_config_and_name_the_runs():
    from per_cli.sweep.grid import build_request, plan_grid

    sets = ["train.total_steps=500", "train.learning_starts=100"]
    plan = plan_grid(build_request("bitflip", None, "1", None, sets, None, CONFIGS))
    assert [r.name for r in plan.runs] == ["bitflip__uniform__s1", "bitflip__uniform+her__s1"]
    her = plan.runs[1]
    assert her.source.endswith("bitflip_her.yaml") and her.config["replay"]["her_strategy"] == "future"
    plan = plan_grid(build_request("bitflip", "prioritized+her", "1", None, sets, None, CONFIGS))
    (run,) = plan.runs
    assert run.name == "bitflip__prioritized+her__s1" and run.source.endswith("bitflip_her.yaml")
    assert run.config["replay"]["kind"] == "prioritized" and run.config["replay"]["her_strategy"] == "future"


def test_run_states_and_actions_from_summary_json(tmp_path):
    from per_cli.sweep.status import action_for, run_state

    def state(text: str | None) -> str:
        run = tmp_path / f"r{len(list(tmp_path.iterdir()))}"
        run.mkdir()
        if text is not None:
            (run / "summary.json").write_text(text)
        return run_state(run).state

    assert run_state(tmp_path / "absent").state == "new"
    assert state(None) == "unfinished"  # made, but the process died before its first summary
    assert state('{"status": "running"}') == "unfinished"  # the process died mid-run
    assert state('{"status": "interrupted", "error": "interrupted by SIGTERM"}') == "interrupted"
    assert state('{"status": "failed", "error": "interrupted by a message string"}') == "failed"  # no parsing
    assert state('{"status": "compl') == "unreadable"  # truncated: never taken for a run in progress
    assert [action_for(s, False) for s in ("completed", "failed", "unreadable", "interrupted", "unfinished", "new")] \
        == ["skip", "skip", "skip", "restart", "restart", "start"]  # fmt: skip
    assert [action_for(s, True) for s in ("failed", "unreadable")] == ["retry", "retry"]


runner = CliRunner()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--envs", "cartpol"], "unknown env 'cartpol'"),
        (["--envs", "cartpole", "--replays", "uniform,bogus"], "unknown replay kind 'bogus'"),
        (["--envs", "cartpole", "--replays", "combined"], "no config"),
        (["--envs", "cartpole", "--sweep", "agent.lrr=1,2"], "did you mean 'agent.lr'"),
        (["--envs", "cartpole", "--sweep", "agent.lr=1e-3,-1"], "agent.lr: -1"),  # only one run is bad
        (["--envs", "cartpole", "--set", "seed=4"], "use --seeds"),
        (["--envs", "cartpole", "--seeds", "x"], "--seeds 'x': write a seed (3), a range (1-100"),
        (["--envs", "cartpole", "--seeds", "1,1"], "names seed 1 twice"),
        (["--envs", "cartpole", "--sweep", "agent.network=mlp,cnn"], "agent.network"),  # found before any run
        (["--envs", "cartpole", "--replays", "hindsight"], "uniform+her"),
        (["--envs", "cartpole", "--replays", "uniform+her", "--config", str(CONFIGS / "cartpole_uniform.yaml")],
         "set replay.her_strategy"),
        (["--envs", "cartpole", "--ray-address", "x:1"], "--backend ray"),
        ([], "--envs: give the envs to run"),
        (["--envs", "Pendulum-v1", "--config", str(CONFIGS / "cartpole_uniform.yaml")], "Discrete"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_on_disk(configs, tmp_path, args, message):
    runs = tmp_path / "runs"
    result = runner.invoke(app, ["grid", "--configs-dir", str(configs), "--runs-dir", str(runs), *args])
    assert result.exit_code == 2, result.output
    assert message in result.output and result.output.count("error:") == 1
    assert not runs.exists()


def test_bad_input_from_a_real_process_and_a_foreign_directory(configs, tmp_path):
    runs = tmp_path / "runs"
    (runs / "taken").mkdir(parents=True)
    done = _grid(configs, runs, "--envs", "cartpole", "--name", "taken")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "not a grid directory" in done.stderr
    assert [p.name for p in runs.iterdir()] == ["taken"] and not any((runs / "taken").iterdir())


def test_a_named_grid_resumes_from_another_configs_dir_and_refuses_an_edited_config(configs, tmp_path):
    """The manifest keeps the configs dir's absolute path; another clone (another path, the same files) grows
    the grid, and a config file edited since (here in the clone the grid now names) is refused before
    anything runs."""
    runs = tmp_path / "runs"
    args = ["--envs", "cartpole", "--replays", "uniform", "--workers", "1", "--name", "g", *_sets(TINY)]
    assert _grid(configs, runs, *args, "--seeds", "1").returncode == 0
    clone = tmp_path / "clone" / "configs"
    shutil.copytree(configs, clone)

    grown = _grid(clone, runs, *args, "--seeds", "1-2")
    assert grown.returncode == 0, grown.stderr
    assert _starts(runs / "g") == {"cartpole__uniform__s1": 1, "cartpole__uniform__s2": 1}

    edited = clone / "cartpole_uniform.yaml"
    data = yaml.safe_load(edited.read_text())
    data["agent"]["gamma"] = 0.5
    edited.write_text(yaml.safe_dump(data))
    result = runner.invoke(app, ["grid", "--configs-dir", str(clone), "--runs-dir", str(runs), *args, "--seeds", "1-3"])
    assert result.exit_code == 2 and result.output.count("error:") == 1
    assert "cartpole__uniform__s1/config.yaml differs" in result.output
    assert not (runs / "g" / "cartpole__uniform__s3").exists()


def test_a_negative_swept_value_keeps_its_sign_in_the_run_name(configs):
    """``--sweep env.done_reward=-10,10,null``: three runs, three names (a slug alone drops the leading minus,
    naming -10 as 10)."""
    from per_cli.sweep.grid import build_request, plan_grid

    sets = ["train.total_steps=500", "train.learning_starts=100"]
    plan = plan_grid(build_request("CartPole-v1", "uniform", "1", ["env.done_reward=-10,10,null"], sets, None, configs))
    assert [r.name.rpartition("__")[2] for r in plan.runs] == ["env.done_reward=-10", "env.done_reward=10",
                                                               "env.done_reward=null"]  # fmt: skip
    assert [r.config["env"]["done_reward"] for r in plan.runs] == [-10, 10, None]


def test_retry_keeps_the_files_of_a_run_whose_summary_is_unreadable(configs, tmp_path):
    """Issue 35: --retry-failed over a run whose summary.json is unreadable must not destroy its intact
    metrics.csv (no checkpoint: its files are moved aside, never deleted); a completed run whose config.yaml
    is missing is reported."""
    runs = tmp_path / "runs"
    args = ["--envs", "cartpole", "--replays", "uniform", "--seeds", "1-2", "--workers", "1", "--name", "g",
            *_sets(TINY)]  # fmt: skip
    assert _grid(configs, runs, *args).returncode == 0
    grid_dir = runs / "g"
    damaged, bare = grid_dir / "cartpole__uniform__s1", grid_dir / "cartpole__uniform__s2"
    (damaged / "summary.json").write_text('{"status": "compl')
    metrics = (damaged / "metrics.csv").read_text()
    (bare / "config.yaml").unlink()

    retry = _grid(configs, runs, *args, "--retry-failed")
    assert retry.returncode == 0, retry.stderr
    (aside,) = (grid_dir / ".set-aside").iterdir()
    assert aside.name.startswith(damaged.name) and (aside / "metrics.csv").read_text() == metrics
    assert f"{damaged.name}: summary.json cannot be read; its files moved to {aside}" in retry.stderr
    assert f"{bare.name}: completed, but its config.yaml is missing" in retry.stderr
    assert _summary(damaged)["status"] == "completed"
    assert _starts(grid_dir) == {damaged.name: 2, bare.name: 1}
