"""``combined``: uniform plus the newest transitions (Zhang & Sutton 2017), under any update schedule."""

from __future__ import annotations

import numpy as np

from per_cli.replay.samplers.base import ones
from per_cli.replay.samplers.uniform import UniformSampler


class CombinedSampler(UniformSampler):
    """Combined experience replay (Zhang & Sutton 2017): every transition enters a batch once as soon as it
    is stored, the rest of each batch is uniform.

    The paper does one update per env step, so the newest transition is in the next batch and in that one
    only. Under ``train_freq`` F and ``gradient_steps`` G (a *phase* of G batches every F steps, announced by
    ``begin_phase(G)``) the same promise is kept: the transitions stored since the previous phase are
    spread over the phase's G batches, each in exactly one; batch j gets ids ``new[j*m//G : (j+1)*m//G]``
    of the m new ones, oldest first, so the counts differ by at most one and, when m < G, the batches
    without a new transition are plain uniform. More than G·B new transitions cannot all fit: the newest
    G·B are placed (every batch then is all new), and with a ``window`` only those inside it. At the first
    phase the memory holds the warm-up transitions, none of them due to a phase: the newest G count as new.
    The rest of a batch is drawn uniformly without replacement from the candidates (the ``window`` newest,
    if set) other than the phase's new ones, so each of those is in exactly one batch of the phase (unless
    a window leaves too few others; then only the batch's own are left out); the new ones come last. With
    F = G = 1 this is exactly the paper's: B-1 uniform, then the latest.

    Outside a phase (no ``begin_phase`` call, or more than G samples) a batch holds the latest transition.
    """

    def __init__(self, storage, rng: np.random.Generator, window: int | None = None):
        super().__init__(storage, rng, window)
        self.placed = -1  # ids below this were due to an earlier phase; -1: no phase yet
        self.phase = np.zeros(4, dtype=np.int64)  # new ids [from, to), batches, batches drawn

    def begin_phase(self, n_batches: int) -> None:
        added = self.storage.added
        first = added - min(n_batches, added) if self.placed < 0 else self.placed
        first = max(first, self.storage.oldest_sampleable_id())
        if self.window is not None:  # only candidates are placed: new ones older than the window are not
            first = max(first, added - self.window)
        self.phase[:] = (first, added, n_batches, 0)
        self.placed = added

    def sample(self, batch_size: int, beta: float) -> tuple[np.ndarray, np.ndarray]:
        new, placed = self._new_slots(batch_size)
        start, n = self.candidates()
        if n - placed.size < batch_size - new.size:  # a window too small to leave the phase's new ones out
            placed = new
        exclude = np.sort((placed - start) % self.storage.capacity)  # positions of the phase's new ones
        others = self._uniform_slots(batch_size - new.size, exclude=exclude)
        return np.concatenate([others, new]), ones(batch_size)

    def _new_slots(self, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
        """The slots of the new transitions this batch carries (oldest first), and those of all the new
        transitions of the phase (which the uniform part leaves out: each enters exactly one batch)."""
        first, upto, batches, drawn = (int(v) for v in self.phase)
        if drawn >= batches:
            latest = np.array([self.storage.latest_slot], dtype=np.int64)
            return latest, latest
        self.phase[3] += 1
        first = max(first, upto - batches * batch_size)
        m = upto - first
        capacity = self.storage.capacity
        ids = np.arange(first + drawn * m // batches, first + (drawn + 1) * m // batches, dtype=np.int64)
        return ids % capacity, np.arange(first, upto, dtype=np.int64) % capacity

    def state_dict(self) -> dict:
        return {"placed": self.placed, "phase": self.phase.copy()}

    def load_state_dict(self, state: dict) -> None:
        if state:
            self.placed = int(state["placed"])
            self.phase[:] = state["phase"]
