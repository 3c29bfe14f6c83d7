"""The batches of several prioritized memories (a cohort's members) drawn in ONE compiled call, and their
priority updates in another.

Each member keeps its own memory, sum tree and sampler generator; :class:`CohortPrioritizedSampling` holds typed
lists of their arrays (allocated once: loads write into them) and :func:`cohort_prioritized_kernel` runs the solo
sampler's :func:`~per_cli.replay.structures.sum_tree.stratified_sample` on each member's tree and gathers its
batch into arrays with a member axis. The uniforms come from each member's own generator, drawn as its solo
``PrioritizedSampler.sample`` draws them, so every member gets exactly the batch its solo run would.

It serves what it supports: a :class:`PrioritizedSampler` without an active window on a plain
:class:`TransitionStorage` of vector states. For any other member, or when a member's memory holds fewer
transitions than a batch, ``sample`` answers None and the caller samples that member its own way.
"""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np
from numba.typed import List

from per_cli.replay.memory import Batch, ReplayMemory
from per_cli.replay.samplers.prioritized import PrioritizedSampler
from per_cli.replay.storage.ring import TransitionStorage
from per_cli.replay.structures.sum_tree import stratified_sample, update_current


@numba.njit(cache=True, nogil=True)
def cohort_prioritized_kernel(
    trees, offsets, obs, actions, rewards, next_obs, terminated, ids, episode_ids, which, added, uniforms, betas,
    out_obs, out_actions, out_rewards, out_next_obs, out_terminated, out_ids, out_weights, out_ages, out_episodes,
):  # fmt: skip
    """For k in range(len(which)): member ``which[k]``'s batch k from its ``uniforms[k]`` and ``betas[k]``
    (``stratified_sample``), gathered into ``out_*[k]``. Returns False at k where the draw raised (the caller
    repeats it there to raise the same error)."""
    ok = np.ones(which.shape[0], dtype=np.bool_)
    for k in range(which.shape[0]):
        i = which[k]
        try:
            leaves, weights = stratified_sample(trees[i], offsets[i], uniforms[k], betas[k])
        except Exception:  # noqa: BLE001 - a zero total or a corrupted tree: repeated by the caller
            ok[k] = False
            continue
        member_obs, member_next, member_ids = obs[i], next_obs[i], ids[i]
        for j in range(leaves.shape[0]):
            slot = leaves[j]
            out_obs[k, j] = member_obs[slot]
            out_next_obs[k, j] = member_next[slot]
            out_actions[k, j] = actions[i][slot]
            out_rewards[k, j] = rewards[i][slot]
            out_terminated[k, j] = terminated[i][slot]
            out_ids[k, j] = member_ids[slot]
            out_ages[k, j] = added[k] - 1 - member_ids[slot]
            out_episodes[k, j] = episode_ids[i][slot]
            out_weights[k, j] = weights[j]
    return ok


@numba.njit(cache=True, nogil=True)
def cohort_update_kernel(trees, offsets, marks, stored_ids, which, ids, td_errors, eps, alpha):
    """For k in range(len(which)): member ``which[k]``'s ``update_current`` with ids ``ids[k]`` and TD errors
    ``td_errors[k]``. Returns its result per k (False: a non-finite TD error, that member's tree unchanged)."""
    finite = np.empty(which.shape[0], dtype=np.bool_)
    for k in range(which.shape[0]):
        i = which[k]
        finite[k] = update_current(trees[i], offsets[i], marks[i], ids[k], td_errors[k], stored_ids[i], eps, alpha)
    return finite


def supports(memory: ReplayMemory) -> bool:
    """Whether :class:`CohortPrioritizedSampling` can draw this memory's batches (ever; see ``sample``)."""
    storage = memory.storage
    return (
        type(memory.sampler) is PrioritizedSampler
        and type(storage) is TransitionStorage
        and storage.obs.ndim == 2
        and storage.obs.dtype == np.float32
    )


