"""The loop's phases over S >= 1 members, each written once: a solo run is a cohort of one through the same calls.

:class:`Steps` runs each phase as ONE call over the members it is given, on data with a leading seed axis
(counters, observations, the env batch, :class:`~per_cli.replay.cohort.CohortSampling`, the networks through
:mod:`per_cli.train.loop.updates`, the measures); a member's own objects are called only at its events. A member's
values do not depend on who else is in a call (tests/train/loop/test_cohort.py). The phases in order:
docs/architecture.md."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numba.typed import List

from per_cli.envs.batch import EachEnv, EnvStep, PooledBatch, env_batch
from per_cli.replay.cohort import CohortSampling
from per_cli.rl import explore
from per_cli.train.loop import reporting, tasks
from per_cli.train.loop.alive import Alive
from per_cli.train.loop.failures import fail, guard
from per_cli.train.loop.learning import LearningPhases
from per_cli.train.loop.loop_state import Counters
from per_cli.train.loop.one_config import shared
from per_cli.train.loop.positions import PositionsOf
from per_cli.train.loop.stopping import SignalStop
from per_cli.train.loop.updates import reads_host_states, updates_for

if TYPE_CHECKING:
    from per_cli.train.loop.member_data import MemberData


class Steps(LearningPhases):
    """The loop's phases over ``members`` (MemberData of one config, differing at most in the seed; built after any
    checkpoint was loaded): the collecting phases and the end of a step here, the learning phases its base's
    (:class:`~per_cli.train.loop.learning.LearningPhases`). ``stacked``: the stacked torch update may serve a
    torch cohort (a cohort's note refuses it where it does not pay). ``begin`` before the first step."""

    def __init__(self, members: Sequence[MemberData], stacked: bool = True):
        self.members = list(members)
        self.index = {id(m): i for i, m in enumerate(members)}
        self._positions = PositionsOf(self.index)  # (members' rows in counters: Positions)
        self.counters = Counters.over([m.state for m in members])  # the members' counters, row k member k's
        self.updates = updates_for(members, stacked)
        # (every memory: the one draw, its storages' gather and store; the host states gathered where read)
        self.sampling = CohortSampling([m.memory for m in members], reads_host_states(members, self.updates))
        self._schedule = shared((m.epsilon for m in members), "ε's schedule")
        self._n_actions = shared((m.agent.n_actions for m in members), "the action count")
        self._generators = List([m.action_rng for m in members])
        self._rule = shared((m.store_rule for m in members), "what is stored of a step (env.done_reward, ...)")
        super().__init__(members, members[0].cfg)  # (one config but for the seed: Cohort checked them)
        self._latest_ids = np.zeros((len(members), 1), dtype=np.int64)  # the ids insertion_td's gather took
        self.alive: Alive | None = None  # the loop's alive mask over the members (begin)
        self.obs: np.ndarray | None = None  # the members' observations in hand, row k member k's (begin)
        self.envs: EachEnv | PooledBatch | None = None  # the members' envs as one batch (begin)
        self._stepped: tuple[list, EnvStep] | None = None  # the members stepped and what their envs returned
        self.finished: list = []  # the members whose budget end_steps saw end (the loop finishes them)

    def begin(self, alive: Alive, stop: SignalStop) -> None:
        """The loop's start (every member has its observation in hand: ``run_record.begin``; ``alive``: the loop's
        mask over them; ``stop``: its signal stop): the observations become the rows of one (S, ...) array that the
        phases read and write whole (each member's ``obs`` its row: ``MemberData.hold_obs``), and the envs one batch
        (:func:`~per_cli.envs.batch.env_batch`, which asks ``stop`` whether a signal is behind an error). ValueError
        where the observations are not arrays of one shape."""
        self.alive = alive
        self.obs = np.stack([np.asarray(m.obs) for m in self.members])
        for k, member in enumerate(self.members):
            member.hold_obs(self.obs, k)
        self.envs = env_batch([m.env for m in self.members], self.obs[0], stop.interrupt_behind)

    # collecting: choose_actions, step_envs, [insertion_td, insert_priorities], end_collects

    def choose_actions(self, members: Sequence[MemberData]) -> list:
        """Each member's action of this step: ε's draw for all of them in one compiled call (their ε into
        ``counters.epsilon``), then the greedy actions of those acting greedily (None for a member that
        failed)."""
        n, s, c = len(members), self._schedule, self.counters
        _, rows, idx = self._positions(members)
        epsilons, draws = np.empty(n), np.empty(n, dtype=np.int64)
        explore.explore_kernel(self._generators, rows, c.step[idx], s.start, s.end, s.duration, self._n_actions,
                               epsilons, draws)  # fmt: skip
        c.epsilon[idx] = epsilons
        actions = draws.tolist()
        greedy = (draws < 0).nonzero()[0].tolist()
        if greedy:  # (all of them: the list itself, whose positions are known)
            acting = members if len(greedy) == n else [members[k] for k in greedy]
            at = self._positions(acting)  # (their greedy actions for the observations in hand)
            for k, action in zip(greedy, self.updates.greedy(at.which, acting, self.obs[at.index]), strict=True):
                actions[k] = action
        return actions

    def step_envs(self, members: Sequence[MemberData], actions: Sequence[Any]) -> None:
        """The members' envs step with their actions as one batch and the transitions are stored in one call;
        what the envs returned is kept for ``end_collects``. A member whose env or memory raises fails alone
        (its transition is not stored)."""
        at, sent = self._positions(members), np.asarray(actions, dtype=np.int64)
        stepped = self.envs.step(at.which, sent)
        if stepped.errors:  # (those envs' members fail; the others store theirs)
            for k, exc in stepped.errors.items():
                fail(members[k], exc)
            kept = [k for k in range(len(members)) if k not in stepped.errors]
            members, sent, stepped = [members[k] for k in kept], sent[kept], stepped.take(kept)
            at = self._positions(members)
        rewards, ends = stepped.rewards, stepped.terminated  # what the memories store (env.done_reward, ...)
        if not self._rule.identity:
            returns = self.counters.episode_return[at.index]
            rewards, ends = self._rule.many(rewards, ends, stepped.truncated, returns)
        errors = self.sampling.store(at.rows, self.obs[at.index], sent, rewards, stepped.obs, ends, stepped.truncated)
        for k, exc in errors.items():
            fail(members[k], exc)
        self._stepped = (members, stepped)

    def insertion_td(self, members: Sequence[MemberData]) -> list | np.ndarray:
        """The δ of each member's newest transition (row k: member k's, a 1-row array; None for a member that
        failed), from one gather of them; their ids are kept for ``insert_priorities``."""
        at = self._positions(members)
        latest = self.sampling.latest(at.which)
        self._latest_ids[at.index] = latest.arrays.indices
        return self.updates.insertion_td(at.which, members, latest)

    def insert_priorities(self, members: Sequence[MemberData], td_errors: Sequence[np.ndarray]) -> None:
        """Each member's new transition gets its priority from its ``insertion_td``."""
        ids = self._latest_ids[self._positions(members).index]
        own = lambda m, k: guard(m, m.memory.update_priorities, ids[k], td_errors[k])  # noqa: E731 - its own error
        self._priorities(members, ids, td_errors, own)

    def end_collects(self, members: Sequence[MemberData]) -> None:
        """The members' counters count this step (return, length; ``ended`` cleared) and take the observations
        in hand, all at once; then each member whose episode ended logs it (``reporting.end_episode``) and their envs
        reset as one batch."""
        stepped, step = self._stepped
        self._stepped = None
        if len(stepped) != len(members):  # (the one mask check: members that failed in step_envs or after it)
            kept = {id(m) for m in members}
            keep = [k for k, m in enumerate(stepped) if id(m) in kept]
            stepped, step = [stepped[k] for k in keep], step.take(keep)
        if not stepped:
            return
        c, idx = self.counters, self._positions(stepped).index
        c.episode_return[idx] += step.rewards  # (float64 += the env's reward: each reward's exact value added)
        c.episode_length[idx] += 1
        c.ended[idx] = False
        self.obs[idx] = step.obs  # (each member's obs: its row)
        ended = (step.terminated | step.truncated).nonzero()[0].tolist()
        if ended:
            self._end_episodes([stepped[k] for k in ended], [step.infos[k] for k in ended])

    def _end_episodes(self, members: list, infos: list[dict]) -> None:
        """The members whose episode ended log it (``reporting.end_episode``); then their envs reset as one batch, each
        member's next observation into its row."""
        for member, info in zip(members, infos, strict=True):
            try:  # (as guard, without a call per member)
                reporting.end_episode(member, info)
            except Exception as exc:  # noqa: BLE001 - recorded in the member's summary, the others go on
                fail(member, exc)
        alive = self.alive.mask
        members = [m for m in members if alive[m.alive.row]]
        if not members:
            return
        which = [self.index[id(m)] for m in members]  # (a list of this step's: not one to remember)
        reset = self.envs.reset(which)
        self.obs[which] = reset.obs
        for k, exc in reset.errors.items():
            fail(members[k], exc)

    # the end of a step

    def end_steps(self, members: Sequence[MemberData], learning: Sequence[MemberData]) -> None:
        """The members' steps move on (``learning``: those that were learning at this step); a member with a
        periodic task at this step (before ``quiet_until``: none) or whose episode ended at it runs its own
        ``tasks.end_step``, which moves its step itself; one whose budget that ends joins ``finished`` (the loop
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
            guard(member, tasks.end_step, member, everyone or id(member) in learning_ids)
            if member.done:
                self.finished.append(member)
