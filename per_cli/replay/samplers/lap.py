"""``lap``: Loss-Adjusted Prioritized replay (Fujimoto, Meger & Precup 2020), on the prioritized kind's sum tree.

P(i) ∝ max(|δ_i|, κ)^α (κ = ``replay.min_priority``) with no IS correction: with its loss (:mod:`per_cli.rl.losses`)
the expected gradient is PAL's under uniform sampling (kind ``pal``). Unlike the authors' code, draws are
stratified and new transitions enter at the largest priority held, as in every prioritized kind here."""

from __future__ import annotations

import numba
import numpy as np

from per_cli.replay.kind_spec import KindSpec
from per_cli.replay.sampler import DRAWN
from per_cli.replay.samplers.prioritized import PrioritizedSampler, draw_prioritized
from per_cli.replay.samplers.uniform import UniformSampler


@numba.njit(cache=True, nogil=True)
def draw_lap(generators, counters, windows, trees, offsets, marks, eps, alphas, floors, which, betas, slots, weights):
    """``draw_prioritized``'s batch of each member, with every IS weight 1 (LAP corrects nothing)."""
    status = draw_prioritized(
        generators, counters, windows, trees, offsets, marks, eps, alphas, floors, which, betas, slots, weights
    )  # fmt: skip
    for k in range(which.shape[0]):
        if status[k] == DRAWN:
            weights[k] = 1.0
    return status


class LAPSampler(PrioritizedSampler):
    """Priorities max(|δ|, κ)^α on the sum tree, draws ∝ priority, IS weights 1."""

    draw_members = staticmethod(draw_lap)

    def __init__(self, storage, rng: np.random.Generator, alpha: float = 0.6, min_priority: float = 0.01,
                 window: int | None = None):  # fmt: skip
        if not min_priority > 0:
            raise ValueError(f"replay.min_priority must be > 0, got {min_priority}")
        super().__init__(storage, rng, alpha=alpha, eps=0.0, window=window)
        self.floor = float(min_priority)


# each with its own loss (per_cli/rl/losses.py); α: the authors' discrete value (β unused: no IS weights)
LAP = KindSpec(
    "lap", LAPSampler, loss="lap", takes_chunks=True, priority_defaults=(0.6, 0.4),
    factory=lambda cfg, storage, rng, params: LAPSampler(storage, rng, cfg.alpha, cfg.min_priority, cfg.window),
)  # fmt: skip
PAL = KindSpec("pal", UniformSampler, loss="pal", takes_chunks=True, priority_defaults=(0.6, 0.4))
