"""The Blind Cliffwalk (Schaul et al. 2016, section 3.1 and appendix B.1)."""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym
import numpy as np


@dataclass(frozen=True)
class CliffwalkTransitions:
    """The replay memory of the experiment, one row per transition (duplicates included)."""

    states: np.ndarray  # int64
    actions: np.ndarray  # int64
    rewards: np.ndarray  # float64
    next_states: np.ndarray  # int64; for terminal transitions the state itself (never bootstrapped from)
    terminated: np.ndarray  # bool

    def __len__(self) -> int:
        return len(self.states)


class BlindCliffwalk:
    """The MDP with ``n`` states, discounted by the paper's ``gamma = 1 - 1/n``."""

    n_actions = 2

    def __init__(self, n: int):
        if n < 1:
            raise ValueError(f"the Blind Cliffwalk needs n >= 1 states, got {n}")
        self.n = n
        self.gamma = 1.0 - 1.0 / n

    @staticmethod
    def right_action(state: int | np.ndarray) -> int | np.ndarray:
        """The action that moves on from ``state`` (it alternates: 0, 1, 0, 1, ...)."""
        return state % 2

    def step(self, state: int, action: int) -> tuple[int, float, bool]:
        """``(next_state, reward, terminated)``; a terminal transition's next state is ``state`` itself."""
        if not 0 <= state < self.n:
            raise ValueError(f"state {state} is outside 0..{self.n - 1}")
        if action != self.right_action(state):
            return state, 0.0, True
        if state == self.n - 1:
            return state, 1.0, True
        return state + 1, 0.0, False

    def true_q(self) -> np.ndarray:
        """Exact Q-values, shape ``(n, 2)``: ``γ^(n-1-s)`` for the right action, 0 for the wrong one."""
        q = np.zeros((self.n, 2))
        states = np.arange(self.n)
        q[states, self.right_action(states)] = self.gamma ** (self.n - 1 - states)
        return q

    def memory_size(self) -> int:
        return 2 ** (self.n + 1) - 2

    def all_sequences(self) -> CliffwalkTransitions:
        """Run each of the ``2^n`` action sequences from state 0 until its episode ends, in the order of the
        sequences' binary codes (bit ``t`` of the code is the action at step ``t``)."""
        n = self.n
        codes = np.arange(2**n, dtype=np.int64)[:, None]
        steps = np.arange(n, dtype=np.int64)[None, :]
        actions = (codes >> steps) & 1  # (2^n, n)
        right = actions == self.right_action(steps)
        # the step at which each sequence's episode ends: its first wrong action, or the last step
        first_wrong = np.where(right.all(axis=1), n - 1, np.argmin(right, axis=1))
        taken = steps <= first_wrong[:, None]  # the steps each sequence actually runs (row-major order kept)
        rows, states = np.nonzero(taken)
        acts = actions[rows, states]
        ok = right[rows, states]
        last = states == n - 1
        terminated = ~ok | last
        rewards = (ok & last).astype(np.float64)
        next_states = np.where(terminated, states, states + 1)
        return CliffwalkTransitions(states, acts, rewards, next_states, terminated)


class BlindCliffwalkEnv(gym.Env):
    """The chain as a Gymnasium env: one-hot observation of the state, ``info['is_success']`` on reaching the
    reward. Every episode starts in state 0."""

    metadata = {"render_modes": []}

    def __init__(self, n_states: int = 8):
        self.mdp = BlindCliffwalk(n_states)
        self.observation_space = gym.spaces.Box(0.0, 1.0, (n_states,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self._state = 0

    def _obs(self) -> np.ndarray:
        obs = np.zeros(self.mdp.n, dtype=np.float32)
        obs[self._state] = 1.0
        return obs

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._state = 0
        return self._obs(), {}

    def step(self, action):
        state, reward, terminated = self.mdp.step(self._state, int(action))
        success = reward > 0
        self._state = state
        return self._obs(), reward, terminated, False, {"is_success": success}
