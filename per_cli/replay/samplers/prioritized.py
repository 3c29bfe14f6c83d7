"""``prioritized``: proportional prioritized replay on the K-ary sum tree (``structures/sum_tree.py``)."""

from __future__ import annotations

import numba
import numpy as np

from per_cli.replay.kind_spec import KindSpec
from per_cli.replay.samplers.base import DRAWN, FAILED, Sampler, Storage, strata_uniforms
from per_cli.replay.storage.ring import CAPACITY, member_axis
from per_cli.replay.structures.sum_tree import (
    MAX,
    SumTree,
    set_leaf,
    stratified_sample,
    update_current,
    update_priorities,
)
from per_cli.replay.structures.window_tree import window_sample


@numba.njit(cache=True, nogil=True)
def draw_prioritized(generators, counters, windows, trees, offsets, which, betas, slots, weights):
    """For k in range(len(which)): member ``which[k]``'s batch: one uniform per stratum from its generator, then
    ``stratified_sample`` on its tree, or ``window_sample`` inside its active window, with β = ``betas[k]``.
    FAILED where the structure raised (no mass: ``raise_failed`` repeats it to raise its error)."""
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
                drawn, w = window_sample(trees[i], offsets[i], uniforms, betas[k], lo, width, c[CAPACITY])
            else:
                drawn, w = stratified_sample(trees[i], offsets[i], uniforms, betas[k])
        except Exception:  # noqa: BLE001 - repeated by raise_failed for its message
            status[k] = FAILED
            continue
        slots[k] = drawn
        weights[k] = w
    return status


@numba.njit(cache=True, nogil=True)
def enter_at_max(tree, offsets, slot, sampleable):
    """A written slot's leaf: the largest priority held (1 while none is: Algorithm 1), or 0 if unsampleable."""
    top = tree[MAX, offsets[offsets.shape[0] - 2]]
    set_leaf(tree, offsets, slot, (top if top > 0.0 else 1.0) if sampleable else 0.0)


@numba.njit(cache=True, nogil=True)
def enter_members(trees, offsets, which, slots):
    """``enter_at_max`` of slot ``slots[k]`` in member ``which[k]``'s tree, for every k (plain rings: every
    written slot is sampleable)."""
    for k in range(which.shape[0]):
        enter_at_max(trees[which[k]], offsets[which[k]], slots[k], True)


@numba.njit(cache=True, nogil=True)
def update_members(trees, offsets, marks, stored_ids, which, ids, td_errors, eps, alpha, floor):
    """For k in range(len(which)): member ``which[k]``'s ``update_current`` with ids ``ids[k]`` and TD errors
    ``td_errors[k]``. Returns its result per k (False: a non-finite TD error, that member's tree unchanged)."""
    finite = np.empty(which.shape[0], dtype=np.bool_)
    for k in range(which.shape[0]):
        i = which[k]
        finite[k] = update_current(
            trees[i], offsets[i], marks[i], ids[k], td_errors[k], stored_ids[i], eps, alpha, floor
        )  # fmt: skip
    return finite


class PrioritizedSampler(Sampler):
    """Proportional prioritized replay (Schaul et al. 2016, section 3.3, Algorithm 1).

    ``PrioritizedSampler(storage, rng, alpha=0.6, eps=1e-6)`` works on any storage with the contract in the
    package docstring. Leaf ``slot`` of a ``SumTree`` holds p^α with p = abs(δ) + ε. ``sample(B, β)`` splits
    [0, Σ p^α] into B equal segments and draws one prefix uniformly in each (stratified sampling), then
    finds its leaf; weights are (p_i^α / min_j p_j^α)^-β. ``update(slots, td_abs)`` sets new priorities.
    With ``window`` W (``replay.window``) the draws and the minimum are over the W most recent transitions
    only (``structures/window_tree.py``); priorities, and the max priority new transitions enter at, stay
    those of the whole memory.
    """

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
        if window is not None and window < 1:
            raise ValueError(f"replay.window must be >= 1 or None, got {window}")
        super().__init__(storage, rng)
        self.alpha = float(alpha)
        self.eps = float(eps)
        self.window = window
        self.tree = SumTree(storage.capacity)
        self._tree, self._offsets, self._mark = self.tree.tree, self.tree.offsets, self.tree.mark  # hot path

    @staticmethod
    def bytes_needed(capacity: int) -> int:
        return SumTree.bytes_needed(capacity)

    @classmethod
    def member_lists(cls, samplers: list[Sampler]) -> tuple:
        return member_axis([s.tree.tree for s in samplers]), member_axis([s.tree.offsets for s in samplers])

    @classmethod
    def update_lists(cls, samplers: list[Sampler]) -> tuple:
        trees = [s.tree for s in samplers]
        return tuple(member_axis(column) for column in ([t.tree for t in trees], [t.offsets for t in trees],
                     [t.mark for t in trees], [s.storage.ids for s in samplers]))  # fmt: skip

    @classmethod
    def update_members(cls, lists, samplers, which, ids, td_errors) -> np.ndarray | None:
        first = samplers[0]
        if any((s.eps, s.alpha, s.floor) != (first.eps, first.alpha, first.floor) for s in samplers):
            return None
        return update_members(*lists, which, ids, td_errors, first.eps, first.alpha, first.floor)

    def on_add(self, slot: int) -> None:
        sampleable = self.storage.filled_slots_sampleable or bool(self.storage.sampleable(np.array([slot]))[0])
        enter_at_max(self._tree, self._offsets, slot, sampleable)

    @classmethod
    def on_add_members(cls, lists: tuple, which: np.ndarray, slots: np.ndarray) -> None:
        enter_members(lists[3], lists[4], which, slots)

    def on_invalidate(self, slots: np.ndarray) -> None:
        slots = np.asarray(slots, dtype=np.int64)
        self.tree.update(slots, np.zeros(slots.shape))

    def raise_failed(self, status: int, batch_size: int, beta: float) -> None:
        """The structure's own error: its draw repeated on fixed uniforms."""
        if self.window_bounds()[1] < 0:
            raise ValueError(f"no run of replay.chunk {self.chunk} fits inside the sampleable transitions")
        lo, width = self.window_bounds()
        uniforms = np.full(batch_size, 0.5)
        if width == 0:
            stratified_sample(self._tree, self._offsets, uniforms, beta)
        else:
            window_sample(self._tree, self._offsets, uniforms, beta, lo, width, self.storage.capacity)
        super().raise_failed(status, batch_size, beta)

    def update(self, slots: np.ndarray, td_abs: np.ndarray) -> None:
        update_priorities(self._tree, self._offsets, self._mark, slots, td_abs, self.eps, self.alpha, self.floor)

    def update_current(self, ids: np.ndarray, td_errors: np.ndarray, stored_ids: np.ndarray) -> bool:
        """The memory's fast path: stale-id filter, finiteness check and ``update`` in one compiled call
        (``stored_ids[slot]`` is the id each slot holds). False, changing nothing, on a non-finite TD error."""
        return update_current(
            self._tree, self._offsets, self._mark, ids, td_errors, stored_ids, self.eps, self.alpha, self.floor
        )  # fmt: skip

    def probabilities(self) -> np.ndarray:
        """P(i) of every slot (for tests and analysis)."""
        values = self.tree.values()
        return values / values.sum()

    def expected_counts(self, batch_size: int) -> np.ndarray:
        """B · P(i), P ∝ the leaves' p^α over the active window (or the whole tree)."""
        values = self.tree.values().astype(np.float64)
        lo, width = self.window_bounds()
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
