"""Greedy evaluation on a separate env with evaluation settings (no life-loss terminals, no reward
clipping for Atari), seeded apart from the training env. It checkpoints itself: its env and last results."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from per_cli.config import Config
from per_cli.envs import make_env
from per_cli.train.checkpoints.env_state import restore_env, snapshot_env
from per_cli.train.loop.stopping import SignalStop

EVAL_SEED_OFFSET = 1_000_003


class Evaluator:
    """``train.eval_episodes`` episodes at ``train.eval_eps``; keeps the last results for the summary."""

    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.env: gym.Env | None = None  # made on first use: runs without evaluation never build it
        self.return_mean: float | None = None
        self.return_std: float | None = None
        self.success_rate: float | None = None

    def run(self, agent, seed_step: int, stop: SignalStop) -> dict[str, float]:
        """Evaluate ``agent``; returns the ``eval/*`` scalars. Acting draws from an RNG seeded by the run's
        seed and ``seed_step``, so an evaluation repeats exactly after a resume. ``stop``: the run's, checked
        before every action (a signal the run deferred stops an Atari evaluation of minutes at once)."""
        cfg, env = self.cfg, self._env()
        returns, successes = [], []
        rng = np.random.default_rng(np.random.SeedSequence([cfg.seed, seed_step, 0xE7A1]))
        for _ in range(cfg.train.eval_episodes):
            obs, _ = env.reset()
            total, done, info = 0.0, False, {}
            while not done:
                stop.check()
                action = agent.act(obs, cfg.train.eval_eps, rng)
                obs, reward, terminated, truncated, info = env.step(action)
                total += float(reward)
                done = terminated or truncated
            returns.append(total)
            if "is_success" in info:
                successes.append(float(info["is_success"]))
        self.return_mean, self.return_std = float(np.mean(returns)), float(np.std(returns))
        scalars = {"eval/return": self.return_mean, "eval/return_std": self.return_std}
        if successes:
            self.success_rate = float(np.mean(successes))
            scalars["eval/success_rate"] = self.success_rate
        return scalars

    def _env(self) -> gym.Env:
        if self.env is None:
            self.env = make_env(self.cfg.env, self.cfg.seed + EVAL_SEED_OFFSET, evaluation=True)
        return self.env

    def close(self) -> None:
        if self.env is not None:
            self.env.close()

    def state_dict(self) -> dict[str, Any]:
        return {
            "env": snapshot_env(self.env),
            "return_mean": self.return_mean,
            "return_std": self.return_std,
            "success_rate": self.success_rate,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state["env"] is not None:
            restore_env(self._env(), state["env"])
        self.return_mean, self.return_std = state["return_mean"], state["return_std"]
        self.success_rate = state["success_rate"]
