"""Blind Cliffwalk runs that replay from the project's own storage and samplers (the code that trains DQNs), one
transition per update, its |δ| handed back as the new priority."""

from __future__ import annotations

import numpy as np

from per_cli.config import ReplayConfig
from per_cli.envs.cliffwalk import CliffwalkTransitions
from per_cli.experiments.cliffwalk.learners import converged

# uniform draws do not depend on the learning, so they are fetched in chunks (the same sampler, fewer calls);
# chunks stay below 1/256 of the memory, so draws without replacement inside a chunk are practically i.i.d.
UNIFORM_CHUNK_MAX = 256


def make_sampler(method: str, transitions: CliffwalkTransitions, settings, rng):
    """Fill the project's TransitionStorage with the memory and build the project's sampler for ``method``
    through the replay registry (new transitions enter it exactly as in a DQN run)."""
    from per_cli.replay import KINDS, ReplayMemory
    from per_cli.replay.storage.ring import TransitionStorage

    size = len(transitions)
    cfg = ReplayConfig(
        kind=method,
        capacity=size,
        batch_size=1,
        alpha=settings.alpha_for(method),
        beta0=settings.beta,
        priority_eps=settings.priority_eps,
        rank_resort_period=settings.rank_resort_period,
    )
    storage = TransitionStorage(size, (), np.int64)
    memory = ReplayMemory(storage, KINDS[method].build(cfg, storage, rng))
    order = rng.permutation(size)  # insertion order: no systematic tie-breaking in favour of any transition
    t = transitions
    for i in order:
        memory.add(t.states[i], t.actions[i], t.rewards[i], t.next_states[i], t.terminated[i], False)
    return memory


def run_sampled(memory, learner, method: str, cap: int, sse_tol: float, settings) -> int:
    storage, update_members, lists = memory.storage, type(memory.sampler).update_members, memory.lists
    # slot -> (state, action, reward, next state, terminated), plain values (the storage was filled in a shuffled order)
    rewards, terminated = storage.rewards.astype(np.float64), storage.terminated.astype(bool)
    columns = (storage.obs, storage.actions, rewards, storage.next_obs, terminated)
    transitions = list(zip(*(column.tolist() for column in columns), strict=True))
    size = len(transitions)
    # samplers whose draws do not depend on priorities can be asked for several draws at once
    chunk = max(1, min(UNIFORM_CHUNK_MAX, size // 256)) if method == "uniform" else 1
    feedback = method != "uniform"
    step, beta, update = settings.step_size, settings.beta, learner.update
    updates = 0
    if converged(learner, sse_tol):
        return 0
    one, id_buf = np.zeros(1, dtype=np.int64), np.zeros((1, 1), dtype=np.int64)  # (member 0 of a list of one)
    td_buf = np.zeros((1, 1), dtype=np.float64)
    while updates < cap:
        slots, weights = memory.draw(min(chunk, cap - updates), beta)
        for slot, weight in zip(slots.tolist(), weights.tolist(), strict=True):
            delta = update(*transitions[slot], step * weight)
            updates += 1
            if feedback:
                id_buf[0, 0] = storage.ids[slot]
                td_buf[0, 0] = abs(delta)
                update_members(lists, one, id_buf, td_buf)  # (a non-finite δ changes nothing, as before)
            if learner.sse < sse_tol and converged(learner, sse_tol):
                return updates
    return updates
