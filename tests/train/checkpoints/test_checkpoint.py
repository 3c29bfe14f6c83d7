"""Checkpoints and ``per train --resume``: a resumed run continues exactly where it stopped."""

from __future__ import annotations

import csv
import json

import gymnasium as gym
import numpy as np
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from typer.testing import CliRunner

from per_cli.cli import app
from per_cli.config import load_config
from per_cli.train.checkpoints.checkpoint import latest_checkpoint, truncate_metrics
from per_cli.train.checkpoints.env_state import restore_env, snapshot_env
from per_cli.train.loop import trainer_state
from per_cli.train.loop.steps import Steps
from per_cli.train.loop.trainer import build_member, run_member

from ...conftest import CONFIGS, TINY_CARTPOLE

CHECKPOINTED = [*TINY_CARTPOLE, "train.total_steps=600", "train.checkpoint_every=150", "train.save_replay=true"]


class Crash(Exception):
    pass


def _crash_at(monkeypatch, at_step: int) -> None:
    """A crash in the env step of ``at_step`` (the loop's phase: the run fails)."""
    original = Steps.step_envs

    def crashing(self, members, actions):
        if members[0].state.step == at_step:
            raise Crash(f"simulated crash at step {members[0].state.step}")
        return original(self, members, actions)

    monkeypatch.setattr(Steps, "step_envs", crashing)


def _rows(run_dir):
    rows = list(csv.DictReader((run_dir / "metrics.csv").open()))
    for row in rows:
        row.pop("wall_time")
    return rows


def _scalars(run_dir) -> dict:
    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    return {
        tag: [(e.step, e.value) for e in events.Scalars(tag)]
        for tag in events.Tags()["scalars"]
        if tag != "charts/SPS"
    }


def _params(member) -> list[np.ndarray]:
    return [p.detach().cpu().numpy().copy() for p in member.agent.q_net.parameters()]


# the knobs of configs/seed001-asis (a done reward with a reachable exception: the 30-step limit's return 29)
AS_WRITTEN = ["env.max_episode_steps=30", "env.done_reward=-10", "env.done_reward_except_return=29",
              "env.truncation_terminates=true", "replay.beta_increment=0.003", "replay.is_weights=batch_max"]


@pytest.mark.parametrize(
    "kind", ["uniform", "prioritized", "prioritized,as_written", "combined,as_written", "laber", "relo"]
)
def test_interrupted_run_resumes_exactly(tmp_path, monkeypatch, kind):
    kind, _, variant = kind.partition(",")
    extra = AS_WRITTEN if variant else []
    cfg = load_config(CONFIGS / "cartpole_uniform.yaml", [*CHECKPOINTED, f"replay.kind={kind}", *extra], device="cpu")
    whole = build_member(cfg)
    whole_summary = run_member(whole, tmp_path / "whole")

    _crash_at(monkeypatch, 380)
    with pytest.raises(Crash):
        run_member(build_member(cfg), tmp_path / "split")
    monkeypatch.undo()
    run_dir = tmp_path / "split"
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "failed"
    assert latest_checkpoint(run_dir).name == "step_000000000300"

    resumed = build_member(cfg)
    assert trainer_state.resume(resumed, run_dir) == 300
    summary = run_member(resumed, run_dir)

    assert summary["status"] == "completed" and summary["resumed_from_step"] == 300
    for key in ("total_steps", "episodes", "updates", "final_return_mean", "eval_return_mean"):
        assert summary[key] == whole_summary[key], key
    assert _rows(run_dir) == _rows(tmp_path / "whole")  # rows the crashed run wrote after step 300 dropped
    assert _scalars(run_dir) == _scalars(tmp_path / "whole")  # ... and its later events purged
    for a, b in zip(_params(resumed), _params(whole), strict=True):
        np.testing.assert_array_equal(a, b)
    assert len(list(run_dir.glob("events.out.tfevents.*"))) == 2  # the same event dir, appended
    assert [p.name for p in (run_dir / "checkpoints").iterdir() if p.is_dir()] == ["step_000000000600"]


def test_resume_through_the_cli_trains_longer_and_appends(tmp_path):
    runner = CliRunner()
    args = ["train", "--config", str(CONFIGS / "cartpole_uniform.yaml"), "--runs-dir", str(tmp_path),
            "--name", "run", "--quiet", "--device", "cpu"]  # fmt: skip
    for item in CHECKPOINTED:
        args += ["--set", item]
    assert runner.invoke(app, args).exit_code == 0
    run_dir = tmp_path / "run"
    rows_before = _rows(run_dir)

    again = runner.invoke(app, ["train", "--resume", str(run_dir), "--quiet"])
    assert again.exit_code == 2 and "total_steps" in again.output  # finished: ask for more steps

    # (agent.cuda_graph, how a GPU launches the work, may change: the other agent keys not)
    longer = ["--set", "train.total_steps=900", "--set", "agent.cuda_graph=false", "--quiet"]
    more = runner.invoke(app, ["train", "--resume", str(run_dir), *longer])
    assert more.exit_code == 0, more.output
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["total_steps"] == 900
    assert summary["resumed_from_step"] == 600
    rows = _rows(run_dir)
    assert rows[: len(rows_before)] == rows_before and len(rows) > len(rows_before)
    assert int(rows[-1]["step"]) > 600
    assert [int(r["episode"]) for r in rows] == list(range(1, len(rows) + 1))  # episode numbers continue
    saved = (run_dir / "config.yaml").read_text().replace("\r", "")
    assert "train:\n  total_steps: 900" in saved and "cuda_graph: false" in saved
    assert latest_checkpoint(run_dir).name == "step_000000000900"


