"""The Atari pipeline: Gymnasium's preprocessing plus our three wrappers, training vs evaluation, and a real
Pong run through ``per train``."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from typer.testing import CliRunner

from per_cli.cli import app
from per_cli.config import ConfigError, load_config
from per_cli.envs import check_env_id, is_atari_id, make_env, resolve_env_id
from per_cli.envs.atari import FireOnReset, LifeLossTerminal
from per_cli.replay.storage.frames import FrameStackStorage
from per_cli.train.checkpoints.checkpoint import latest_checkpoint
from per_cli.train.loop.trainer import build_member


def _chain(env: gym.Env) -> list[type]:
    out = []
    while isinstance(env, gym.Wrapper):
        out.append(type(env))
        env = env.env
    return out


def _cfg(*overrides: str):
    return load_config(None, list(overrides))


def test_pong_alias_and_atari_ids():
    assert resolve_env_id("pong") == "ALE/Pong-v5"
    assert is_atari_id("ALE/Breakout-v5") and is_atari_id("PongNoFrameskip-v4")
    with pytest.raises(ConfigError, match="env.id"):
        check_env_id("ALE/NoSuchGame-v5")


def test_training_chain_and_observations():
    env = make_env(_cfg("env.id=pong").env, seed=1)
    chain = _chain(env)
    names = [c.__name__ for c in chain]
    assert names[:5] == [
        "FrameStackObservation",
        "UnitRewardClip",
        "FireOnReset",
        "LifeLossTerminal",
        "RecordEpisodeStatistics",
    ]
    assert "AtariPreprocessing" in names
    base = env.unwrapped
    assert base._frameskip == 1  # AtariPreprocessing does the skipping (and max-pooling)
    assert base.ale.getFloat("repeat_action_probability") == 0.0
    assert env.observation_space.shape == (4, 84, 84) and env.observation_space.dtype == np.uint8
    obs, _ = env.reset(seed=3)
    assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
    assert not obs[:3].any() and obs[3].any()  # zero padding before the first frame
    nxt = env.step(0)[0]
    np.testing.assert_array_equal(nxt[:3], obs[1:])


def test_evaluation_chain_has_no_clipping_nor_life_loss():
    env = make_env(_cfg("env.id=pong").env, seed=1, evaluation=True)
    names = [c.__name__ for c in _chain(env)]
    assert "UnitRewardClip" not in names and "LifeLossTerminal" not in names
    assert "RecordEpisodeStatistics" in names and "FireOnReset" in names


def test_options_switch_wrappers_and_sticky_actions():
    cfg = _cfg(
        "env.id=PongNoFrameskip-v4",
        "env.atari.clip_rewards=false",
        "env.atari.terminal_on_life_loss=false",
        "env.atari.fire_reset=false",
        "env.atari.sticky_actions=0.25",
        "env.atari.frame_stack=2",
    )
    env = make_env(cfg.env, seed=1)
    names = [c.__name__ for c in _chain(env)]
    assert not {"UnitRewardClip", "LifeLossTerminal", "FireOnReset"} & set(names)
    assert env.unwrapped.ale.getFloat("repeat_action_probability") == pytest.approx(0.25)
    assert env.observation_space.shape == (2, 84, 84)


def test_life_loss_ends_the_episode_but_not_the_game():
    env = make_env(_cfg("env.id=ALE/Breakout-v5").env, seed=0)
    assert LifeLossTerminal in _chain(env) and FireOnReset in _chain(env)
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    lives = [env.unwrapped.ale.lives()]
    episodes = 0
    while True:
        _, reward, terminated, truncated, info = env.step(int(rng.integers(env.action_space.n)))
        assert reward in (-1.0, 0.0, 1.0)
        if terminated or truncated:
            episodes += 1
            if "episode" in info:  # the game is over: one whole-game record, after every life was lost
                break
            env.reset()
            lives.append(env.unwrapped.ale.lives())
    assert lives == [5, 4, 3, 2, 1] and episodes == 5  # each life an episode; the game was never restarted


def test_training_logs_whole_game_unclipped_returns_and_eval_sees_raw_rewards():
    # Space Invaders pays 5..30 points per alien: clipping shows
    env = make_env(_cfg("env.id=ALE/SpaceInvaders-v5").env, seed=0)
    rng = np.random.default_rng(1)
    env.reset(seed=0)
    clipped = 0.0
    while True:
        _, reward, terminated, truncated, info = env.step(int(rng.integers(env.action_space.n)))
        assert reward in (-1.0, 0.0, 1.0)
        clipped += reward
        if "episode" in info:
            break
        if terminated or truncated:
            env.reset()
    assert info["episode"]["r"] > clipped > 0  # RecordEpisodeStatistics sits under ClipReward

    eval_env = make_env(_cfg("env.id=ALE/SpaceInvaders-v5").env, seed=0, evaluation=True)
    eval_env.reset(seed=0)
    rewards, done = [], False
    while not done:
        _, reward, terminated, truncated, info = eval_env.step(int(rng.integers(eval_env.action_space.n)))
        rewards.append(reward)
        done = terminated or truncated
    assert "episode" in info and max(rewards) > 1  # whole game, raw points
    assert info["episode"]["r"] == pytest.approx(sum(rewards))


def test_atari_runs_use_the_frame_storage():
    cfg = _cfg("env.id=pong", "replay.capacity=500", "replay.batch_size=8", "device=cpu")
    member = build_member(cfg)
    assert isinstance(member.memory.storage, FrameStackStorage)
    assert member.memory.storage.frames.shape[1:] == (84, 84)
    member.env.close()


# A few hundred steps of real Pong through the CLI: learning (prioritized replay), evaluation on a
# time-limited game, TensorBoard and the CSV.
TINY_PONG = [
    "--set", "train.total_steps=300",
    "--set", "train.learning_starts=200",
    "--set", "train.train_freq=4",
    "--set", "train.eval_every=1000",
    "--set", "train.eval_episodes=1",
    "--set", "env.max_episode_steps=150",
    "--set", "replay.capacity=1000",
    "--set", "log.every=5",
]  # fmt: skip


def test_pong_configs_follow_the_per_paper(configs_dir):
    per = load_config(configs_dir / "pong_per.yaml")
    uniform = load_config(configs_dir / "pong_uniform.yaml")
    assert (per.replay.kind, per.replay.alpha, per.replay.beta0, per.replay.batch_size) == ("prioritized", 0.6, 0.4, 32)
    assert per.agent.lr == pytest.approx(0.00025 / 4) and per.agent.double_dqn and per.agent.loss == "huber"
    assert per.train.train_freq == 4 and per.train.gradient_steps == 1
    assert uniform.replay.kind == "uniform"
    same = ["env", "agent", "train", "log", "metrics", "seed"]
    assert all(getattr(per, k) == getattr(uniform, k) for k in same)
    assert per.replay.capacity == uniform.replay.capacity


def test_per_train_runs_real_pong(tmp_path, configs_dir):
    result = CliRunner().invoke(
        app,
        ["train", "--config", str(configs_dir / "pong_per.yaml"), *TINY_PONG, "--runs-dir", str(tmp_path),
         "--name", "pong", "--quiet", "--device", "cpu"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    run_dir = tmp_path / "pong"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["total_steps"] == 300
    assert summary["updates"] == (300 - 200) // 4 + 1
    assert summary["eval_return_mean"] is not None
    lines = (run_dir / "metrics.csv").read_text().splitlines()
    assert len(lines) == 3  # a header, then two whole games (cut at 150 steps) in 300 steps
    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    assert {"losses/td_loss", "charts/episodic_return", "eval/return"} <= set(events.Tags()["scalars"])
    checkpoint = latest_checkpoint(run_dir)  # the config checkpoints (with its replay memory) at the end
    assert checkpoint.name == "step_000000000300" and (checkpoint / "replay").is_dir()


def test_a_memory_too_large_for_this_machine_exits_2_and_writes_nothing(tmp_path, configs_dir):
    result = CliRunner().invoke(
        app,
        ["train", "--config", str(configs_dir / "pong_per.yaml"), "--set", "replay.capacity=100000000",
         "--runs-dir", str(tmp_path), "--quiet"],
    )  # fmt: skip
    assert result.exit_code == 2
    assert "replay.capacity" in result.output and "GB" in result.output
    assert not any(tmp_path.iterdir())
