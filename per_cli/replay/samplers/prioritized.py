"""``prioritized``: proportional prioritized replay on the K-ary sum tree (``structures/sum_tree.py``)."""

from __future__ import annotations

import numpy as np

from per_cli.replay.samplers.base import Sampler, Storage
from per_cli.replay.structures.sum_tree import (
    MAX,
    SumTree,
    set_leaf,
    stratified_sample,
    update_current,
    update_priorities,
)
from per_cli.replay.structures.window_tree import window_sample


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

    def on_add(self, slot: int) -> None:
        t = self.tree
        top = t.tree[MAX, t.root]
        value = top if top > 0.0 else 1.0
        if not (self.storage.filled_slots_sampleable or self.storage.sampleable(np.array([slot]))[0]):
            value = 0.0
        set_leaf(t.tree, t.offsets, slot, value)

    def on_invalidate(self, slots: np.ndarray) -> None:
        slots = np.asarray(slots, dtype=np.int64)
        self.tree.update(slots, np.zeros(slots.shape))

    def sample(self, batch_size: int, beta: float) -> tuple[np.ndarray, np.ndarray]:
        return self.draw(self.rng.random(batch_size), beta)

    def draw(self, uniforms: np.ndarray, beta: float) -> tuple[np.ndarray, np.ndarray]:
        """``sample``'s draw from given uniforms (one per stratum): over the whole tree, or over the active
        window (``window_bounds``)."""
        lo, width = self.window_bounds()
        if width == 0:
            return stratified_sample(self._tree, self._offsets, uniforms, beta)
        return window_sample(self._tree, self._offsets, uniforms, beta, lo, width, self.storage.capacity)

    def update(self, slots: np.ndarray, td_abs: np.ndarray) -> None:
        update_priorities(self._tree, self._offsets, self._mark, slots, td_abs, self.eps, self.alpha)

    def update_current(self, ids: np.ndarray, td_errors: np.ndarray, stored_ids: np.ndarray) -> bool:
        """The memory's fast path: stale-id filter, finiteness check and ``update`` in one compiled call
        (``stored_ids[slot]`` is the id each slot holds). False, changing nothing, on a non-finite TD error."""
        return update_current(self._tree, self._offsets, self._mark, ids, td_errors, stored_ids, self.eps, self.alpha)

    def probabilities(self) -> np.ndarray:
        """P(i) of every slot (for tests and analysis)."""
        values = self.tree.values()
        return values / values.sum()

    def stats(self) -> dict[str, float]:
        """``priority_max``/``priority_min``: the largest and smallest p^α held (the IS weights' mean is
        logged from the batches by the loop's metrics, for every kind)."""
        return {"priority_max": self.tree.max, "priority_min": self.tree.min if self.tree.max > 0 else 0.0}

    def state_dict(self) -> dict:
        return {"tree": self.tree.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.tree.load_state_dict(state["tree"])
