"""``combined``: uniform plus the newest transitions (Zhang & Sutton 2017), under any update schedule."""

from __future__ import annotations

import numba
import numpy as np

from per_cli.replay.kind_spec import KindSpec
from per_cli.replay.records import counters_dtype, new_counters
from per_cli.replay.sampler import DRAWN, TOO_FEW, candidate_ids, draw_distinct
from per_cli.replay.samplers.recent import RecentSampler
from per_cli.replay.samplers.uniform import UniformSampler

# a member's phase: its new ids [new_from, new_to), batches in it, batches drawn
COMBINED_PHASE = counters_dtype("new_from", "new_to", "batches", "taken")


@numba.njit(cache=True, nogil=True)
def draw_combined(generators, counters, windows, phases, which, betas, slots, weights):
    """For k in range(len(which)): member ``which[k]``'s batch: the new ids this batch carries (its phase
    ``phases[i]``), last; before them the rest uniform without replacement
    over the candidate ids other than the phase's new ones (only the batch's own where too few are left); weights
    1. TOO_FEW where the candidates cannot fill the batch."""
    batch = slots.shape[1]
    status = np.full(which.shape[0], DRAWN, dtype=np.int8)
    positions = np.empty(batch, dtype=np.int64)
    for k in range(which.shape[0]):
        i = which[k]
        c, phase = counters[i], phases[i]
        first, upto, batches, drawn = phase.new_from, phase.new_to, phase.batches, phase.taken
        if drawn >= batches:  # outside a phase: the latest transition
            new_lo, new_hi = c.added - 1, c.added
            placed_lo, placed_hi = new_lo, new_hi
        else:
            first = max(first, upto - batches * batch)
            m = upto - first
            new_lo, new_hi = first + drawn * m // batches, first + (drawn + 1) * m // batches
            placed_lo, placed_hi = first, upto
        lo, n = candidate_ids(c, windows[i])
        count = batch - (new_hi - new_lo)
        if n - (placed_hi - placed_lo) < count:  # too few others: leave out only the batch's own
            placed_lo, placed_hi = new_lo, new_hi
        if n - (placed_hi - placed_lo) < count:
            status[k] = TOO_FEW
            continue
        if drawn < batches:
            phase.taken = drawn + 1
        draw_distinct(generators[i], n - (placed_hi - placed_lo), count, positions)
        for j in range(count):  # skip the placed ids: positions at or above them move past them
            tid = lo + positions[j]
            if tid >= placed_lo:
                tid += placed_hi - placed_lo
            slots[k, j] = tid % c.capacity
        for j in range(new_hi - new_lo):
            slots[k, count + j] = (new_lo + j) % c.capacity
        for j in range(batch):
            weights[k, j] = 1.0
    return status


class CombinedSampler(UniformSampler):
    """Combined experience replay (Zhang & Sutton 2017): every transition enters a batch once as soon as it is stored,
    the rest of each batch is uniform without replacement. In a phase of G batches (``begin_phase(G)``) the m new
    transitions are spread oldest first, batch j taking ``new[j*m//G : (j+1)*m//G]`` (at most the newest G·B); with
    F = G = 1 this is the paper's rule. Outside a phase a batch holds the latest transition."""

    draw_members = staticmethod(draw_combined)
    member_lists = RecentSampler.__dict__["member_lists"]  # (its phase counters, as the ``none`` kind's)

    def __init__(self, storage, rng: np.random.Generator, window: int | None = None):
        super().__init__(storage, rng, window)
        self.placed = -1  # ids below this were due to an earlier phase; -1: no phase yet
        self.phase = new_counters(COMBINED_PHASE)

    def begin_phase(self, n_batches: int) -> None:
        added = self.storage.added
        first = added - min(n_batches, added) if self.placed < 0 else self.placed
        first = max(first, self.storage.oldest_sampleable_id())
        if self.window is not None:  # only candidates are placed: new ones older than the window are not
            first = max(first, added - self.window)
        self.phase[...] = (first, added, n_batches, 0)
        self.placed = added

    def expected_counts(self, batch_size: int) -> np.ndarray:
        """Outside a phase: the latest once, each other candidate (B - 1) / (n - 1)."""
        lo, n = self.candidates()
        counts = np.zeros(self.storage.capacity)
        counts[(lo + np.arange(n - 1)) % self.storage.capacity] = (batch_size - 1) / (n - 1)
        counts[self.storage.latest_slot] = 1.0
        return counts

    def state_dict(self) -> dict:
        return {"placed": self.placed, "phase": np.array(self.phase.item(), dtype=np.int64)}  # (in field order)

    def load_state_dict(self, state: dict) -> None:
        self.placed = int(state["placed"])
        self.phase[...] = tuple(np.asarray(state["phase"]).tolist())


# (no runs: each new transition enters one batch, and runs would repeat them)
COMBINED = KindSpec("combined", CombinedSampler, colour="#2ca02c")
