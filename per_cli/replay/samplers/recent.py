"""``none``: no replay, the most recent transitions (the correlated baseline), under any update schedule."""

from __future__ import annotations

import numpy as np

from per_cli.replay.samplers.base import Sampler, ones


class RecentSampler(Sampler):
    """The most recent transitions, oldest first within a batch: the correlated no-replay baseline (kind
    ``none``). Unsampleable slots among them are skipped, reaching further back.

    With one update per env step each batch is the newest B transitions. Under ``gradient_steps`` G (a phase
    of G batches with no add in between, announced by ``begin_phase(G)``) the same batch G times would be
    G updates on one batch; instead batch j of the phase (0-based) is the j-th block of B walking back from
    the newest: transitions ``newest - (j+1)B + 1 .. newest - jB``, disjoint, newest first. When the memory
    holds fewer than G·B transitions the walk starts again from the newest (block j mod ⌊held / B⌋). Outside
    a phase (no ``begin_phase`` call) every batch is the newest B."""

    def __init__(self, storage, rng: np.random.Generator):
        super().__init__(storage, rng)
        self.phase = np.array([1, 0], dtype=np.int64)  # batches in the phase, batches drawn

    def begin_phase(self, n_batches: int) -> None:
        self.phase[:] = (n_batches, 0)

    def sample(self, batch_size: int, beta: float) -> tuple[np.ndarray, np.ndarray]:
        batches, drawn = int(self.phase[0]), int(self.phase[1])
        self.phase[1] = (drawn + 1) % batches
        held = self.storage.added - self.storage.oldest_sampleable_id()
        block = drawn % max(held // batch_size, 1)
        start = self.storage.cursor - (block + 1) * batch_size
        slots = np.arange(start, start + batch_size, dtype=np.int64) % self.storage.capacity
        ok = self.storage.sampleable(slots)
        if not ok.all():
            slots = self._recent_sampleable(batch_size, block)
        return slots, ones(batch_size)

    def _recent_sampleable(self, batch_size: int, block: int) -> np.ndarray:
        back = np.arange(1, self.storage.size + 1, dtype=np.int64)
        newest_first = (self.storage.cursor - back) % self.storage.capacity
        chosen = newest_first[self.storage.sampleable(newest_first)][block * batch_size : (block + 1) * batch_size]
        if chosen.size < batch_size:
            raise ValueError(f"only {chosen.size} sampleable transitions, {batch_size} were asked for")
        return chosen[::-1].copy()
