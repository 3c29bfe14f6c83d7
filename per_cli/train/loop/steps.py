"""The loop's phases over S >= 1 members, each written once: a solo run is a cohort of one through the same calls.

:func:`per_cli.train.loop.lockstep.run_members` orders the phases; :class:`Steps` runs each for all the members it
is given, as ONE call where the work is compiled, and member by member only where a member's own object does the
work (its env, its window, its events):

* ``choose_actions``: ε and ε-greedy's draw of every member in one compiled call on each member's own generator
  (:mod:`per_cli.rl.explore`), then the greedy actions of those acting greedily (``updates.greedy``);
* ``step_envs``: where every member has an EnvPool env and a plain ring memory of vector states, the pool steps in
  one call (:func:`~per_cli.envs.pool.step_arrays`) and the transitions are stored in one compiled call
  (:meth:`~per_cli.replay.cohort.CohortSampling.store`); else each member steps and stores its own
  (``Trainer.step_env``, EnvPool envs still stepped in one call per pool);
* ``sample``, ``insert_priorities``, ``update_priorities``: one compiled call over the members' memories
  (:class:`~per_cli.replay.cohort.CohortSampling`) where they are plain rings of vector states, else each memory's
  own (the same kind's function over a list of one);
* ``learn``, ``greedy``, ``insertion_td``: the members' networks (:mod:`per_cli.train.loop.updates`: one compiled
  call under numba; one stacked torch update or each agent's own under torch);
* ``measure``: a compiled update's measures in one pass over its stacked arrays
  (:func:`~per_cli.train.measures.update_measures.measure_rows`), else each window measures its own update with
  the same function;
* ``due``, ``end_collects``, ``end_steps``, ``check_results``: the members' own phases (``learning``,
  ``update_due``, ``end_collect``, ``end_step``, ``check_result``).

Each member's values do not depend on who else is in a call: each works on its own buffers and generators
(tests/train/loop/test_cohort.py: one member's outputs alone, in a cohort of 7 and of 100 are identical). A member
whose phase raises is recorded ``failed`` and leaves; the others go on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numba.typed import List

from per_cli.envs.pool import PooledEnv, reset_together, step_arrays, step_together
from per_cli.replay import Batch
from per_cli.replay.cohort import CohortSampling, stacked_rows, supports
from per_cli.rl import explore
from per_cli.rl.is_weights import apply_rule
from per_cli.train.loop.lockstep import fail, guard, interrupt_behind
from per_cli.train.loop.updates import StackedResults, updates_for
from per_cli.train.measures.update_measures import measure_rows

if TYPE_CHECKING:
    from per_cli.train.loop.trainer import Trainer


class Steps:
    """The loop's phases over ``members`` (Trainers of one config, differing at most in the seed; built after any
    checkpoint was loaded). ``stacked``: the stacked torch update may serve a torch cohort (a cohort's note
    refuses it where it does not pay)."""

    def __init__(self, members: Sequence[Trainer], stacked: bool = True):
        self.index = {id(m): i for i, m in enumerate(members)}
        self.updates = updates_for(members, stacked)
        memories = [m.memory for m in members]
        self.sampling = CohortSampling(memories) if all(map(supports, memories)) else None
        first = members[0]
        self._schedule, self._n_actions = first.epsilon, first.agent.n_actions
        if any(m.epsilon != first.epsilon or m.agent.n_actions != self._n_actions for m in members):
            raise ValueError("the loop's members must share ε's schedule and the action count (one config)")
        self._generators = List([m.action_rng for m in members])
        self._store = (
            self.sampling is not None and self.sampling.storable and all(isinstance(m.env, PooledEnv) for m in members)
        )
        self._cached: dict[tuple[int, ...], list[int]] = {}  # _which's last answers
        self._inserted: tuple | None = None  # (how many members, ids, δ) of the last insertion_td's gather
        self._learning: set[int] = set()  # the members (ids) whose learning() was True: it stays True
        self._ending: list[PooledEnv] = []  # the EnvPool envs whose episode the batched step ended (end_collects)

    def _which(self, members: Sequence[Any]) -> list[int]:
        """Members' positions. The loop asks for the same members (all of them, those training) several times a
        step: the last few answers are remembered by the members' ids (members live as long as the loop, so an id
        stays theirs)."""
        key, cached = tuple(map(id, members)), self._cached
        which = cached.pop(key, None)  # (put back last: the least recently asked leaves first)
        if which is None:
            which = [self.index[k] for k in key]
            if len(cached) >= 4:
                cached.pop(next(iter(cached)))
        cached[key] = which
        return which

    # collecting: choose_actions, step_envs, [insertion_td, insert_priorities], end_collects

    def choose_actions(self, members: Sequence[Trainer]) -> list:
        """Each member's action of this step: ε's draw for all of them in one compiled call (``Trainer.chose``
        keeps a member's ε and random action), then the greedy actions of those acting greedily (None for a
        member that failed)."""
        n, s = len(members), self._schedule
        steps = np.array([m.state.step for m in members], dtype=np.int64)
        epsilons, draws = np.empty(n), np.empty(n, dtype=np.int64)
        which = np.asarray(self._which(members), dtype=np.int64)
        explore.explore_kernel(self._generators, which, steps, s.start, s.end, s.duration, self._n_actions,
                               epsilons, draws)  # fmt: skip
        actions = draws.tolist()
        for member, epsilon, action in zip(members, epsilons.tolist(), actions, strict=True):
            member.chose(epsilon, action if action >= 0 else None)
        greedy = [k for k, action in enumerate(actions) if action < 0]
        if greedy:
            for k, action in zip(greedy, self.greedy([members[k] for k in greedy]), strict=True):
                actions[k] = action
        return actions

    def greedy(self, members: Sequence[Trainer]) -> list:
        """Each member's greedy action for the observation in hand."""
        return self.updates.greedy(self._which(members), members)

    def step_envs(self, members: Sequence[Trainer], actions: Sequence[Any]) -> None:
        """Each member steps its env with its action and stores the transition."""
        if not self._store or not members:
            _step_pooled(members, actions)
            for member, action in zip(members, actions, strict=True):
                guard(member, member.step_env, action)
            return
        sent = np.asarray(actions, dtype=np.int64)
        try:
            obs, rewards, terminated, truncated = step_arrays([m.env for m in members], sent)
        except Exception as exc:  # noqa: BLE001 - each member's own step reports its own error
            interrupt = interrupt_behind(exc)
            if interrupt is not None:
                raise interrupt from None
            for member, action in zip(members, actions, strict=True):
                guard(member, member.step_env, action)
            return
        before = np.stack([m.observation for m in members])
        if before.shape != obs.shape or obs.ndim != 2:  # (not vector states: each stores its own)
            for k, member in enumerate(members):
                action, reward, end, cut = actions[k], float(rewards[k]), bool(terminated[k]), bool(truncated[k])
                stored_reward, stored_end = member.stored(reward, end, cut)  # (before stepped: the return before)
                member.stepped(action, obs[k], reward, end, cut)
                guard(member, member.memory.add, before[k], action, stored_reward, obs[k], stored_end, cut)
            return
        stored_rewards, stored_ends = rewards, terminated  # what the memories store (env.done_reward, ...)
        rule = members[0].store_rule  # (the members share their config)
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
        self._ending = [members[k].env for k in np.flatnonzero(terminated | truncated).tolist()]

    def insertion_td(self, members: Sequence[Trainer]) -> list | np.ndarray:
        """The δ of each member's newest transition (row k: member k's, a 1-row array); where one compiled gather
        took the transitions, their ids are kept for ``insert_priorities``."""
        td, ids = self.updates.insertion_td(self._which(members), members, self.sampling)
        self._inserted = (len(members), ids, td) if ids is not None else None
        return td

    def insert_priorities(self, members: Sequence[Trainer], td_errors: Sequence[np.ndarray]) -> None:
        """Each member's new transition gets its priority from its ``insertion_td``."""
        ids = lambda: [m.memory.latest_ids() for m in members]  # noqa: E731
        inserted, self._inserted = self._inserted, None
        if inserted is not None and inserted[0] == len(members):  # (a subset of those, in order: all of them)
            ids, td_errors = inserted[1], inserted[2]
        self._priorities(members, ids, td_errors, lambda m, k: guard(m, m.set_insertion_priority, td_errors[k]))

    def end_collects(self, members: Sequence[Trainer]) -> None:
        """Each member counts its step, logs an episode that ended and resets (``end_collect``); the EnvPool envs
        whose episode the batched step ended are reset in one call per pool first (each env's ``reset`` takes its
        observation)."""
        ending, self._ending = self._ending, []
        if len(ending) > 1:
            reset_together(ending)
        for member in members:  # (as guard, without a call per member)
            try:
                member.end_collect()
            except Exception as exc:  # noqa: BLE001 - recorded in the member's summary, the others go on
                fail(member, exc)

    # learning: due, then per gradient step sample, weigh, learn, check_results, update_priorities, measure

    def due(self, members: Sequence[Trainer]) -> tuple[list, list]:
        """(the members learning at this step, those of them that train now): ``learning()``, ``update_due()``.
        A member's ``learning()`` is asked until it is True; then it stays True (its step and its memory only
        grow), so it is not asked again."""
        latched = self._learning
        if len(latched) < len(self.index):
            for member in members:
                if id(member) not in latched and guard(member, member.learning):
                    latched.add(id(member))
        learning = [m for m in members if id(m) in latched]
        return learning, [m for m in learning if guard(m, m.update_due)]

    def sample(self, members: Sequence[Trainer]) -> list[Batch | None]:
        """Each member's next batch (None for a member whose draw raised: it failed): in one compiled call where
        the cohort sampling holds the memories, else each member's own."""
        sampling = self.sampling
        if sampling is None:
            return [guard(m, m.sample) for m in members]
        which, size = self._which(members), members[0].cfg.replay.batch_size
        drawn = sampling.sample(which, size, [m.beta_now for m in members])
        out: list[Batch | None] = list(drawn)
        for k, batch in enumerate(drawn):
            if batch is None:  # the draw raised: repeated alone to raise the member's error
                out[k] = guard(members[k], sampling.repeat_failed, which[k])
        return out

    def weigh(self, members: Sequence[Trainer], batches: Sequence[Batch]) -> None:
        """Each batch's IS weights rewritten in place by the loss's rule (``replay.is_weights``; the members share
        it): the one place it is applied, between every draw and every update (:mod:`per_cli.rl.is_weights`); on
        a cohort draw's stacked weights in one call (row by row: the values of each batch's own). ``memory_max``
        keeps the sampler's weights: nothing to do."""
        rule = members[0].cfg.replay.is_weights
        if rule == "memory_max":
            return
        stacked = stacked_rows(batches)
        if stacked is not None and stacked is batches[0].rows[0]:  # (the draw's arrays, not a gathered copy)
            apply_rule(stacked[6], rule)
            return
        for batch in batches:
            apply_rule(batch.weights, rule)

    def learn(self, members: Sequence[Trainer], batches: Sequence[Batch]) -> list:
        """Each member's agent learns from its batch: their ``UpdateResult``-s (``StackedResults`` from one
        compiled update)."""
        return self.updates.learn(self._which(members), members, batches)

    def check_results(self, members: Sequence[Trainer], results: Sequence[Any]) -> None:
        """Each member's update must be finite (``check_result``); one that is not fails (a compiled update's
        losses and mean Q values checked as arrays, only the non-finite ones member by member)."""
        if isinstance(results, StackedResults):
            bad = np.flatnonzero(~(np.isfinite(results.loss) & np.isfinite(results.q_mean))).tolist()
            members, results = [members[k] for k in bad], [results[k] for k in bad]
        for member, result in zip(members, results, strict=True):
            guard(member, member.check_result, result)

    def update_priorities(self, members: Sequence[Trainer], batches: Sequence[Batch], results) -> None:
        """Each member's batch gets its new priorities from the update's TD errors."""
        ids, tds = lambda: [b.indices for b in batches], [r.td_errors for r in results]  # noqa: E731
        if isinstance(results, StackedResults):  # the update's stacked TD errors; the draw's stacked ids
            ids, tds = lambda: _stacked_ids(batches), results.td  # noqa: E731
        self._priorities(members, ids, tds, lambda m, k: guard(m, m.update_priorities, batches[k], results[k]))

    def _priorities(self, members, ids: Callable[[], list], td_errors, own: Callable[[Trainer, int], None]) -> None:
        """New priorities of the members' transitions ``ids()`` in one compiled call; ``own(member, k)`` is the
        member's own update, run where the call cannot serve (its result: the member's own error)."""
        finite = None
        if self.sampling is not None and members:
            finite = self.sampling.update_priorities(self._which(members), ids, td_errors)
        for k, member in enumerate(members):
            if finite is None or not finite[k]:
                own(member, k)

    def measure(self, members: Sequence[Trainer], batches: Sequence[Batch], results) -> list:
        """The members' update measures in one pass over a compiled update's stacked arrays (``measure_rows``),
        where the batches are a cohort draw's; else (or should it raise) None each: each member's window measures
        its own update with the same function (``UpdateWindow.add``)."""
        stacked = stacked_rows(batches)
        if stacked is None or not isinstance(results, StackedResults):
            return [None] * len(members)
        windows = [m.window for m in members]
        held = self.sampling.episodes_held(self._which(members)) if windows[0].iid else None
        try:
            arrays = (stacked[6], stacked[7], stacked[0], stacked[8])  # weights, ages, obs, episodes
            return measure_rows(windows, results.td, *arrays, held, results.loss, results.q_mean)
        except Exception:  # noqa: BLE001 - each window measures its own updates (and reports its own error)
            return [None] * len(members)

    # the end of a step

    def end_steps(self, members: Sequence[Trainer], learning: Sequence[Trainer]) -> None:
        """Each member's ``end_step`` (``learning``: those that were learning at this step)."""
        learning_ids = {id(m) for m in learning}
        for member in members:  # (a member that failed on the way is skipped)
            if member.error is None:
                guard(member, member.end_step, id(member) in learning_ids)


def _step_pooled(members: Sequence[Any], actions: Sequence[Any]) -> None:
    """The members whose env is an EnvPool env (``env.backend: envpool``) step in one call per pool; each
    member's ``step_env`` then takes its result. Should the call raise, nothing is left and each member steps
    its own env (its own error, if any, is its own)."""
    pooled = [k for k, m in enumerate(members) if isinstance(m.env, PooledEnv)]
    if len(pooled) < 2:  # (a solo run steps its env itself)
        return
    try:
        step_together([members[k].env for k in pooled], [actions[k] for k in pooled])
    except Exception as exc:  # noqa: BLE001 - each member's own step reports its own error
        for k in pooled:
            members[k].env.drop_pending()
        interrupt = interrupt_behind(exc)
        if interrupt is not None:
            raise interrupt from None


def _stacked_ids(batches: Sequence[Batch]) -> np.ndarray | list[np.ndarray]:
    """The batches' ids (``indices``) as one (members, batch) array where they are rows of one cohort draw."""
    stacked = stacked_rows(batches)
    return stacked[5] if stacked is not None else [b.indices for b in batches]
