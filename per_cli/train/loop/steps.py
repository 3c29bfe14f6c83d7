"""The loop's phases over S >= 1 members, each written once: a solo run is a cohort of one through the same calls.

:func:`per_cli.train.loop.lockstep.run_members` orders the phases; :class:`Steps` runs each for all the members it
is given, as ONE call where the work is compiled, and member by member only where a member's own object does the
work (its env, its window, its events):

* the members' counters (step, the episode in progress's return and length, this step's ε and β) are the
  columns of one :class:`~per_cli.train.loop.loop_state.Counters` over them (each member's ``state`` reads its
  row): the phases move them for every member at once;
* ``choose_actions``: ε and ε-greedy's draw of every member in one compiled call on each member's own generator
  (:mod:`per_cli.rl.explore`), then the greedy actions of those acting greedily (``updates.greedy``);
* ``step_envs``: where every member has an EnvPool env and a plain ring memory of vector states, the pool steps in
  one call (:func:`~per_cli.envs.pool.step_arrays`) and the transitions are stored in one compiled call
  (:meth:`~per_cli.replay.cohort.CohortSampling.store`); else each member steps and stores its own
  (:mod:`~per_cli.train.loop.stepping`: ``Member.step_env``, EnvPool envs still stepped in one call per pool);
  what the envs returned (:class:`~per_cli.train.loop.stepping.Stepped`) is kept for ``end_collects``;
* ``sample``, ``insert_priorities``, ``update_priorities``: one call over the members' memories, whatever their
  storage (:class:`~per_cli.replay.cohort.CohortSampling`: the kind's compiled draw and priority update, then the
  storages' gather, chosen once);
* ``learn``, ``greedy``, ``insertion_td``, ``score`` (the networks' opinion of a drawn batch, for the kinds that
  ask it: ``KindSpec.scores``): the members' networks (:mod:`per_cli.train.loop.updates`: one compiled
  call under numba; one stacked torch update or each agent's own under torch); every engine's update returns one
  :class:`~per_cli.rl.results.UpdateResults` over the seed axis, which the phases after it read whole;
* ``measure``, ``record_updates``: an update's measures in one pass over its (S, B) arrays
  (:func:`~per_cli.train.measures.update_measures.measure_table`), kept over the seed axis until each member's
  window takes its rows (:class:`~per_cli.train.measures.cohort_rows.CohortRows`); only members at a log point are
  called (``Member.log_point``). Should that pass raise, each window measures its own update with the same function;
* ``end_collects``: the counters of every member at once; a member whose episode ended logs it and resets
  (``Member.end_episode``);
* ``due``: which members train at this step and their β, from the counters;
* ``end_steps``: the counters move on; only a member with a periodic task at this step (``Periodic``) or an
  episode's end runs its own ``end_step``;
* ``check_results``: the update's losses and mean Q values checked as arrays.

Members are addressed by their rows on the seed axis (:mod:`~per_cli.train.loop.positions`). Each member's values
do not depend on who else is in a call: each works on its own buffers and generators (tests/train/loop/test_cohort.py:
one member's outputs alone, in a cohort of 7 and of 100 are identical). A member whose phase raises is recorded
``failed``; the loop hands the next phase only the members alive (its mask), so no phase filters them again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from numba.typed import List

from per_cli.envs.pool import PooledEnv, reset_together, step_arrays
from per_cli.replay.cohort import CohortSampling
from per_cli.rl import explore
from per_cli.train.loop.failures import fail, guard, interrupt_behind
from per_cli.train.loop.learning import LearningPhases
from per_cli.train.loop.loop_state import Counters
from per_cli.train.loop.positions import PositionsOf
from per_cli.train.loop.stepping import Stepped, step_each, step_pooled
from per_cli.train.loop.updates import updates_for

if TYPE_CHECKING:
    from per_cli.train.loop.member import Member


class _Inserted(NamedTuple):
    """What ``insertion_td``'s one gather took, for ``insert_priorities``: for how many members, their newest
    transitions' ids and δ."""

    count: int
    ids: np.ndarray
    td: np.ndarray


