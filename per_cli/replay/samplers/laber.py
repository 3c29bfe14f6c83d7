"""``laber``: Large Batch Experience Replay (Lahire, Geist and Rachelson, ICML 2022), its LaBER-mean variant.

Each step draws m · B transitions uniformly with replacement; the loop scores them with the current networks
(``KindSpec.scores``) and :meth:`LaBERSampler.scored` draws B of them ∝ p_i = |δ_i| + ε with IS weights
mean_j(p_j) / p_i, which keep the gradient a uniform batch's in expectation. Priorities are always fresh: nothing
is stored between steps. ``replay.params.m`` is the multiple, ``replay.priority_eps`` ε."""

from __future__ import annotations

from dataclasses import dataclass, field

import numba
import numpy as np

from per_cli.replay.integers import uniform_integer
from per_cli.replay.kind_spec import KindSpec
from per_cli.replay.kinds import register_kind
from per_cli.replay.sampler import DRAWN, TOO_FEW, Storage, candidate_ids
from per_cli.replay.samplers.uniform import UniformSampler


@dataclass(frozen=True)
class LaBERParams:
    """``replay.params`` of kind ``laber``."""

    m: int = field(default=4, metadata={"lo": 1, "hi": 1024})  # the large batch is m · replay.batch_size


@numba.njit(cache=True, nogil=True)
def draw_large(generators, counters, windows, which, betas, slots, weights):
    """For k in range(len(which)): member ``which[k]``'s large batch, uniform with replacement over its candidate
    ids (``sampler.candidate_ids``), weights 1. TOO_FEW where it holds no candidate."""
    status = np.full(which.shape[0], DRAWN, dtype=np.int8)
    for k in range(which.shape[0]):
        i = which[k]
        c = counters[i]
        lo, n = candidate_ids(c, windows[i])
        if n < 1:
            status[k] = TOO_FEW
            continue
        for j in range(slots.shape[1]):
            slots[k, j] = (lo + uniform_integer(generators[i], 0, n)) % c.capacity
            weights[k, j] = 1.0
    return status


@numba.njit(cache=True, nogil=True)
def sub_draw(generators, which, td, eps, positions, weights):
    """Row k: B positions into member ``which[k]``'s large batch drawn with replacement ∝ |δ| + ``eps``, each with
    the IS weight mean(|δ| + eps) / (|δ_i| + eps) (LaBER-mean), from the member's own generator."""
    large = td.shape[1]
    cumulative = np.empty(large, dtype=np.float64)
    for k in range(which.shape[0]):
        generator = generators[which[k]]
        total = 0.0
        for j in range(large):
            total += abs(td[k, j]) + eps
            cumulative[j] = total
        mean = total / large
        for b in range(positions.shape[1]):
            u = generator.random() * total  # the first j whose cumulative mass exceeds u (the last, at most)
            lo = min(np.searchsorted(cumulative, u, side="right"), large - 1)
            positions[k, b] = lo
            weights[k, b] = mean / (abs(td[k, lo]) + eps)


class LaBERSampler(UniformSampler):
    """The large batch (``draw_members``: uniform with replacement, within ``replay.window``; ``expected_counts``
    the uniform kind's), then the sub-draw from the networks' scores (``scored``). Keeps no priorities."""

    draw_members = staticmethod(draw_large)

    def __init__(self, storage: Storage, rng: np.random.Generator, eps: float, window: int | None, params: LaBERParams):
        super().__init__(storage, rng, window)
        self.eps, self.multiple = float(eps), params.m

    @classmethod
    def scored(cls, lists, which, ids, scores):
        first, *_ = lists.samplers  # (one config: one m and one ε for every member)
        batch = ids.shape[1] // first.multiple
        positions = np.empty((which.shape[0], batch), dtype=np.int64)
        weights = np.empty((which.shape[0], batch), dtype=np.float32)
        sub_draw(lists.generators, which, scores.td, first.eps, positions, weights)
        return positions, weights


register_kind(
    KindSpec(
        "laber", LaBERSampler, params=LaBERParams, scores=True, colour="#17becf",
        factory=lambda cfg, storage, rng, params: LaBERSampler(storage, rng, cfg.priority_eps, cfg.window, params),
    )
)  # fmt: skip
