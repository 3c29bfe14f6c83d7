"""``uniform``: uniform without replacement over the stored transitions."""

from __future__ import annotations

import numpy as np

from per_cli.replay.samplers.base import Sampler, Storage, ones


class UniformSampler(Sampler):
    """Uniform without replacement over the sampleable transitions; IS weights are ones."""

    def __init__(self, storage: Storage, rng: np.random.Generator):
        super().__init__(storage, rng)

    def sample(self, batch_size: int, beta: float) -> tuple[np.ndarray, np.ndarray]:
        return self._uniform_slots(batch_size), ones(batch_size)

    def _uniform_slots(self, count: int, exclude: int = -1) -> np.ndarray:
        """``count`` distinct sampleable slots in ``0 .. size-1`` other than ``exclude``, uniformly."""
        size = self.storage.size - (exclude >= 0)
        slots = self.rng.choice(size, size=count, replace=False)
        if exclude >= 0:
            slots[slots >= exclude] += 1  # skip the excluded slot
        ok = self.storage.sampleable(slots)
        if ok.all():
            return slots.astype(np.int64)
        return self._redraw(slots, ok, count, exclude)

    def _redraw(self, slots: np.ndarray, ok: np.ndarray, count: int, exclude: int) -> np.ndarray:
        """Continue the random order past the first ``count`` draws until ``count`` sampleable slots are
        found: uniform without replacement over the sampleable slots."""
        seen = set(slots.tolist())
        kept = slots[ok].tolist()
        size = self.storage.size
        while len(kept) < count:
            if len(seen) + (exclude >= 0) >= size:
                raise ValueError(f"only {len(kept)} sampleable transitions, {count} were asked for")
            candidate = int(self.rng.integers(size))
            if candidate in seen or candidate == exclude:
                continue
            seen.add(candidate)
            if self.storage.sampleable(np.array([candidate]))[0]:
                kept.append(candidate)
        return np.asarray(kept, dtype=np.int64)
