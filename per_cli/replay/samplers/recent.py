"""``none``: no replay, the most recent transitions (the correlated baseline)."""

from __future__ import annotations

import numpy as np

from per_cli.replay.samplers.base import Sampler, ones


class RecentSampler(Sampler):
    """The most recent ``batch_size`` transitions, oldest first: the correlated no-replay baseline
    (kind ``none``). Unsampleable slots among them are skipped, reaching further back."""

    def sample(self, batch_size: int, beta: float) -> tuple[np.ndarray, np.ndarray]:
        start = self.storage.cursor - batch_size
        slots = np.arange(start, start + batch_size, dtype=np.int64) % self.storage.capacity
        ok = self.storage.sampleable(slots)
        if not ok.all():
            slots = self._recent_sampleable(batch_size)
        return slots, ones(batch_size)

    def _recent_sampleable(self, batch_size: int) -> np.ndarray:
        back = np.arange(1, self.storage.size + 1, dtype=np.int64)
        newest_first = (self.storage.cursor - back) % self.storage.capacity
        chosen = newest_first[self.storage.sampleable(newest_first)][:batch_size]
        if chosen.size < batch_size:
            raise ValueError(f"only {chosen.size} sampleable transitions, {batch_size} were asked for")
        return chosen[::-1].copy()