class Steps(LearningPhases):
    """The loop's phases over ``members`` (Trainers of one config, differing at most in the seed; built after any
    checkpoint was loaded): the collecting phases and the end of a step here, the learning phases its base's
    (:class:`~per_cli.train.loop.learning.LearningPhases`). ``stacked``: the stacked torch update may serve a
    torch cohort (a cohort's note refuses it where it does not pay)."""

    def __init__(self, members: Sequence[Member], stacked: bool = True):
        self.index = {id(m): i for i, m in enumerate(members)}
        self._positions = PositionsOf(self.index)  # (members' rows in counters: Positions)
        self.counters = Counters.over([m.state for m in members])  # the members' counters, row k member k's
        memories = [m.memory for m in members]
        self.sampling = CohortSampling(memories)  # (every memory: the one draw, its storages' gather)
        self.updates = updates_for(members, self.sampling, stacked)
        first = members[0]
        self._schedule, self._n_actions = first.epsilon, first.agent.n_actions
        if any(m.epsilon != first.epsilon or m.agent.n_actions != self._n_actions for m in members):
            raise ValueError("the loop's members must share ε's schedule and the action count (one config)")
        self._generators = List([m.action_rng for m in members])
        self._store = self.sampling.storable and all(isinstance(m.env, PooledEnv) for m in members)
        super().__init__(members)
        self._inserted: _Inserted | None = None  # the last insertion_td's gather
        self._obs: np.ndarray | None = None  # the members' observations in hand (row k member k's): _held_obs
        self._hold = self._store  # whether the loop may hold them (the batched env step's members: vector states)
        self._ending: list[PooledEnv] = []  # the EnvPool envs whose episode the batched step ended (end_collects)
        self._stepped: Stepped | None = None  # what the envs returned this step, for end_collects
        self.finished: list = []  # the members whose budget end_steps saw end (the loop finishes them)

    # collecting: choose_actions, step_envs, [insertion_td, insert_priorities], end_collects

    def choose_actions(self, members: Sequence[Member]) -> list:
        """Each member's action of this step: ε's draw for all of them in one compiled call (their ε into
        ``counters.epsilon``), then the greedy actions of those acting greedily (None for a member that
        failed)."""
        n, s, c = len(members), self._schedule, self.counters
        _, rows, idx = self._positions(members)
        whole = type(idx) is slice  # (then the kernel writes the members' ε into their column itself)
        epsilons, draws = c.epsilon if whole else np.empty(n), np.empty(n, dtype=np.int64)
        explore.explore_kernel(self._generators, rows, c.step[idx], s.start, s.end, s.duration, self._n_actions,
                               epsilons, draws)  # fmt: skip
        if not whole:
            c.epsilon[idx] = epsilons
        actions = draws.tolist()
        greedy = np.flatnonzero(draws < 0).tolist()
        if greedy:
            for k, action in zip(greedy, self.greedy([members[k] for k in greedy]), strict=True):
                actions[k] = action
        return actions

    def greedy(self, members: Sequence[Member]) -> list:
        """Each member's greedy action for the observation in hand."""
        return self.updates.greedy(self._which(members), members, self._held_obs(members))

    def _held_obs(self, members: Sequence[Member]) -> np.ndarray | None:
        """The members' observations in hand as one array, where the loop holds them (None where not). The
        loop holds them from the first batched env step on, where every member's is an array of one dtype and
        shape (each member's ``obs`` its row: ``Member.hold_obs``)."""
        if self._obs is None:
            if not self._hold or len(members) != len(self.index):
                return None
            first = members[0].obs
            self._hold = type(first) is np.ndarray and all(
                type(m.obs) is np.ndarray and m.obs.dtype == first.dtype and m.obs.shape == first.shape for m in members
            )  # (else observations of several kinds: each member keeps its own)
            if not self._hold:
                return None
            self._obs = np.empty((len(members), *first.shape), dtype=first.dtype)
            for member in members:
                member.hold_obs(self._obs, self.index[id(member)])
        return self._obs[self._positions(members).index]  # (a view where they are all the members)

    def step_envs(self, members: Sequence[Member], actions: Sequence[Any]) -> None:
        """Each member steps its env with its action and stores the transition; what the envs returned is kept
        for ``end_collects``. ``storable`` rings of vector states behind EnvPool envs: one call each (the envs'
        observations are the rings' rows); else each member's own (:mod:`~per_cli.train.loop.stepping`)."""
        if not self._store or not members:
            step_pooled(members, actions)
            self._stepped = step_each(members, actions)
            return
        sent = np.asarray(actions, dtype=np.int64)
        try:
            obs, rewards, terminated, truncated = step_arrays([m.env for m in members], sent)
        except Exception as exc:  # noqa: BLE001 - each member's own step reports its own error
            interrupt = interrupt_behind(exc)
            if interrupt is not None:
                raise interrupt from None
            self._stepped = step_each(members, actions)
            return
        before = self._held_obs(members)
        if before is None:
            before = np.stack([m.obs for m in members])
        ended = np.flatnonzero(terminated | truncated).tolist()
        self._stepped = Stepped(members, obs, rewards, terminated, truncated, None, ended)
        stored_rewards, stored_ends = rewards, terminated  # what the memories store (env.done_reward, ...)
        rule = members[0].store_rule  # (the members share their config)
        at = self._positions(members)
        if not rule.identity:
            stored_rewards, stored_ends = rule.many(
                rewards, terminated, truncated, self.counters.episode_return[at.index]
            )
        self.sampling.store(
            at.rows, before.astype(np.float32, copy=False), sent, stored_rewards.astype(np.float32, copy=False),
            obs.astype(np.float32, copy=False), stored_ends, truncated,
        )  # fmt: skip
        self._ending = [members[k].env for k in ended]

    def insertion_td(self, members: Sequence[Member]) -> list | np.ndarray:
        """The δ of each member's newest transition (row k: member k's, a 1-row array); where one compiled gather
        took the transitions, their ids are kept for ``insert_priorities``."""
        td, ids = self.updates.insertion_td(self._which(members), members)
        self._inserted = _Inserted(len(members), ids, td) if ids is not None else None
        return td

    def insert_priorities(self, members: Sequence[Member], td_errors: Sequence[np.ndarray]) -> None:
        """Each member's new transition gets its priority from its ``insertion_td``."""
        ids = lambda: [m.memory.latest_ids() for m in members]  # noqa: E731
        inserted, self._inserted = self._inserted, None
        if inserted is not None and inserted.count == len(members):  # (a subset of those, in order: all of them)
            ids, td_errors = inserted.ids, inserted.td
        self._priorities(members, ids, td_errors, lambda m, k: guard(m, m.set_insertion_priority, td_errors[k]))

    def end_collects(self, members: Sequence[Member]) -> None:
        """The members' counters count this step (return, length; ``ended`` cleared) and take the observations
        in hand, all at once; then each member whose episode ended logs it and resets (``end_episode``). The
        EnvPool envs whose episode the batched step ended are reset in one call per pool first (each env's
        ``reset`` takes its observation)."""
        ending, self._ending = self._ending, []
        stepped, next_obs, rewards, terminated, truncated, infos, ended = self._stepped
        self._stepped = None
        if len(ending) > 1:
            reset_together(ending)
        if len(stepped) != len(members):  # (the one mask check: members that failed in step_envs or after it)
            kept = {id(m) for m in members}
            keep = [k for k, m in enumerate(stepped) if id(m) in kept]
            stepped, next_obs = [stepped[k] for k in keep], [next_obs[k] for k in keep]
            rewards, terminated, truncated = rewards[keep], terminated[keep], truncated[keep]
            infos = [infos[k] for k in keep] if infos is not None else None
            ended = np.flatnonzero(np.logical_or(terminated, truncated)).tolist()
        if not stepped:
            return
        c, idx = self.counters, self._positions(stepped).index
        c.episode_return[idx] += rewards  # (float64 += the env's float32: each reward's exact value added)
        c.episode_length[idx] += 1
        c.ended[idx] = False
        if self._obs is not None and type(next_obs) is np.ndarray and next_obs.dtype == self._obs.dtype:
            self._obs[idx] = next_obs  # (the members hold their rows: hold_obs)
        else:
            for member, obs in zip(stepped, next_obs, strict=True):
                member.obs = obs
        for k in ended:
            member = stepped[k]
            try:  # (as guard, without a call per member)
                member.end_episode(infos[k] if infos is not None else {})
            except Exception as exc:  # noqa: BLE001 - recorded in the member's summary, the others go on
                fail(member, exc)

    # the end of a step

    def end_steps(self, members: Sequence[Member], learning: Sequence[Member]) -> None:
        """The members' steps move on (``learning``: those that were learning at this step); a member with a
        periodic task at this step (before ``quiet_until``: none) or whose episode ended at it runs its own
        ``end_step``, which moves its step itself; one whose budget that ends joins ``finished`` (the loop
        finishes it)."""
        everyone = len(learning) == len(members)  # (learning: those of members that learn)
        if not members:
            return
        c, (_, rows, idx) = self.counters, self._positions(members)
        after = c.step[idx] + 1
        busy = (after >= c.quiet_until[idx]) | c.ended[idx]
        if not busy.any():
            c.step[idx] = after
            return
        c.step[rows[~busy]] += 1
        learning_ids = set() if everyone else {id(m) for m in learning}
        for k in np.flatnonzero(busy).tolist():
            member = members[k]
            guard(member, member.end_step, everyone or id(member) in learning_ids)
            if member.done:
                self.finished.append(member)
