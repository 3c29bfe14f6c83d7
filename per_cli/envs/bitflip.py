"""Bit flipping (Andrychowicz et al. 2017, section 3.1): the goal-conditioned task hindsight replay was made for."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from per_cli.envs.goals import GoalLayout


class BitFlipEnv(gym.Env):
    metadata = {"render_modes": []}

    def __init__(self, n_bits: int = 10):
        if n_bits < 1:
            raise ValueError(f"env.n_bits must be >= 1, got {n_bits}")
        self.n_bits = n_bits
        self.observation_space = gym.spaces.Box(0.0, 1.0, (2 * n_bits,), np.float32)
        self.action_space = gym.spaces.Discrete(n_bits)
        self._state = np.zeros(n_bits, dtype=np.float32)
        self._goal = np.zeros(n_bits, dtype=np.float32)
        self._steps = 0

    def _obs(self) -> np.ndarray:
        return np.concatenate([self._state, self._goal])

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        n = self.n_bits
        self._state = self.np_random.integers(0, 2, n).astype(np.float32)
        # a goal different from the start: an episode that is over before it begins teaches nothing
        while True:
            self._goal = self.np_random.integers(0, 2, n).astype(np.float32)
            if not np.array_equal(self._goal, self._state):
                break
        self._steps = 0
        return self._obs(), {"is_success": False}

    def step(self, action):
        action = int(action)
        if not 0 <= action < self.n_bits:
            raise ValueError(f"action {action} is outside 0..{self.n_bits - 1}")
        self._state[action] = 1.0 - self._state[action]
        self._steps += 1
        success = bool(np.array_equal(self._state, self._goal))
        reward = 0.0 if success else -1.0
        truncated = not success and self._steps >= self.n_bits
        return self._obs(), reward, success, truncated, {"is_success": success}

    @staticmethod
    def compute_reward(achieved_goal: np.ndarray, desired_goal: np.ndarray, info=None) -> np.ndarray:
        """``-[achieved != desired]`` along the last axis (vectorised, as Gymnasium-Robotics' GoalEnv)."""
        return -np.any(achieved_goal != desired_goal, axis=-1).astype(np.float32)

    def goal_layout(self) -> GoalLayout:
        n = self.n_bits
        return GoalLayout(
            achieved=slice(0, n),
            desired=slice(n, 2 * n),
            compute_reward=self.compute_reward,
            terminate_on_success=True,
        )
