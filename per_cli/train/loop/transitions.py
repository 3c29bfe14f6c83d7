"""What the learner stores of an env step: the env's reward and flags, or the rules ``env.done_reward``,
``env.done_reward_except_return`` and ``env.truncation_terminates`` (the seed notebook's ``reward = -10`` at a
``done`` unless ``score == 499``, and its ``done`` stored as terminal).

Not an env wrapper: the rules change what the *learner* sees, never the env, so logged returns and evaluation stay
on the env's scale, and one rule serves every path that stores a transition."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class StoreRule:
    """How an env step becomes the stored (reward, terminated) pair.

    ``done_reward`` (None: the env's reward) replaces the reward of a step that ends an episode, unless the episode's
    return before it equals ``except_return`` exactly; ``truncation_terminates`` stores a truncated step as terminated
    (no bootstrap). The truncated flag is stored unchanged (episode boundaries are the env's)."""

    done_reward: float | None = None
    except_return: float | None = None
    truncation_terminates: bool = False

    @property
    def identity(self) -> bool:
        """Whether every step is stored as the env gave it (then callers skip the rule: no cost by default)."""
        return self.done_reward is None and not self.truncation_terminates

    def many(
        self, rewards: np.ndarray, terminated: np.ndarray, truncated: np.ndarray, returns_before: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """(stored rewards, stored terminated) of a step of several members (row k: member k; ``returns_before``:
        each one's return in this episode before the step), as new arrays of the inputs' dtypes."""
        rewards = rewards.copy()
        ended = np.logical_or(terminated, truncated)
        if self.done_reward is not None:
            given = ended if self.except_return is None else ended & (returns_before != self.except_return)
            rewards[given] = self.done_reward
        stored = ended if self.truncation_terminates else terminated
        return rewards, np.asarray(stored, dtype=terminated.dtype).copy()
