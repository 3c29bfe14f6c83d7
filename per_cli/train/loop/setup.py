"""What a run needs before its loop: the device, the run's default name, whether the env reports its own
episodes, and the progress sink's face."""

from __future__ import annotations

import time
from typing import Any, Protocol

import gymnasium as gym
import torch

from per_cli.config import Config
from per_cli.envs import env_label
from per_cli.errors import ConfigError
from per_cli.replay import replay_label


class ProgressSink(Protocol):
    def update(self, step: int, info: dict[str, Any]) -> None: ...


class NoProgress:
    def update(self, step: int, info: dict[str, Any]) -> None:
        pass


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device: cuda was asked for but no CUDA GPU is visible; use --device cpu or auto")
    return torch.device(name)


def default_run_name(cfg: Config) -> str:
    return f"{env_label(cfg.env.id)}__{replay_label(cfg.replay)}__s{cfg.seed}__{time.strftime('%Y%m%d-%H%M%S')}"


def reports_episodes(env: gym.Env) -> bool:
    """True when a RecordEpisodeStatistics wrapper sits in the chain (Atari: under the life-loss wrapper,
    so only whole games are reported); otherwise the loop counts returns itself."""
    while isinstance(env, gym.Wrapper):
        if isinstance(env, gym.wrappers.RecordEpisodeStatistics):
            return True
        env = env.env
    return False
