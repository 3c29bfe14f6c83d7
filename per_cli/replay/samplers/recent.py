"""``none``: no replay, the most recent transitions (the correlated baseline), under any update schedule."""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from per_cli.replay.kind_spec import KindSpec
from per_cli.replay.records import counters_dtype, new_counters
from per_cli.replay.sampler import DRAWN, TOO_FEW, Sampler
from per_cli.replay.storage.ring import member_axis, oldest_id

RECENT_PHASE = counters_dtype("batches", "taken")  # a member's phase: batches in the burst, batches drawn in it


@numba.njit(cache=True, nogil=True)
def draw_recent(generators, counters, windows, phases, which, betas, slots, weights):
    """For k in range(len(which)): member ``which[k]``'s batch, block ``drawn % max(held // B, 1)`` of B ids
    walking back from the newest (its phase ``phases[i]``'s ``taken`` advanced), oldest first,
    weights 1. TOO_FEW where fewer than B transitions are sampleable."""
    batch = slots.shape[1]
    status = np.full(which.shape[0], DRAWN, dtype=np.int8)
    for k in range(which.shape[0]):
        i = which[k]
        c, phase = counters[i], phases[i]
        held = c.added - oldest_id(c)
        if held < batch:
            status[k] = TOO_FEW
            continue
        drawn = phase.taken
        phase.taken = (drawn + 1) % phase.batches
        start = c.added - (drawn % (held // batch) + 1) * batch
        for j in range(batch):
            slots[k, j] = (start + j) % c.capacity
            weights[k, j] = 1.0
    return status


class PhaseLists(NamedTuple):
    """A phase-planning kind's state over the seed axis: each member's phase counters."""

    phases: np.ndarray  # (S,) of the kind's phase dtype (RECENT_PHASE, combined's COMBINED_PHASE)


class RecentSampler(Sampler):
    """The most recent transitions, oldest first within a batch: the correlated no-replay baseline (kind ``none``).
    Batch j of a phase of G (``begin_phase(G)``) is the j-th block of B walking back from the newest, so G updates
    do not repeat one batch; the walk restarts from the newest when fewer than G·B are held. Outside a phase every
    batch is the newest B."""

    draw_members = staticmethod(draw_recent)

    def __init__(self, storage, rng: np.random.Generator):
        super().__init__(storage, rng)
        self.phase = new_counters(RECENT_PHASE, batches=1)

    @classmethod
    def member_lists(cls, samplers: list[Sampler]) -> PhaseLists:
        return PhaseLists(member_axis(samplers, "phase"))

    def expected_counts(self, batch_size: int) -> np.ndarray:
        """Outside a phase: the newest B once each."""
        counts = np.zeros(self.storage.capacity)
        counts[(self.storage.added - 1 - np.arange(batch_size)) % self.storage.capacity] = 1.0
        return counts

    def begin_phase(self, n_batches: int) -> None:
        self.phase[...] = (n_batches, 0)


# (no window, no runs: its batch is already the newest run of B)
NONE = KindSpec("none", RecentSampler, factory=lambda cfg, storage, rng, params: RecentSampler(storage, rng),
                colour="#7f7f7f")  # fmt: skip
