"""The compiled halves of a cohort's replay (:mod:`per_cli.replay.cohort`): one call draws the batches of
several members' memories, stores their transitions, or updates their priorities, each member exactly as its
solo memory would.

The kernels take the members' columns (typed lists) and the output arrays as separate arguments, not as
tuples: numba types a tuple argument in Python at every call (~50 µs for these), each array or list in C.
A draw kernel returns a status per member: ``DRAWN``, ``FAILED`` (the solo draw raises: the caller repeats it
to raise the same error) or ``DECLINED`` (this kernel does not follow the solo draw for the member's current
state, and changed nothing: the member draws its own batch).
"""

from __future__ import annotations

import numba
import numpy as np

from per_cli.replay.choice import floyd_choice, random_fill
from per_cli.replay.structures.rank_heap import heap_add, heap_update_current, rank_sample, rank_window_sample
from per_cli.replay.structures.sum_tree import MAX, set_leaf, stratified_sample, update_current
from per_cli.replay.structures.window_tree import window_sample

DRAWN, FAILED, DECLINED = 0, 1, 2


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


@numba.njit(cache=True, nogil=True)
def _unweighted_draw(o_obs):
    """(batch size, IS weights of ones, a slot buffer) for a draw kernel of a sampler that does not prioritise."""
    batch = o_obs.shape[1]
    return batch, np.ones(batch, dtype=np.float32), np.empty(batch, dtype=np.int64)


@numba.njit(cache=True, nogil=True)
def cohort_priority_kernel(
    rank, draw, generators, trees, offsets, cums, keys, ns, exponents, which, added, uniforms, windows,
    obs, actions, rewards, next_obs, terminated, ids, episode_ids,
    o_obs, o_actions, o_rewards, o_next, o_terminated, o_ids, o_weights, o_ages, o_episodes,
):  # fmt: skip
    """For k in range(len(which)): member ``which[k]``'s batch k from its ``uniforms[k]``, as its sampler's
    ``draw`` makes it, gathered into the ``o_*`` arrays. With ``draw``, ``uniforms[k]`` is first drawn from
    ``generators[i]`` as the sampler's ``sample`` draws it (``rng.random(batch)``; not for a rank member with an
    empty heap, whose ``sample`` raises before drawing). Where ``windows[k]`` = (first slot, width) has a
    positive width, the draw is inside that window.

    * ``rank`` False, ``PrioritizedSampler``: ``stratified_sample`` (``window_sample``) on ``trees[i]`` with
      β = ``exponents[k]``;
    * ``rank`` True, ``RankSampler``: ``rank_sample`` (``rank_window_sample``) over the ``ns[k]`` entries of
      the heap ``keys[i]`` with CDF ``cums[i]`` and IS exponent α·β = ``exponents[k]``.

    The other kind's lists are placeholders. The status per k: DRAWN, or FAILED where the draw raised (a zero
    total, an empty heap or window: the caller repeats it to raise the member's own error)."""
    out = (o_obs, o_actions, o_rewards, o_next, o_terminated, o_ids, o_weights, o_ages, o_episodes)
    status = np.full(which.shape[0], DRAWN, dtype=np.int8)
    for k in range(which.shape[0]):
        i, lo, width, capacity = which[k], windows[k, 0], windows[k, 1], ids[which[k]].shape[0]
        if draw and not (rank and ns[k] == 0):
            random_fill(generators[i], uniforms[k])
        try:
            if rank:
                if ns[k] == 0:
                    raise ValueError("no sampleable transition in the memory")
                if width > 0:
                    slots, weights = rank_window_sample(
                        cums[i], ns[k], keys[i], uniforms[k], exponents[k], lo, width, capacity
                    )  # fmt: skip
                else:
                    slots, weights = rank_sample(cums[i], ns[k], keys[i], uniforms[k], exponents[k])
            elif width > 0:
                slots, weights = window_sample(trees[i], offsets[i], uniforms[k], exponents[k], lo, width, capacity)
            else:
                slots, weights = stratified_sample(trees[i], offsets[i], uniforms[k], exponents[k])
        except Exception:  # noqa: BLE001 - repeated by the caller
            status[k] = FAILED
            continue
        _gather(k, slots, weights, obs[i], actions[i], rewards[i], next_obs[i], terminated[i], ids[i],
                episode_ids[i], added[k], out)  # fmt: skip
    return status


