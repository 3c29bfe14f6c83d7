"""The training loop's counters: what a checkpoint carries so that a resumed run continues exactly, and
the per-episode bookkeeping behind the progress line and the summary."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

FINAL_RETURN_WINDOW = 20  # the summary's final_return_mean: the mean over this many last training episodes


def _window() -> deque:
    return deque(maxlen=FINAL_RETURN_WINDOW)


@dataclass
class LoopState:
    step: int = 0  # env steps taken (the position of the ε and β schedules)
    episode: int = 0  # episodes finished
    episode_return: float = 0.0  # of the episode in progress
    episode_length: int = 0
    recent_returns: deque = field(default_factory=_window)
    recent_successes: deque = field(default_factory=_window)  # goal envs (info["is_success"]) only
    target_syncs: int = 0  # target-network copies (period and episode-end syncs alike)

    def finish_episode(self, ep_return: float, success: float | None) -> None:
        """Count a finished episode and start the next one."""
        self.episode += 1
        self.recent_returns.append(ep_return)
        if success is not None:
            self.recent_successes.append(float(success))
        self.episode_return, self.episode_length = 0.0, 0

    @property
    def recent_return_mean(self) -> float | None:
        return float(np.mean(self.recent_returns)) if self.recent_returns else None

    @property
    def recent_success_rate(self) -> float | None:
        return float(np.mean(self.recent_successes)) if self.recent_successes else None

    def state_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "episode": self.episode,
            "episode_return": self.episode_return,
            "episode_length": self.episode_length,
            "recent_returns": list(self.recent_returns),
            "recent_successes": list(self.recent_successes),
            "target_syncs": self.target_syncs,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.step, self.episode = int(state["step"]), int(state["episode"])
        self.episode_return, self.episode_length = state["episode_return"], state["episode_length"]
        self.recent_returns = _window()
        self.recent_returns.extend(state["recent_returns"])
        self.recent_successes = _window()
        self.recent_successes.extend(state["recent_successes"])
        self.target_syncs = int(state["target_syncs"])
