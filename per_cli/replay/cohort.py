"""The batches of several memories (a cohort's members) drawn in ONE compiled call, and the priority updates of
prioritized ones in another.

Each member keeps its own memory, sampler and generator; :class:`CohortSampling` holds typed lists of their
arrays and generators (built once: loads write into them) and draws each member's batch as its solo sampler
does, gathered into arrays with a member axis: ``prioritized``: the uniforms from the member's generator, then
the solo :func:`~per_cli.replay.structures.sum_tree.stratified_sample` on its tree; ``uniform``: numpy's
``choice`` on the member's generator, compiled (:mod:`per_cli.replay.choice`). So every member gets exactly the
batch its solo run would, and its generator ends where the solo run's does. Each member's batch is a
:class:`RowBatch`, a read-only row of those arrays, so that a cohort update takes them whole (:func:`stacked_rows`).
Uniform memories keep no priorities: their "priority update" is only the check that the TD errors are finite.

It serves what it supports: a :class:`PrioritizedSampler` or :class:`UniformSampler` on a plain
:class:`TransitionStorage` of vector states. Any other member, or a draw it cannot do the solo way (an active
window, fewer transitions than a batch, numpy's other ``choice`` branch), is left to the caller (None).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numba
import numpy as np
from numba.typed import List

from per_cli.replay import choice
from per_cli.replay.choice import floyd_choice
from per_cli.replay.memory import Batch, ReplayMemory
from per_cli.replay.samplers.base import Sampler
from per_cli.replay.samplers.prioritized import PrioritizedSampler
from per_cli.replay.samplers.uniform import UniformSampler
from per_cli.replay.storage.ring import TransitionStorage
from per_cli.replay.structures.sum_tree import MAX, set_leaf, stratified_sample, update_current
from per_cli.replay.writers.base import Writer


@numba.njit(cache=True, nogil=True)
def _gather(k, leaves, weights, obs, actions, rewards, next_obs, terminated, ids, episode_ids, added, out):
    """Batch k of the member whose columns are given, at slots ``leaves``: into ``out`` = (obs, actions,
    rewards, next_obs, terminated, ids, weights, ages, episodes), as ``ReplayMemory.sample`` builds it.
    A state is copied number by number (a row assignment costs ~50 ns of array set-up per row)."""
    out_obs, out_actions, out_rewards, out_next, out_terminated, out_ids, out_weights, out_ages, out_episodes = out
    width = obs.shape[1]
    for j in range(leaves.shape[0]):
        slot = leaves[j]
        for f in range(width):
            out_obs[k, j, f] = obs[slot, f]
            out_next[k, j, f] = next_obs[slot, f]
        out_actions[k, j] = actions[slot]
        out_rewards[k, j] = rewards[slot]
        out_terminated[k, j] = terminated[slot]
        out_ids[k, j] = ids[slot]
        out_ages[k, j] = added - 1 - ids[slot]
        out_episodes[k, j] = episode_ids[slot]
        out_weights[k, j] = weights[j]


# The kernels take the members' columns (typed lists) and the output arrays as separate arguments, not as
# tuples: numba types a tuple argument in Python at every call (~50 µs for these), each array or list in C.


@numba.njit(cache=True, nogil=True)
def cohort_prioritized_kernel(
    trees, offsets, which, added, uniforms, betas, obs, actions, rewards, next_obs, terminated, ids, episode_ids,
    o_obs, o_actions, o_rewards, o_next, o_terminated, o_ids, o_weights, o_ages, o_episodes,
):  # fmt: skip
    """For k in range(len(which)): member ``which[k]``'s batch k from its ``uniforms[k]`` and ``betas[k]``
    (``stratified_sample``), gathered into the ``o_*`` arrays. Returns False at k where the draw raised (the
    caller repeats it there to raise the same error)."""
    out = (o_obs, o_actions, o_rewards, o_next, o_terminated, o_ids, o_weights, o_ages, o_episodes)
    ok = np.ones(which.shape[0], dtype=np.bool_)
    for k in range(which.shape[0]):
        i = which[k]
        try:
            leaves, weights = stratified_sample(trees[i], offsets[i], uniforms[k], betas[k])
        except Exception:  # noqa: BLE001 - a zero total or a corrupted tree: repeated by the caller
            ok[k] = False
            continue
        _gather(k, leaves, weights, obs[i], actions[i], rewards[i], next_obs[i], terminated[i], ids[i],
                episode_ids[i], added[k], out)  # fmt: skip
    return ok


@numba.njit(cache=True, nogil=True)
def cohort_uniform_kernel(
    generators, which, sizes, added, obs, actions, rewards, next_obs, terminated, ids, episode_ids,
    o_obs, o_actions, o_rewards, o_next, o_terminated, o_ids, o_weights, o_ages, o_episodes,
):  # fmt: skip
    """For k in range(len(which)): member ``which[k]``'s uniform batch k (``generators[i].choice(sizes[k],
    batch, replace=False)``: slots, as the whole memory is the candidates), gathered into the ``o_*`` arrays."""
    out = (o_obs, o_actions, o_rewards, o_next, o_terminated, o_ids, o_weights, o_ages, o_episodes)
    batch = o_obs.shape[1]
    ones = np.ones(batch, dtype=np.float32)
    slots = np.empty(batch, dtype=np.int64)
    for k in range(which.shape[0]):
        i = which[k]
        floyd_choice(generators[i], sizes[k], batch, slots)
        _gather(k, slots, ones, obs[i], actions[i], rewards[i], next_obs[i], terminated[i], ids[i],
                episode_ids[i], added[k], out)  # fmt: skip
    return np.ones(which.shape[0], dtype=np.bool_)


@numba.njit(cache=True, nogil=True)
def cohort_update_kernel(trees, offsets, marks, stored_ids, which, ids, td_errors, eps, alpha):
    """For k in range(len(which)): member ``which[k]``'s ``update_current`` with ids ``ids[k]`` and TD errors
    ``td_errors[k]``. Returns its result per k (False: a non-finite TD error, that member's tree unchanged)."""
    finite = np.empty(which.shape[0], dtype=np.bool_)
    for k in range(which.shape[0]):
        i = which[k]
        finite[k] = update_current(trees[i], offsets[i], marks[i], ids[k], td_errors[k], stored_ids[i], eps, alpha)
    return finite


@numba.njit(cache=True, nogil=True)
def cohort_store_kernel(
    which, cursors, added, ended, sizes, obs_in, actions_in, rewards_in, next_in, terminated_in, truncated_in,
    obs, actions, rewards, next_obs, terminated, truncated, ids, episode_ids, trees, offsets, prioritized,
):  # fmt: skip
    """For k in range(len(which)): member ``which[k]``'s ``ReplayMemory.add`` of transition k (a plain writer on
    a plain ring): the row written at its cursor, its counters (``cursors``, ``added``, ``ended``, ``sizes``:
    updated in place, as ``RingBookkeeping._record`` moves them), and with ``prioritized`` its leaf set to the
    tree's max priority (1 while empty: ``PrioritizedSampler.on_add``)."""
    width = obs_in.shape[1]
    for k in range(which.shape[0]):
        i, slot = which[k], cursors[k]
        for f in range(width):
            obs[i][slot, f] = obs_in[k, f]
            next_obs[i][slot, f] = next_in[k, f]
        actions[i][slot] = actions_in[k]
        rewards[i][slot] = rewards_in[k]
        terminated[i][slot] = terminated_in[k]
        truncated[i][slot] = truncated_in[k]
        ids[i][slot] = added[k]
        episode_ids[i][slot] = ended[k]
        if terminated_in[k] or truncated_in[k]:
            ended[k] += 1
        added[k] += 1
        capacity = ids[i].shape[0]
        cursors[k] = (slot + 1) % capacity
        sizes[k] = min(sizes[k] + 1, capacity)
        if prioritized:
            tree, levels = trees[i], offsets[i]
            top = tree[MAX, levels[levels.shape[0] - 2]]
            set_leaf(tree, levels, slot, top if top > 0.0 else 1.0)


_KINDS = {PrioritizedSampler: "prioritized", UniformSampler: "uniform"}
_FIELDS = {f.name: j for j, f in enumerate(dataclasses.fields(Batch))}  # Batch's order: that of a draw's arrays


class RowBatch(Batch):
    """Batch k of a cohort draw: each field is row k of the draw's stacked array, and ``rows`` = (the stacked
    arrays in Batch's field order, k, the draw's batches), so that a cohort update can take the stacked arrays
    whole instead of stacking the rows again. A field's views of every row are made together when one batch
    first reads it (iterating the array: cheaper per view than indexing it) and kept in each batch's ``__dict__``
    (later reads are plain attribute reads). Its fields cannot be rebound, so a RowBatch is always its rows
    (writes into a field's values write the stacked array, which the update then reads as well)."""

    def __init__(self, stacked: tuple[np.ndarray, ...], k: int, batches: list):
        self.__dict__["rows"] = (stacked, k, batches)

    def __setattr__(self, name: str, value) -> None:
        raise AttributeError(f"a cohort draw's batch is read-only (its fields are rows of the draw: {name})")


class _RowField:
    """Field ``j`` of a :class:`RowBatch` (a non-data descriptor: once set in the batches' ``__dict__``, it is
    not called again)."""

    def __init__(self, name: str, j: int):
        self.name, self.j = name, j

    def __get__(self, batch: RowBatch | None, owner: type) -> np.ndarray:
        if batch is None:
            return self  # type: ignore[return-value]
        stacked, _, batches = batch.rows
        name = self.name
        for sibling, view in zip(batches, stacked[self.j], strict=True):
            if sibling is not None:
                sibling.__dict__[name] = view
        return batch.__dict__[name]


for _name, _j in _FIELDS.items():
    setattr(RowBatch, _name, _RowField(_name, _j))


def stacked_rows(batches: Sequence[Batch]) -> tuple[np.ndarray, ...] | None:
    """The arrays of ``batches`` stacked with a member axis (Batch's field order), taken from the cohort draw
    they are rows of: the draw's arrays themselves when the batches are all its rows in order, else those rows
    (one gather per array). None where they are not all rows of one draw (then stack them)."""
    first = batches[0] if batches else None
    if type(first) is not RowBatch:
        return None
    stacked = first.rows[0]
    if list(map(id, batches)) == list(map(id, first.rows[2])):  # all the draw's batches, in order
        return stacked
    rows = []
    for batch in batches:
        if type(batch) is not RowBatch or batch.rows[0] is not stacked:
            return None
        rows.append(batch.rows[1])
    if rows == list(range(len(stacked[0]))):
        return stacked
    index = np.asarray(rows, dtype=np.int64)
    return tuple(array[index] for array in stacked)


def supports(memory: ReplayMemory) -> bool:
    """Whether :class:`CohortSampling` can draw this memory's batches (ever; see ``drawable``)."""
    storage = memory.storage
    kind = _KINDS.get(type(memory.sampler))
    return (
        (kind == "prioritized" or (kind == "uniform" and choice.usable()))
        and type(storage) is TransitionStorage
        and storage.obs.ndim == 2
        and storage.obs.dtype == np.float32
    )


class CohortSampling:
    """One compiled draw over the members' memories (all ``supports``-ed, of one kind; built after any
    checkpoint load)."""

    def __init__(self, memories: Sequence[ReplayMemory]):
        kinds = {_KINDS.get(type(m.sampler)) for m in memories}
        if not all(supports(m) for m in memories) or len(kinds) != 1:
            raise ValueError("cohort sampling needs prioritized or uniform memories of vector states on a plain ring")
        (self.kind,) = kinds
        self.memories = list(memories)
        storages = [m.storage for m in memories]
        self._columns = tuple(
            List([getattr(s, name) for s in storages])
            for name in ("obs", "actions", "rewards", "next_obs", "terminated", "ids", "episode_ids")
        )
        self._same_priorities = False
        self._windowless = all(m.sampler.window is None for m in memories)
        self._truncated = List([s.truncated for s in storages])
        self.storable = all(type(m.writer) is Writer for m in memories) and all(
            type(m.sampler).on_add is (PrioritizedSampler if self.kind == "prioritized" else Sampler).on_add
            for m in memories
        )  # (store: what each memory's add does, for plain writers and the samplers' own on_add)
        # priority updates that only check their TD errors are finite (the sampler keeps no priorities)
        self._check_only = all(
            type(m.sampler).update_current is Sampler.update_current and not m.sampler.keeps_priorities()
            for m in memories
        )
        if self.kind == "uniform":
            self._generators = List([m.sampler.rng for m in memories])
            self._no_trees = (List([np.zeros((3, 1))]), List([np.zeros(2, dtype=np.int64)]))  # (store's: unused)
            return
        self._trees = List([m.sampler.tree.tree for m in memories])
        self._offsets = List([m.sampler.tree.offsets for m in memories])
        self._marks = List([m.sampler.tree.mark for m in memories])
        first = memories[0].sampler
        self._same_priorities = all((m.sampler.eps, m.sampler.alpha) == (first.eps, first.alpha) for m in memories)

    def store(self, which: np.ndarray, obs, actions, rewards, next_obs, terminated, truncated) -> None:
        """Members ``which`` (int64) each add transition k of the arrays (a row each; ``obs`` of the storages'
        dtype) as their ``memory.add`` would store it. Only where ``storable``."""
        storages = [self.memories[i].storage for i in which.tolist()]
        cursors = np.array([s.cursor for s in storages], dtype=np.int64)
        added = np.array([s.added for s in storages], dtype=np.int64)
        ended = np.array([s.episodes_ended for s in storages], dtype=np.int64)
        sizes = np.array([s.size for s in storages], dtype=np.int64)
        prioritized = self.kind == "prioritized"
        trees = (self._trees, self._offsets) if prioritized else self._no_trees
        cohort_store_kernel(
            which, cursors, added, ended, sizes, obs, actions, rewards, next_obs, terminated, truncated,
            *self._columns[:5], self._truncated, *self._columns[5:], *trees, prioritized,
        )  # fmt: skip
        rows = zip(storages, cursors.tolist(), added.tolist(), ended.tolist(), sizes.tolist(), strict=True)
        for storage, cursor, count, episodes, size in rows:
            storage.cursor, storage.added, storage.episodes_ended, storage.size = cursor, count, episodes, size

    def drawable(self, i: int, batch_size: int) -> bool:
        """Whether member ``i``'s next batch can be drawn here (else: its own ``memory.sample``)."""
        memory = self.memories[i]
        window, size = memory.sampler.window, memory.storage.size
        whole = batch_size <= size and (window is None or window >= size)
        return whole and (self.kind == "prioritized" or choice.floyd_applies(size, batch_size))

    def drawable_all(self, which: Sequence[int], batch_size: int) -> np.ndarray:
        """``drawable(i, batch_size)`` for each member ``i`` of ``which``, as a boolean array."""
        if not self._windowless:
            return np.array([self.drawable(i, batch_size) for i in which], dtype=bool)
        memories = self.memories
        sizes = np.array([memories[i].storage.size for i in which], dtype=np.int64)
        whole = batch_size <= sizes
        return whole if self.kind == "prioritized" else whole & choice.floyd_applies_all(sizes, batch_size)

    def sample(self, which: Sequence[int], batch_size: int, betas: Sequence[float]) -> list[Batch | None]:
        """The batches of members ``which`` (each ``drawable``), as their ``memory.sample(batch_size, beta)``
        would draw them; None where that raises (``repeat_failed`` repeats it)."""
        n, memories = len(which), self.memories
        width = memories[which[0]].storage.obs.shape[1]
        obs, next_obs = (np.empty((n, batch_size, width), dtype=np.float32) for _ in range(2))
        actions, ids, ages, episodes = (np.empty((n, batch_size), dtype=np.int64) for _ in range(4))
        rewards, terminated, weights = (np.empty((n, batch_size), dtype=np.float32) for _ in range(3))
        out = (obs, actions, rewards, next_obs, terminated, ids, weights, ages, episodes)
        added = np.array([memories[i].storage.added for i in which], dtype=np.int64)
        members = np.asarray(which, dtype=np.int64)
        self.failed = {}
        if self.kind == "uniform":
            sizes = np.array([memories[i].storage.size for i in which], dtype=np.int64)
            ok = cohort_uniform_kernel(self._generators, members, sizes, added, *self._columns, *out)
        else:
            uniforms = np.empty((n, batch_size), dtype=np.float64)
            for k, i in enumerate(which):
                uniforms[k] = memories[i].sampler.rng.random(batch_size)  # the solo sampler's draw
            betas = np.asarray(betas, dtype=np.float64)
            trees = (self._trees, self._offsets)
            ok = cohort_prioritized_kernel(*trees, members, added, uniforms, betas, *self._columns, *out)
            self.failed = {which[k]: (uniforms[k], betas[k]) for k in range(n) if not ok[k]}
        batches: list = [None] * n
        for k in np.flatnonzero(ok).tolist():
            batches[k] = RowBatch(out, k, batches)
        return list(batches)  # (a copy: the batches keep theirs, which a caller may not change)

    def repeat_failed(self, i: int) -> None:
        """Repeat member ``i``'s draw that failed in the last ``sample``: raises its error, as its solo run's."""
        uniforms, beta = self.failed[i]
        sampler = self.memories[i].sampler
        stratified_sample(sampler.tree.tree, sampler.tree.offsets, uniforms, beta)
        raise RuntimeError(f"member {i}'s draw failed in the cohort kernel but not alone")

    def update_priorities(
        self, which: Sequence[int], ids: Sequence[np.ndarray] | Callable[[], Sequence[np.ndarray]],
        td_errors: Sequence[np.ndarray],
    ):  # fmt: skip
        """Members ``which`` get their new priorities as each ``memory.update_priorities(ids[k], td_errors[k])``
        sets them; returns per member whether its TD errors were finite (where not, nothing changed and the
        caller repeats the member's own update to raise its error). None, changing nothing, when the members'
        ε and α differ (then each updates its own). Memories that keep no priorities (uniform) only get the
        check. ``ids`` may be a function returning them (called only where priorities are kept)."""
        if self._check_only:
            return _finite_rows(td_errors)
        if not self._same_priorities:  # (uniform memories have no priorities)
            return None
        ids, td_errors = _rows(ids() if callable(ids) else ids), _rows(td_errors)
        if ids is None or td_errors is None or ids.dtype != np.int64:
            return None
        sampler = self.memories[which[0]].sampler
        return cohort_update_kernel(
            self._trees, self._offsets, self._marks, self._columns[5], np.asarray(which, dtype=np.int64), ids,
            td_errors, sampler.eps, sampler.alpha,
        )  # fmt: skip


def _finite_rows(arrays: Sequence[np.ndarray] | np.ndarray) -> np.ndarray | None:
    """Per 1-D array of ``arrays`` (one length; or per row of a 2-D array): whether all its values are finite;
    None for other shapes."""
    if isinstance(arrays, np.ndarray) and arrays.ndim == 2:
        return np.isfinite(arrays).all(axis=1)
    first = arrays[0]
    if any(a.ndim != 1 or a.shape != first.shape for a in arrays):
        return None
    return np.isfinite(np.concatenate(arrays).reshape(len(arrays), first.shape[0])).all(axis=1)


def _rows(arrays: Sequence[np.ndarray] | np.ndarray) -> np.ndarray | None:
    """1-D arrays of one length and dtype (or the rows of a 2-D array) as the rows of one C array, values
    unchanged; None otherwise."""
    if isinstance(arrays, np.ndarray) and arrays.ndim == 2:
        return np.ascontiguousarray(arrays)
    first = arrays[0]
    if any(a.dtype != first.dtype or a.shape != first.shape or a.ndim != 1 for a in arrays):
        return None
    out = np.empty((len(arrays), first.shape[0]), dtype=first.dtype)
    for k, array in enumerate(arrays):
        out[k] = array
    return out