@numba.njit(cache=True, nogil=True)
def cohort_rank_update_kernel(keys, pos_of, ns, stored_ids, which, ids, td_errors):
    """For k in range(len(which)): member ``which[k]``'s ``heap_update_current`` with ids ``ids[k]`` and TD
    errors ``td_errors[k]`` on its heap of ``ns[k]`` entries. Returns its result per k: the count of priorities
    updated, or -1 (a non-finite TD error: that member's heap unchanged)."""
    counts = np.empty(which.shape[0], dtype=np.int64)
    for k in range(which.shape[0]):
        i = which[k]
        counts[k] = heap_update_current(keys[i], pos_of[i], ns[k], ids[k], td_errors[k], stored_ids[i])
    return counts


@numba.njit(cache=True, nogil=True)
def cohort_uniform_kernel(
    generators, which, sizes, added, obs, actions, rewards, next_obs, terminated, ids, episode_ids,
    o_obs, o_actions, o_rewards, o_next, o_terminated, o_ids, o_weights, o_ages, o_episodes,
):  # fmt: skip
    """For k in range(len(which)): member ``which[k]``'s uniform batch k (``generators[i].choice(sizes[k],
    batch, replace=False)``: slots, as the whole memory is the candidates), gathered into the ``o_*`` arrays.
    Every status is DRAWN (the caller checked ``floyd_applies``)."""
    out = (o_obs, o_actions, o_rewards, o_next, o_terminated, o_ids, o_weights, o_ages, o_episodes)
    batch, ones, slots = _unweighted_draw(o_obs)
    for k in range(which.shape[0]):
        i = which[k]
        floyd_choice(generators[i], sizes[k], batch, slots)
        _gather(k, slots, ones, obs[i], actions[i], rewards[i], next_obs[i], terminated[i], ids[i],
                episode_ids[i], added[k], out)  # fmt: skip
    return np.full(which.shape[0], DRAWN, dtype=np.int8)


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
        states, next_states = obs[i], next_obs[i]  # (a typed list's item: fetched once, not per number)
        for f in range(width):
            states[slot, f] = obs_in[k, f]
            next_states[slot, f] = next_in[k, f]
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


@numba.njit(cache=True, nogil=True)
def cohort_latest_kernel(
    which, cursors, obs, actions, rewards, next_obs, terminated, ids, o_obs, o_actions, o_rewards, o_next,
    o_terminated, o_ids,
):  # fmt: skip
    """For k in range(len(which)): member ``which[k]``'s transition added last (the slot before its cursor
    ``cursors[k]``: ``ReplayMemory.latest_rows`` and ``latest_ids``) into row k of the ``o_*`` arrays (each
    (members, 1, ...))."""
    width = obs[0].shape[1]
    for k in range(which.shape[0]):
        i = which[k]
        slot = (cursors[k] - 1) % ids[i].shape[0]
        states, next_states = obs[i], next_obs[i]  # (a typed list's item: fetched once, not per number)
        for f in range(width):
            o_obs[k, 0, f] = states[slot, f]
            o_next[k, 0, f] = next_states[slot, f]
        o_actions[k, 0] = actions[i][slot]
        o_rewards[k, 0] = rewards[i][slot]
        o_terminated[k, 0] = terminated[i][slot]
        o_ids[k, 0] = ids[i][slot]


@numba.njit(cache=True, nogil=True)
def cohort_heap_add_kernel(keys, pos_of, ns, which, slots):
    """For k in range(len(which)): member ``which[k]``'s ``RankSampler.on_add`` of slot ``slots[k]`` on a plain
    ring (every written slot sampleable): ``heap_add`` on its heap of ``ns[k]`` entries, ``ns`` updated in place."""
    for k in range(which.shape[0]):
        i = which[k]
        ns[k] = heap_add(keys[i], pos_of[i], ns[k], slots[k])


