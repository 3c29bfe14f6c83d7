"""``prioritized``: proportional prioritized replay on the K-ary sum tree (``structures/sum_tree.py``)."""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from per_cli.replay.kind_spec import KindSpec
from per_cli.replay.sampler import DRAWN, FAILED, Sampler, Storage, strata_uniforms
from per_cli.replay.storage.ring import member_axis
from per_cli.replay.structures.sum_tree import MAX, SumTree, set_leaf, stratified_sample, update_current
from per_cli.replay.structures.window_tree import window_sample


@numba.njit(cache=True, nogil=True)
def draw_prioritized(generators, counters, windows, trees, offsets, marks, eps, alphas, floors, which, betas, slots,
                     weights):  # fmt: skip
    """For k in range(len(which)): member ``which[k]``'s batch: one uniform per stratum from its generator, then
    ``stratified_sample`` on its tree, or ``window_sample`` inside its active window, with β = ``betas[k]``.
    FAILED where the structure raised (no mass: ``draw_error`` says so)."""
    batch = slots.shape[1]
    status = np.full(which.shape[0], DRAWN, dtype=np.int8)
    uniforms = np.empty(batch, dtype=np.float64)
    for k in range(which.shape[0]):
        i = which[k]
        c = counters[i]
        lo, width = strata_uniforms(generators[i], c, windows[i], uniforms)
        if width < 0:
            status[k] = FAILED
            continue
        try:
            if width > 0:
                drawn, w = window_sample(trees[i], offsets[i], uniforms, betas[k], lo, width, c.capacity)
            else:
                drawn, w = stratified_sample(trees[i], offsets[i], uniforms, betas[k])
        except Exception:  # noqa: BLE001 - the member's error: draw_error
            status[k] = FAILED
            continue
        slots[k] = drawn
        weights[k] = w
    return status


@numba.njit(cache=True, nogil=True)
def enter_members(trees, offsets, which, slots, entering):
    """Event k, in order: slot ``slots[k]`` of member ``which[k]``'s tree enters at the largest priority held (1
    while none is: Algorithm 1) where ``entering[k]``, else leaves (mass 0)."""
    for k in range(which.shape[0]):
        tree, levels = trees[which[k]], offsets[which[k]]
        top = tree[MAX, levels[levels.shape[0] - 2]]
        set_leaf(tree, levels, slots[k], (top if top > 0.0 else 1.0) if entering[k] else 0.0)


@numba.njit(cache=True, nogil=True)
def update_members(trees, offsets, marks, eps, alphas, floors, stored_ids, which, ids, td_errors):
    """For k in range(len(which)): member ``which[k]``'s ``update_current`` with ids ``ids[k]`` and TD errors
    ``td_errors[k]``. Returns its result per k (False: a non-finite TD error, that member's tree unchanged)."""
    finite = np.empty(which.shape[0], dtype=np.bool_)
    for k in range(which.shape[0]):
        i = which[k]
        finite[k] = update_current(
            trees[i], offsets[i], marks[i], ids[k], td_errors[k], stored_ids[i], eps[i], alphas[i], floors[i]
        )  # fmt: skip
    return finite


class TreeLists(NamedTuple):
    """A sum-tree kind's state over the seed axis: the trees, their level offsets and scratch marks, and each
    member's ε, α and floor (priority (max(|δ|, floor) + ε) ** α)."""

    trees: np.ndarray  # (S, 3, nodes) float64
    offsets: np.ndarray  # (S, levels + 1) int64
    marks: np.ndarray  # (S, nodes) uint8
    eps: np.ndarray
    alphas: np.ndarray
    floors: np.ndarray


class PrioritizedSampler(Sampler):
    """Proportional prioritized replay (Schaul et al. 2016, Algorithm 1): a ``SumTree`` leaf per slot holds p^α,
    p = abs(δ) + ε; one prefix per each of B equal segments (stratified); weights (p_i^α / min_j p_j^α)^-β. With
    ``window`` W the draws and minimum are over the W newest (``structures/window_tree.py``), the entry priority is
    the whole memory's."""

    draw_members = staticmethod(draw_prioritized)
    floor = 0.0  # priorities are (max(|δ|, floor) + eps) ** alpha: PER's floor is 0 (LAP's: κ)

    def __init__(
        self,
        storage: Storage,
        rng: np.random.Generator,
        alpha: float = 0.6,
        eps: float = 1e-6,
        window: int | None = None,
    ):
        if alpha < 0 or eps < 0:
            raise ValueError(f"alpha and eps must be >= 0, got alpha={alpha}, eps={eps}")
        super().__init__(storage, rng, window)
        self.alpha, self.eps = float(alpha), float(eps)
        self.tree = SumTree(storage.capacity)

    @staticmethod
    def bytes_needed(capacity: int) -> int:
        return SumTree.bytes_needed(capacity)

    @classmethod
    def member_lists(cls, samplers: list[Sampler]) -> TreeLists:
        trees = [s.tree for s in samplers]
        return TreeLists(
            *(member_axis(trees, name) for name in ("tree", "offsets", "mark")),
            *(np.array([getattr(s, name) for s in samplers], dtype=np.float64) for name in ("eps", "alpha", "floor")),
        )

    @classmethod
    def add_members(cls, lists, which, slots, entering) -> None:
        enter_members(lists.own.trees, lists.own.offsets, which, slots, entering)

    @classmethod
    def update_members(cls, lists, which, ids, td_errors) -> np.ndarray:
        own = lists.own
        return update_members(
            own.trees, own.offsets, own.marks, own.eps, own.alphas, own.floors, lists.stored_ids, which, ids, td_errors
        )  # fmt: skip

    def expected_counts(self, batch_size: int) -> np.ndarray:
        """B · P(i), P ∝ the leaves' p^α over the active window (or the whole tree)."""
        values = self.tree.values().astype(np.float64)
        lo, width = self.active_window()
        if width:
            inside = np.zeros_like(values)
            window = (lo + np.arange(width)) % self.storage.capacity
            inside[window] = values[window]
            values = inside
        return batch_size * values / values.sum()

    def stats(self) -> dict[str, float]:
        """``priority_max``/``priority_min``: the largest and smallest p^α held (the IS weights' mean is
        logged from the batches by the loop's metrics, for every kind)."""
        return {"priority_max": self.tree.max, "priority_min": self.tree.min if self.tree.max > 0 else 0.0}

    def state_dict(self) -> dict:
        return {"tree": self.tree.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.tree.load_state_dict(state["tree"])


# (α, β0): the paper's Atari values (Schaul et al. 2016, Table 3)
PRIORITIZED = KindSpec(
    "prioritized", PrioritizedSampler, takes_chunks=True, colour="#d62728", priority_defaults=(0.6, 0.4),
    factory=lambda cfg, storage, rng, params: PrioritizedSampler(storage, rng, cfg.alpha, cfg.priority_eps, cfg.window),
)  # fmt: skip