def test_resume_without_the_replay_memory_refills_it_first(tmp_path, monkeypatch):
    overrides = [*CHECKPOINTED, "train.save_replay=false"]
    cfg = load_config(CONFIGS / "cartpole_uniform.yaml", overrides, device="cpu")
    _crash_at(monkeypatch, 320)
    with pytest.raises(Crash):
        run_member(build_member(cfg), tmp_path / "r")
    monkeypatch.undo()
    assert not (latest_checkpoint(tmp_path / "r") / "replay").exists()
    member = build_member(cfg)
    trainer_state.resume(member, tmp_path / "r")
    updates_at_checkpoint = member.agent.updates
    summary = run_member(member, tmp_path / "r")
    assert summary["status"] == "completed"
    # learning_starts=100 transitions collected again (steps 300..399), then one update per 4 steps
    assert summary["updates"] - updates_at_checkpoint == len(range(400, 601, 4))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--config", str(CONFIGS / "cartpole_uniform.yaml")], "drop --config"),
        (["--set", "agent.lr=0.1"], "agent.lr: cannot change it"),
        (["--set", "replay.kind=combined"], "replay.kind: cannot change it"),
    ],
)
def test_bad_resumes_exit_2(tmp_path, extra, message):
    runner = CliRunner()
    args = ["train", "--config", str(CONFIGS / "cartpole_uniform.yaml"), "--runs-dir", str(tmp_path),
            "--name", "run", "--quiet", "--device", "cpu"]  # fmt: skip
    for item in [*CHECKPOINTED, "train.total_steps=200"]:
        args += ["--set", item]
    assert runner.invoke(app, args).exit_code == 0
    result = runner.invoke(app, ["train", "--resume", str(tmp_path / "run"), "--set", "train.total_steps=400", *extra])
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_resume_needs_a_checkpoint(tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["train", "--resume", str(tmp_path / "nothing")])
    assert result.exit_code == 2 and "not a run directory" in result.output
    args = ["train", "--config", str(CONFIGS / "cartpole_uniform.yaml"), "--runs-dir", str(tmp_path),
            "--name", "plain", "--quiet", "--device", "cpu"]  # fmt: skip
    for item in [*TINY_CARTPOLE, "train.total_steps=200"]:
        args += ["--set", item]
    assert runner.invoke(app, args).exit_code == 0
    result = runner.invoke(app, ["train", "--resume", str(tmp_path / "plain"), "--set", "train.total_steps=400"])
    assert result.exit_code == 2 and "no checkpoint" in result.output


def test_an_ale_env_snapshot_continues_exactly():
    cfg = load_config(None, ["env.id=pong", "env.atari.sticky_actions=0.25"])
    from per_cli.envs import make_env

    env = make_env(cfg.env, seed=4)
    env.reset(seed=4)
    rng = np.random.default_rng(0)
    for _ in range(60):
        env.step(int(rng.integers(6)))
    twin = restore_env(make_env(cfg.env, seed=9), snapshot_env(env))  # (another seed: the snapshot decides)
    for _ in range(300):
        action = int(rng.integers(6))
        a, b = env.step(action), twin.step(action)
        np.testing.assert_array_equal(a[0], b[0])
        assert a[1:4] == b[1:4]
        if a[2] or a[3]:
            np.testing.assert_array_equal(env.reset()[0], twin.reset()[0])  # noop starts draw the same


def test_an_env_holding_more_than_data_gives_no_snapshot():
    import threading

    env = gym.make("CartPole-v1")
    env.unwrapped.handles = [threading.Lock()]  # a value no snapshot can keep as data
    assert snapshot_env(env) is None


def test_truncate_metrics_keeps_rows_up_to_the_step(tmp_path):
    (tmp_path / "metrics.csv").write_bytes(b"step,episode,return\r\n10,1,1.0\r\n20,2,2.0\r\n30,3,3.0\r\n")
    truncate_metrics(tmp_path, 20)
    assert (tmp_path / "metrics.csv").read_bytes() == b"step,episode,return\r\n10,1,1.0\r\n20,2,2.0\r\n"


def test_checkpoint_holds_rng_and_schedule_state(tmp_path):
    cfg = load_config(CONFIGS / "cartpole_uniform.yaml", CHECKPOINTED, device="cpu")
    run_member(build_member(cfg), tmp_path / "r")
    state = torch.load(latest_checkpoint(tmp_path / "r") / "trainer.pt", weights_only=True)  # (no added globals)
    assert state["loop"]["step"] == 600
    assert {"action", "sampler", "torch"} <= set(state["rng"])
    assert {"q_net", "target_net", "optimizer", "updates"} <= set(state["agent"])
    assert state["env"] is not None and state["replay_saved"]