@numba.njit(cache=True, nogil=True)
def cohort_recent_kernel(
    phases, which, sizes, cursors, added, obs, actions, rewards, next_obs, terminated, ids, episode_ids,
    o_obs, o_actions, o_rewards, o_next, o_terminated, o_ids, o_weights, o_ages, o_episodes,
):  # fmt: skip
    """For k in range(len(which)): member ``which[k]``'s ``RecentSampler.sample`` (kind ``none``) on a plain
    ring holding ``sizes[k]`` >= batch transitions: block ``drawn % max(size // B, 1)`` of B walking back from
    the newest, its phase counter advanced, gathered into the ``o_*`` arrays (weights 1). Every status is DRAWN:
    on a plain ring every held slot is sampleable, so the solo sampler takes these slots as they are."""
    out = (o_obs, o_actions, o_rewards, o_next, o_terminated, o_ids, o_weights, o_ages, o_episodes)
    batch, ones, slots = _unweighted_draw(o_obs)
    for k in range(which.shape[0]):
        i = which[k]
        phase, capacity = phases[i], ids[i].shape[0]
        batches, drawn = phase[0], phase[1]
        phase[1] = (drawn + 1) % batches
        block = drawn % max(sizes[k] // batch, 1)
        start = cursors[k] - (block + 1) * batch
        for j in range(batch):
            slots[j] = (start + j) % capacity
        _gather(k, slots, ones, obs[i], actions[i], rewards[i], next_obs[i], terminated[i], ids[i],
                episode_ids[i], added[k], out)  # fmt: skip
    return np.full(which.shape[0], DRAWN, dtype=np.int8)


@numba.njit(cache=True, nogil=True)
def _floyd_applies(pop_size, size):
    """``choice.floyd_applies`` (its ``AVAILABLE`` part checked by the caller, ``choice.usable``)."""
    return 0 < size <= pop_size < 2**32 - 1 and not (pop_size > 10000 and size > pop_size // 50)


@numba.njit(cache=True, nogil=True)
def cohort_combined_kernel(
    generators, phases, which, sizes, added, obs, actions, rewards, next_obs, terminated, ids, episode_ids,
    o_obs, o_actions, o_rewards, o_next, o_terminated, o_ids, o_weights, o_ages, o_episodes,
):  # fmt: skip
    """For k in range(len(which)): member ``which[k]``'s ``CombinedSampler.sample`` on a plain ring of
    ``sizes[k]`` >= batch transitions with no active window: the phase's new transitions this batch carries
    (``_new_slots``), the rest uniform without replacement over the other candidates (numpy's ``choice`` on the
    member's generator, skipping the phase's new positions as ``_uniform_slots`` does), new ones last; weights 1.
    DECLINED (nothing changed) where numpy's ``choice`` would take the branch ``floyd_choice`` does not follow."""
    out = (o_obs, o_actions, o_rewards, o_next, o_terminated, o_ids, o_weights, o_ages, o_episodes)
    batch, ones, slots = _unweighted_draw(o_obs)
    status = np.full(which.shape[0], DRAWN, dtype=np.int8)
    for k in range(which.shape[0]):
        i = which[k]
        phase, capacity, n = phases[i], ids[i].shape[0], sizes[k]
        first, upto, batches, drawn = phase[0], phase[1], phase[2], phase[3]
        if drawn >= batches:  # outside a phase: the latest transition
            new_lo, new_hi = added[k] - 1, added[k]
            placed_lo, placed_hi = new_lo, new_hi
        else:
            first = max(first, upto - batches * batch)
            m = upto - first
            new_lo, new_hi = first + drawn * m // batches, first + (drawn + 1) * m // batches
            placed_lo, placed_hi = first, upto
        if n - (placed_hi - placed_lo) < batch - (new_hi - new_lo):  # too few others: leave out only its own
            placed_lo, placed_hi = new_lo, new_hi
        count, pop = batch - (new_hi - new_lo), n - (placed_hi - placed_lo)
        if not _floyd_applies(pop, count):
            status[k] = DECLINED
            continue
        if drawn < batches:
            phase[3] = drawn + 1
        floyd_choice(generators[i], pop, count, slots[:count])
        exclude = np.sort(np.arange(placed_lo, placed_hi) % capacity)
        for j in range(count):  # the r-th free position is r + #(excluded e_q with e_q - q <= r)
            skipped = 0
            for q in range(exclude.shape[0]):
                if exclude[q] - q <= slots[j]:
                    skipped += 1
            slots[j] += skipped
        for j in range(new_hi - new_lo):
            slots[count + j] = (new_lo + j) % capacity
        _gather(k, slots, ones, obs[i], actions[i], rewards[i], next_obs[i], terminated[i], ids[i],
                episode_ids[i], added[k], out)  # fmt: skip
    return status


@numba.njit(cache=True, nogil=True)
def cohort_episodes_held_kernel(which, cursors, sizes, added, episode_ids):
    """For k in range(len(which)): ``RingBookkeeping.episodes_held`` of member ``which[k]``'s ring with counters
    ``cursors[k]``, ``sizes[k]``, ``added[k]``: 0 when empty, else the episode id in the slot before the cursor
    (the newest transition) minus that of the oldest sampleable id (``added - size``), plus one."""
    out = np.zeros(which.shape[0], dtype=np.int64)
    for k in range(which.shape[0]):
        if sizes[k] > 0:
            column = episode_ids[which[k]]
            capacity = column.shape[0]
            out[k] = column[(cursors[k] - 1) % capacity] - column[(added[k] - sizes[k]) % capacity] + 1
    return out
