"""``uniform``: uniform without replacement over the stored transitions, or over the ``window`` newest."""

from __future__ import annotations

import numpy as np

from per_cli.replay.samplers.base import Sampler, Storage, ones

_NONE = np.zeros(0, dtype=np.int64)


class UniformSampler(Sampler):
    """Uniform without replacement over the sampleable transitions; IS weights are ones.

    ``window`` W (``replay.window``): only the W most recent transitions are candidates; None (or W >= the
    number held) is the whole memory. Candidates are numbered by *position* 0 .. n-1 and a position maps to
    the slot ``(start + position) % capacity``: the whole memory is ``start = 0, n = size`` (position =
    slot, the draws of the unwindowed sampler), a window is ``start = cursor - W, n = W`` (oldest first)."""

    def __init__(self, storage: Storage, rng: np.random.Generator, window: int | None = None):
        super().__init__(storage, rng)
        if window is not None and window < 1:
            raise ValueError(f"replay.window must be >= 1 or None, got {window}")
        self.window = window

    def sample(self, batch_size: int, beta: float) -> tuple[np.ndarray, np.ndarray]:
        return self._uniform_slots(batch_size), ones(batch_size)

    def candidates(self) -> tuple[int, int]:
        """(start, n): the candidate positions 0 .. n-1 are slots ``(start + position) % capacity``."""
        size = self.storage.size
        if self.window is None or self.window >= size:
            return 0, size
        return self.storage.cursor - self.window, self.window

    def _uniform_slots(self, count: int, exclude: np.ndarray = _NONE) -> np.ndarray:
        """``count`` distinct sampleable candidate slots, uniformly, none of the (sorted, distinct, in range)
        candidate *positions* ``exclude``."""
        start, n = self.candidates()
        positions = self.rng.choice(n - exclude.size, size=count, replace=False)
        if exclude.size:  # skip the excluded positions: the r-th free position is r + #excluded at or below it
            positions += np.searchsorted(exclude - np.arange(exclude.size), positions, side="right")
        slots = (start + positions) % self.storage.capacity if start else positions
        if self.storage.filled_slots_sampleable:  # candidates are filled slots
            return slots
        ok = self.storage.sampleable(slots)
        if ok.all():
            return slots.astype(np.int64)
        return self._redraw(positions, ok, count, exclude, start, n)

    def _redraw(self, positions, ok, count: int, exclude: np.ndarray, start: int, n: int) -> np.ndarray:
        """Continue the random order past the first ``count`` draws until ``count`` sampleable slots are
        found: uniform without replacement over the sampleable candidates."""
        capacity = self.storage.capacity
        seen = set(positions.tolist())
        excluded = set(exclude.tolist())
        kept = ((start + positions[ok]) % capacity).tolist()
        while len(kept) < count:
            if len(seen) + len(excluded) >= n:
                raise ValueError(f"only {len(kept)} sampleable transitions, {count} were asked for")
            candidate = int(self.rng.integers(n))
            if candidate in seen or candidate in excluded:
                continue
            seen.add(candidate)
            slot = (start + candidate) % capacity
            if self.storage.sampleable(np.array([slot]))[0]:
                kept.append(slot)
        return np.asarray(kept, dtype=np.int64)
