"""Linear schedules for ε-greedy exploration and the importance-sampling exponent β."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LinearSchedule:
    """``start`` at step 0, moving linearly to ``end`` at ``duration`` steps, then constant."""

    start: float
    end: float
    duration: int

    def __call__(self, step: int) -> float:
        if self.duration <= 0 or step >= self.duration:
            return self.end
        return self.start + (self.end - self.start) * (step / self.duration)

    def many(self, steps: np.ndarray) -> np.ndarray:
        """The values at each of ``steps`` (int64), each the float ``self(step)`` gives (the same float64
        operations, elementwise)."""
        if self.duration <= 0:
            return np.full(steps.shape, self.end)
        moving = self.start + (self.end - self.start) * (steps / self.duration)
        return np.where(steps >= self.duration, self.end, moving)


@dataclass(frozen=True)
class BatchBeta:
    """β by sampled batch (``replay.beta_increment``): batch ``n`` (1, 2, ...) has min(1, ``start`` + n ×
    ``increment``). The rlcode PER memory (the seed notebook's) raises β before each draw, so its first batch has
    β0 + increment; a product instead of its running sum, so a resumed run gets the same β (they differ by
    float rounding only)."""

    start: float
    increment: float

    def __call__(self, n: int) -> float:
        return min(1.0, self.start + n * self.increment)
