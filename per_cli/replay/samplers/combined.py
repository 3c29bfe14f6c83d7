"""``combined``: uniform plus the newest transitions (Zhang & Sutton 2017)."""

from __future__ import annotations

import numpy as np

from per_cli.replay.samplers.base import ones
from per_cli.replay.samplers.uniform import UniformSampler


class CombinedSampler(UniformSampler):
    """Uniform plus the latest transition in every batch (Zhang & Sutton 2017): B-1 slots uniformly
    without replacement from the others, then the latest one last."""

    def sample(self, batch_size: int, beta: float) -> tuple[np.ndarray, np.ndarray]:
        latest = self.storage.latest_slot
        others = self._uniform_slots(batch_size - 1, exclude=latest)
        return np.append(others, latest), ones(batch_size)