class CohortPrioritizedSampling:
    """One compiled draw over the members' memories (all ``supports``-ed; built after any checkpoint load)."""

    def __init__(self, memories: Sequence[ReplayMemory]):
        if not all(supports(m) for m in memories):
            raise ValueError("cohort sampling needs prioritized memories of vector states on a plain ring")
        self.memories = list(memories)
        storages = [m.storage for m in memories]
        self._trees = List([m.sampler.tree.tree for m in memories])
        self._offsets = List([m.sampler.tree.offsets for m in memories])
        self._marks = List([m.sampler.tree.mark for m in memories])
        first = memories[0].sampler
        self._same_priorities = all((m.sampler.eps, m.sampler.alpha) == (first.eps, first.alpha) for m in memories)
        self._columns = [
            List([getattr(s, name) for s in storages])
            for name in ("obs", "actions", "rewards", "next_obs", "terminated", "ids", "episode_ids")
        ]

    def drawable(self, i: int, batch_size: int) -> bool:
        """Whether member ``i``'s next batch can be drawn here (else: its own ``memory.sample``)."""
        memory = self.memories[i]
        window, size = memory.sampler.window, memory.storage.size
        return batch_size <= size and (window is None or window >= size)

    def sample(self, which: Sequence[int], batch_size: int, betas: Sequence[float]) -> list[Batch | None]:
        """The batches of members ``which`` (each ``drawable``), as their ``memory.sample(batch_size, beta)``
        would draw them; None where that raises (the caller's ``stratified_sample`` repeats it)."""
        n = len(which)
        uniforms = np.empty((n, batch_size), dtype=np.float64)
        for k, i in enumerate(which):
            uniforms[k] = self.memories[i].sampler.rng.random(batch_size)  # the solo sampler's draw
        width = self.memories[which[0]].storage.obs.shape[1]
        obs, next_obs = (np.empty((n, batch_size, width), dtype=np.float32) for _ in range(2))
        actions, ids, ages, episodes = (np.empty((n, batch_size), dtype=np.int64) for _ in range(4))
        rewards, terminated, weights = (np.empty((n, batch_size), dtype=np.float32) for _ in range(3))
        added = np.array([self.memories[i].storage.added for i in which], dtype=np.int64)
        ok = cohort_prioritized_kernel(
            self._trees, self._offsets, *self._columns, np.asarray(which, dtype=np.int64), added, uniforms,
            np.asarray(betas, dtype=np.float64), obs, actions, rewards, next_obs, terminated, ids, weights, ages,
            episodes,
        )  # fmt: skip
        self.failed = {which[k]: (uniforms[k], betas[k]) for k in range(n) if not ok[k]}
        return [
            Batch(obs[k], actions[k], rewards[k], next_obs[k], terminated[k], ids[k], weights[k], ages[k], episodes[k])
            if ok[k]
            else None
            for k in range(n)
        ]

    def repeat_failed(self, i: int) -> None:
        """Repeat member ``i``'s draw that failed in the last ``sample``: raises its error, as its solo run's."""
        uniforms, beta = self.failed[i]
        sampler = self.memories[i].sampler
        stratified_sample(sampler.tree.tree, sampler.tree.offsets, uniforms, beta)
        raise RuntimeError(f"member {i}'s draw failed in the cohort kernel but not alone")

    def update_priorities(self, which: Sequence[int], ids: Sequence[np.ndarray], td_errors: Sequence[np.ndarray]):
        """Members ``which`` get their new priorities as each ``memory.update_priorities(ids[k], td_errors[k])``
        sets them; returns per member whether its TD errors were finite (where not, nothing changed and the
        caller repeats the member's own update to raise its error). None, changing nothing, when the members'
        ε and α differ (then each updates its own)."""
        ids, td_errors = _rows(ids), _rows(td_errors)
        if not self._same_priorities or ids is None or td_errors is None or ids.dtype != np.int64:
            return None
        sampler = self.memories[which[0]].sampler
        return cohort_update_kernel(
            self._trees, self._offsets, self._marks, self._columns[5], np.asarray(which, dtype=np.int64), ids,
            td_errors, sampler.eps, sampler.alpha,
        )  # fmt: skip


def _rows(arrays: Sequence[np.ndarray]) -> np.ndarray | None:
    """1-D arrays of one length and dtype as the rows of one C array, values unchanged; None otherwise."""
    first = arrays[0]
    if any(a.dtype != first.dtype or a.shape != first.shape or a.ndim != 1 for a in arrays):
        return None
    out = np.empty((len(arrays), first.shape[0]), dtype=first.dtype)
    for k, array in enumerate(arrays):
        out[k] = array
    return out
