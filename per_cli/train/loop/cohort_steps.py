"""A cohort's per-step phases as vectors: the Python of the loop runs once per step, not once per member.

The reference of every phase is the members' own (:class:`~per_cli.train.loop.lockstep.Solo` calls them one by one);
:class:`VectorSteps` computes the same values for all members at once where it can, and hands the members it
cannot serve (or a whole phase, where the members are not in the state it supports) to that reference:

* ``choose_actions``: ε and ε-greedy's draw of every member in one compiled call on each member's own
  generator (:mod:`per_cli.rl.explore`: the kernel a solo agent draws its one member with);
* ``step_envs``: the members' EnvPool envs stepped in one call (:func:`~per_cli.envs.pool.step_arrays`) and the
  transitions stored in one compiled call (:meth:`~per_cli.replay.cohort.CohortSampling.store`), for plain
  uniform or prioritized ring memories of vector states;
* ``check_results``: the finiteness of the update's losses and mean Q values as arrays.

Which members learn and train (``learning()``, ``update_due()``) and the end of a step (``end_step``) are the
members' own phases, called by :class:`Solo` for every learner: they exist once, for a solo run and a cohort alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numba.typed import List

from per_cli.envs.pool import PooledEnv, step_arrays
from per_cli.replay.cohort import CohortSampling
from per_cli.rl import explore
from per_cli.rl.agent import DQNAgent
from per_cli.rl.schedules import LinearSchedule
from per_cli.train.loop.lockstep import Solo, _guard, _interrupt_behind, fail


class VectorSteps(Solo):
    """The loop's per-step phases over ``members`` (a cohort's, each a Trainer) as vectors; ``sampling``: their
    memories' cohort sampling, if any (its ``store`` adds the transitions)."""

    def __init__(self, members: Sequence[Any], sampling: CohortSampling | None):
        self.index = {id(m): i for i, m in enumerate(members)}
        self.sampling = sampling
        first = members[0]
        self._schedule = first.epsilon
        same = all(
            type(m.agent).explore is DQNAgent.explore and m.epsilon == first.epsilon
            and m.agent.n_actions == first.agent.n_actions
            for m in members
        )  # fmt: skip
        drawn = same and type(first.epsilon) is LinearSchedule
        self._generators = List([m.action_rng for m in members]) if drawn else None
        self._store = (
            sampling is not None and sampling.storable and all(isinstance(m.env, PooledEnv) for m in members)
        )
        self._cached: dict[tuple[int, ...], list[int]] = {}  # _which's last answers

    def _which(self, members: Sequence[Any]) -> list[int]:
        """Members' positions in the cohort. The loop asks for the same members (all of them, those training)
        several times a step: the last few answers are remembered by the members' ids (members live as long
        as the cohort, so an id stays theirs)."""
        key, cached = tuple(map(id, members)), self._cached
        which = cached.pop(key, None)  # (put back last: the least recently asked leaves first)
        if which is None:
            which = [self.index[k] for k in key]
            if len(cached) >= 4:
                cached.pop(next(iter(cached)))
        cached[key] = which
        return which

    def choose_actions(self, members: Sequence[Any]) -> list:
        if self._generators is None:
            return super().choose_actions(members)
        n, s = len(members), self._schedule
        steps = np.array([m.state.step for m in members], dtype=np.int64)
        epsilons, draws = np.empty(n), np.empty(n, dtype=np.int64)
        which = np.asarray(self._which(members), dtype=np.int64)
        explore.explore_kernel(
            self._generators, which, steps, s.start, s.end, s.duration, members[0].agent.n_actions, epsilons, draws
        )
        actions = draws.tolist()
        for member, epsilon, action in zip(members, epsilons.tolist(), actions, strict=True):
            member.chose(epsilon, action if action >= 0 else None)
        greedy = [k for k, action in enumerate(actions) if action < 0]
        if greedy:
            for k, action in zip(greedy, self.greedy([members[k] for k in greedy]), strict=True):
                actions[k] = action
        return actions

    def step_envs(self, members: Sequence[Any], actions: Sequence[Any]) -> None:
        if not self._store or not members:
            return super().step_envs(members, actions)
        sent = np.asarray(actions, dtype=np.int64)
        try:
            obs, rewards, terminated, truncated = step_arrays([m.env for m in members], sent)
        except Exception as exc:  # noqa: BLE001 - each member's own step reports its own error
            interrupt = _interrupt_behind(exc)
            if interrupt is not None:
                raise interrupt from None
            for member, action in zip(members, actions, strict=True):
                _guard(member, member.step_env, action)
            return
        before = np.stack([m.observation for m in members])
        if before.shape != obs.shape or obs.ndim != 2:  # (not vector states: each stores its own)
            for k, member in enumerate(members):
                action, reward, end, cut = actions[k], float(rewards[k]), bool(terminated[k]), bool(truncated[k])
                stored_reward, stored_end = member.stored(reward, end, cut)  # (before stepped: the return before)
                member.stepped(action, obs[k], reward, end, cut)
                _guard(member, member.memory.add, before[k], action, stored_reward, obs[k], stored_end, cut)
            return
        stored_rewards, stored_ends = rewards, terminated  # what the memories store (env.done_reward, ...)
        rule = members[0].store_rule  # (a cohort's members share their config)
        if not rule.identity:
            returns = np.array([m.state.episode_return for m in members], dtype=np.float64)
            stored_rewards, stored_ends = rule.many(rewards, terminated, truncated, returns)
        self.sampling.store(
            np.asarray(self._which(members), dtype=np.int64), before.astype(np.float32, copy=False), sent,
            stored_rewards.astype(np.float32, copy=False), obs.astype(np.float32, copy=False), stored_ends,
            truncated,
        )  # fmt: skip
        rows = zip(members, actions, obs, rewards.tolist(), terminated.tolist(), truncated.tolist(), strict=True)
        for member, action, next_obs, reward, end, cut in rows:
            member.stepped(action, next_obs, reward, end, cut)

    def end_collects(self, members: Sequence[Any]) -> None:
        for member in members:  # (the reference's loop, without a call per member to guard it)
            try:
                member.end_collect()
            except Exception as exc:  # noqa: BLE001 - recorded in the member's summary, the others go on
                fail(member, exc)

    def check_results(self, members: Sequence[Any], results: Sequence[Any]) -> None:
        if not isinstance(results, StackedResults):
            return super().check_results(members, results)
        bad = np.flatnonzero(~(np.isfinite(results.loss) & np.isfinite(results.q_mean))).tolist()
        if bad:  # each raises its own error
            super().check_results([members[k] for k in bad], [results[k] for k in bad])


class StackedResults(list):
    """The members' ``UpdateResult``-s of one batched update (row k: the k-th member's), with the update's own
    arrays, which the phases after it read whole instead of member by member: ``loss`` and ``q_mean`` (S,),
    ``td`` (S, B). The loop hands a plain list on instead once members have left (a slice of these rows)."""

    def __init__(self, rows: Sequence[Any], loss: np.ndarray, q_mean: np.ndarray, td: np.ndarray):
        super().__init__(rows)
        self.loss, self.q_mean, self.td = loss, q_mean, td
