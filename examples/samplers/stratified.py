"""``stratified``: uniform replay with less sampling noise - one transition from each of B equal slices of the
candidates, oldest slice first (a user's sampler, docs/extending.md).

Every candidate still enters a batch with probability B / n, as under ``uniform``, but a batch can no longer
bunch up in one region of the memory: it always spans the memory's whole age range. So it keeps uniform's
marginal and removes the age variance between batches, the kind of single-factor change the causal study asks
for (is it the batch's spread of ages or its mean that matters?).

Use it with ``plugins: [examples/samplers/stratified.py]`` and ``replay.kind: stratified`` in a config, or
``--set plugins=[examples/samplers/stratified.py] --set replay.kind=stratified``.
"""

import numba
import numpy as np

from per_cli.replay import KindSpec, register_kind
from per_cli.replay.sampler import DRAWN, TOO_FEW, Sampler, candidate_ids


@numba.njit(cache=True, nogil=True)
def draw_stratified(generators, counters, windows, which, betas, slots, weights):
    """For k in range(len(which)): member ``which[k]``'s batch, position j uniform over slice j of its candidate
    ids (slice j: positions ``j n // B .. (j+1) n // B - 1``); weights 1. TOO_FEW where fewer than B."""
    batch = slots.shape[1]
    status = np.full(which.shape[0], DRAWN, dtype=np.int8)
    for k in range(which.shape[0]):
        i = which[k]
        c, generator = counters[i], generators[i]
        lo, n = candidate_ids(c, windows[i])
        if n < batch:
            status[k] = TOO_FEW
            continue
        for j in range(batch):
            first, end = j * n // batch, (j + 1) * n // batch
            slots[k, j] = (lo + first + generator.integers(0, end - first)) % c.capacity
            weights[k, j] = 1.0
    return status


class StratifiedSampler(Sampler):
    """One uniform draw per slice of the candidates (the ``window`` newest, if set); IS weights are ones."""

    draw_members = staticmethod(draw_stratified)

    def expected_counts(self, batch_size: int) -> np.ndarray:
        """Each slot's expected count in the next batch: 1 / (its slice's size)."""
        lo, n = self.candidates()
        counts = np.zeros(self.storage.capacity)
        for j in range(batch_size):
            first, end = j * n // batch_size, (j + 1) * n // batch_size
            counts[(lo + np.arange(first, end)) % self.storage.capacity] = 1.0 / (end - first)
        return counts


# takes_chunks: candidate_ids leaves out the newest ids no run may start at
register_kind(KindSpec("stratified", StratifiedSampler, takes_chunks=True))
