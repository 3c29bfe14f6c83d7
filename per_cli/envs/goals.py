"""Where the goals sit in a goal-conditioned env's flat observation (the contract hindsight relabelling
reads; ``per_cli/replay/writers/hindsight.py``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


def all_equal(achieved: np.ndarray, desired: np.ndarray) -> np.ndarray:
    return np.all(achieved == desired, axis=-1)


@dataclass(frozen=True)
class GoalLayout:
    """Where the goals sit in a flat observation, and the env's reward for any goal."""

    achieved: slice  # the achieved goal inside an observation (for bit flipping: the state)
    desired: slice  # the desired goal inside an observation
    compute_reward: Callable[[np.ndarray, np.ndarray], np.ndarray]
    terminate_on_success: bool = True
    compute_success: Callable[[np.ndarray, np.ndarray], np.ndarray] = all_equal
