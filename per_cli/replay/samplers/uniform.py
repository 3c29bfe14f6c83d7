"""``uniform``: uniform without replacement over the stored transitions, or over the ``window`` newest."""

from __future__ import annotations

import numba
import numpy as np

from per_cli.replay.kind_spec import KindSpec
from per_cli.replay.sampler import DRAWN, TOO_FEW, Sampler, candidate_ids, draw_distinct


@numba.njit(cache=True, nogil=True)
def draw_uniform(generators, counters, windows, which, betas, slots, weights):
    """For k in range(len(which)): member ``which[k]``'s batch, uniform without replacement over its candidate
    ids (:func:`candidate_ids`), weights 1. TOO_FEW where the candidates are fewer than the batch."""
    batch = slots.shape[1]
    status = np.full(which.shape[0], DRAWN, dtype=np.int8)
    positions = np.empty(batch, dtype=np.int64)
    for k in range(which.shape[0]):
        i = which[k]
        c = counters[i]
        lo, n = candidate_ids(c, windows[i])
        if n < batch:
            status[k] = TOO_FEW
            continue
        draw_distinct(generators[i], n, batch, positions)
        for j in range(batch):
            slots[k, j] = (lo + positions[j]) % c.capacity
            weights[k, j] = 1.0
    return status


class UniformSampler(Sampler):
    """Uniform without replacement over the sampleable transitions (only the ``window`` newest, if set); IS
    weights are ones. The sampleable ids are a range, so a draw is ``draw_distinct`` over the candidates' positions:
    no slot is drawn and then refused."""

    draw_members = staticmethod(draw_uniform)

    def expected_counts(self, batch_size: int) -> np.ndarray:
        """B / n for each of the n candidates."""
        lo, n = self.candidates()
        counts = np.zeros(self.storage.capacity)
        counts[(lo + np.arange(n)) % self.storage.capacity] = batch_size / n
        return counts


UNIFORM = KindSpec("uniform", UniformSampler, takes_chunks=True, colour="#1f77b4")
