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
  (``Trainer.step_env``, EnvPool envs still stepped in one call per pool); what the envs returned is kept for
  ``end_collects``;
* ``sample``, ``insert_priorities``, ``update_priorities``: one call over the members' memories, whatever their
  storage (:class:`~per_cli.replay.cohort.CohortSampling`: the kind's compiled draw and priority update, then the
  storages' gather, chosen once);
* ``learn``, ``greedy``, ``insertion_td``, ``score`` (the networks' opinion of a drawn batch, for the kinds that
  ask it: ``KindSpec.scores``): the members' networks (:mod:`per_cli.train.loop.updates`: one compiled
  call under numba; one stacked torch update or each agent's own under torch); every engine's update returns one
  :class:`~per_cli.rl.results.UpdateResults` over the seed axis, which the phases after it read whole;
* ``measure``, ``record_updates``: an update's measures in one pass over its (S, B) arrays, where a cohort draw
  made the batches (:func:`~per_cli.train.measures.update_measures.measure_table`), kept over the seed axis until
  each member's window takes its rows (:class:`~per_cli.train.measures.cohort_rows.CohortRows`); only members at a
  log point are called (``Trainer.log_point``). Else each window measures its own update with the same function;
* ``end_collects``: the counters of every member at once; a member whose episode ended logs it and resets
  (``Trainer.end_episode``);
* ``due``: which members train at this step and their β, from the counters;
* ``end_steps``: the counters move on; only a member with a periodic task at this step (``Periodic``) or an
  episode's end runs its own ``end_step``;
* ``check_results``: the update's losses and mean Q values checked as arrays.

Each member's values do not depend on who else is in a call: each works on its own buffers and generators
(tests/train/loop/test_cohort.py: one member's outputs alone, in a cohort of 7 and of 100 are identical). A member
whose phase raises is recorded ``failed`` and leaves; the others go on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from numba.typed import List

from per_cli.envs.pool import PooledEnv, reset_together, step_arrays, step_together
from per_cli.replay import Batch, kind_spec
from per_cli.replay.cohort import CohortSampling, stacked_rows
from per_cli.rl import explore
from per_cli.rl.is_weights import apply_rule
from per_cli.rl.results import Pending, UpdateResults
from per_cli.train.loop.failures import any_failed, fail, guard, interrupt_behind
from per_cli.train.loop.loop_state import Counters
from per_cli.train.loop.updates import updates_for
from per_cli.train.measures.cohort_rows import CohortRows
from per_cli.train.measures.update_measures import measure_table

if TYPE_CHECKING:
    from per_cli.train.loop.member import Member as Trainer  # (the face of a member the phases use)


class _Inserted(NamedTuple):
    """What ``insertion_td``'s one gather took, for ``insert_priorities``: for how many members, their newest
    transitions' ids and δ."""

    count: int
    ids: np.ndarray
    td: np.ndarray


class Steps:
    """The loop's phases over ``members`` (Trainers of one config, differing at most in the seed; built after any
    checkpoint was loaded). ``stacked``: the stacked torch update may serve a torch cohort (a cohort's note
    refuses it where it does not pay)."""

    def __init__(self, members: Sequence[Trainer], stacked: bool = True):
        self.index = {id(m): i for i, m in enumerate(members)}
        self.counters = Counters.over([m.state for m in members])  # the members' counters, row k member k's
        self.updates = updates_for(members, stacked)
        memories = [m.memory for m in members]
        self.sampling = CohortSampling(memories)  # (every memory: the one draw, its storages' gather)
        first = members[0]
        self._schedule, self._n_actions = first.epsilon, first.agent.n_actions
        if any(m.epsilon != first.epsilon or m.agent.n_actions != self._n_actions for m in members):
            raise ValueError("the loop's members must share ε's schedule and the action count (one config)")
        self._generators = List([m.action_rng for m in members])
        self._store = self.sampling.storable and all(isinstance(m.env, PooledEnv) for m in members)
        # β by the step, on the members' one schedule and position rule (Trainer.beta, beta_step), for all at once;
        # None under replay.beta_increment (β per batch: Trainer.beta_now)
        self._beta_rule = first if first.batch_beta is None else None
        self._burst = first.cfg.train.gradient_steps
        self._scores = kind_spec(first.cfg.replay.kind).scores  # (the kind scores its batches: score)
        self._multiple = first.memory.sampler.multiple  # (a draw is multiple · B: LaBER's large batch)
        self._plans = any(m.memory.sampler.plans_phases() for m in members)  # (a class's answer: one config, one)
        self._train_freq = first.cfg.train.train_freq
        settings = lambda w: (w.threshold, w.iid, w.loss)  # noqa: E731 - how a window measures
        self._alike = all(settings(m.window) == settings(first.window) for m in members)  # (one config: True)
        self._log_every = first.cfg.log.every
        # the members' measured updates over the seed axis, where one compiled draw and update serve them
        self.rows = CohortRows([m.window for m in members], self._log_every) if self._alike else None
        self._cached: dict[tuple[int, ...], tuple] = {}  # _positions' last answers, by the members' ids
        self._recent: list[tuple[Sequence[Any], tuple]] = []  # and by the lists asked about
        self._inserted: _Inserted | None = None  # the last insertion_td's gather
        self._learning: set[int] = set()  # the members (ids) whose learning() was True: it stays True
        self._obs: np.ndarray | None = None  # the members' observations in hand (row k member k's): _held_obs
        self._hold = self._store  # whether the loop may hold them (the batched env step's members: vector states)
        self._ending: list[PooledEnv] = []  # the EnvPool envs whose episode the batched step ended (end_collects)
        # what the envs returned this step, for end_collects: (members, next_obs, rewards, terminated, truncated,
        # infos or None)
        self._stepped: tuple | None = None
        self.finished: list = []  # the members whose budget end_steps saw end (the loop finishes them)

    def _positions(self, members: Sequence[Any]) -> tuple[list[int], np.ndarray, slice | np.ndarray]:
        """Members' positions (their rows in ``counters``): as a list, as an int64 array, and as the index that
        selects their rows of a counters' column (the whole column, ``slice(None)``, where they are all the
        members in order, as at most steps: a view, where an int64 array would copy; numpy's per-call cost is
        what a small cohort's step pays). The loop asks for the same members (all of them, those training)
        several times a step: the last few answers are remembered by the members' ids (members live as long as
        the loop, so an id stays theirs); and the last few lists asked about, by identity (the loop hands one
        list to several phases and never changes a list it handed on; a list held here keeps its identity)."""
        for known, answer in self._recent:
            if known is members:
                return answer
        found = self._position_of(members)
        self._recent = [(members, found), *self._recent[:2]]
        return found

    def _position_of(self, members: Sequence[Any]) -> tuple[list[int], np.ndarray, slice | np.ndarray]:
        key, cached = tuple(map(id, members)), self._cached
        found = cached.pop(key, None)  # (put back last: the least recently asked leaves first)
        if found is None:
            which = [self.index[k] for k in key]
            rows = np.asarray(which, dtype=np.int64)
            found = (which, rows, slice(None) if which == list(range(len(self.index))) else rows)
            if len(cached) >= 4:
                cached.pop(next(iter(cached)))
        cached[key] = found
        return found

    def _which(self, members: Sequence[Any]) -> list[int]:
        return self._positions(members)[0]

    # collecting: choose_actions, step_envs, [insertion_td, insert_priorities], end_collects

    def choose_actions(self, members: Sequence[Trainer]) -> list:
        """Each member's action of this step: ε's draw for all of them in one compiled call (their ε into
        ``counters.epsilon``), then the greedy actions of those acting greedily (None for a member that
        failed)."""
        n, s, c = len(members), self._schedule, self.counters
        _, rows, idx = self._positions(members)
        whole = isinstance(idx, slice)  # (then the kernel writes the members' ε into their column itself)
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

    def greedy(self, members: Sequence[Trainer]) -> list:
        """Each member's greedy action for the observation in hand."""
        return self.updates.greedy(self._which(members), members, self._held_obs(members))

    def _held_obs(self, members: Sequence[Trainer]) -> np.ndarray | None:
        """The members' observations in hand as one array, where the loop holds them (None where not). The
        loop holds them from the first batched env step on, where every member's is an array of one dtype and
        shape (each member's ``obs`` its row: ``Trainer.hold_obs``)."""
        if self._obs is None:
            if not self._hold or len(members) != len(self.index):
                return None
            first = members[0].obs
            self._hold = type(first) is np.ndarray and all(
                type(m.obs) is np.ndarray and m.obs.dtype == first.dtype and m.obs.shape == first.shape
                for m in members
            )  # (else observations of several kinds: each member keeps its own)
            if not self._hold:
                return None
            self._obs = np.empty((len(members), *first.shape), dtype=first.dtype)
            for member in members:
                member.hold_obs(self._obs, self.index[id(member)])
        _, rows, idx = self._positions(members)
        return self._obs[idx] if isinstance(idx, slice) else self._obs[rows]

    def step_envs(self, members: Sequence[Trainer], actions: Sequence[Any]) -> None:
        """Each member steps its env with its action and stores the transition; what the envs returned is kept
        for ``end_collects``."""
        if not self._store or not members:
            _step_pooled(members, actions)
            self._step_each(members, actions)
            return
        sent = np.asarray(actions, dtype=np.int64)
        try:
            obs, rewards, terminated, truncated = step_arrays([m.env for m in members], sent)
        except Exception as exc:  # noqa: BLE001 - each member's own step reports its own error
            interrupt = interrupt_behind(exc)
            if interrupt is not None:
                raise interrupt from None
            self._step_each(members, actions)
            return
        before = self._held_obs(members)
        if before is None:
            before = np.stack([m.obs for m in members])
        ended = np.flatnonzero(terminated | truncated).tolist()
        self._stepped = (members, obs, rewards, terminated, truncated, None, ended)
        if before.shape != obs.shape or obs.ndim != 2:  # (not vector states: each stores its own)
            for k, member in enumerate(members):
                action, reward, end, cut = actions[k], float(rewards[k]), bool(terminated[k]), bool(truncated[k])
                stored_reward, stored_end = member.stored(reward, end, cut)
                guard(member, member.memory.add, before[k], action, stored_reward, obs[k], stored_end, cut)
            return
        stored_rewards, stored_ends = rewards, terminated  # what the memories store (env.done_reward, ...)
        rule = members[0].store_rule  # (the members share their config)
        if not rule.identity:
            returns = self.counters.episode_return[self._positions(members)[2]]
            stored_rewards, stored_ends = rule.many(rewards, terminated, truncated, returns)
        self.sampling.store(
            self._positions(members)[1], before.astype(np.float32, copy=False), sent,
            stored_rewards.astype(np.float32, copy=False), obs.astype(np.float32, copy=False), stored_ends,
            truncated,
        )  # fmt: skip
        self._ending = [members[k].env for k in ended]

    def _step_each(self, members: Sequence[Trainer], actions: Sequence[Any]) -> None:
        """Each member steps its own env and stores the transition (``Trainer.step_env``)."""
        stepped = [guard(m, m.step_env, a) for m, a in zip(members, actions, strict=True)]
        ok = [k for k, result in enumerate(stepped) if result is not None]  # (None: the member failed)
        results = [stepped[k] for k in ok]
        next_obs, rewards, terminated, truncated, infos = zip(*results, strict=True) if results else [()] * 5
        arrays = (np.array(rewards, dtype=np.float64), np.array(terminated, bool), np.array(truncated, bool))
        ended = [k for k, result in enumerate(results) if result[2] or result[3]]
        self._stepped = ([members[k] for k in ok], next_obs, *arrays, infos, ended)

    def insertion_td(self, members: Sequence[Trainer]) -> list | np.ndarray:
        """The δ of each member's newest transition (row k: member k's, a 1-row array); where one compiled gather
        took the transitions, their ids are kept for ``insert_priorities``."""
        rings = self.sampling if self.sampling.rings else None  # (the compiled gather of the newest: rings only)
        td, ids = self.updates.insertion_td(self._which(members), members, rings)
        self._inserted = _Inserted(len(members), ids, td) if ids is not None else None
        return td

    def insert_priorities(self, members: Sequence[Trainer], td_errors: Sequence[np.ndarray]) -> None:
        """Each member's new transition gets its priority from its ``insertion_td``."""
        ids = lambda: [m.memory.latest_ids() for m in members]  # noqa: E731
        inserted, self._inserted = self._inserted, None
        if inserted is not None and inserted.count == len(members):  # (a subset of those, in order: all of them)
            ids, td_errors = inserted.ids, inserted.td
        self._priorities(members, ids, td_errors, lambda m, k: guard(m, m.set_insertion_priority, td_errors[k]))

    def end_collects(self, members: Sequence[Trainer]) -> None:
        """The members' counters count this step (return, length; ``ended`` cleared) and take the observations
        in hand, all at once; then each member whose episode ended logs it and resets (``end_episode``). The
        EnvPool envs whose episode the batched step ended are reset in one call per pool first (each env's
        ``reset`` takes its observation)."""
        ending, self._ending = self._ending, []
        stepped, next_obs, rewards, terminated, truncated, infos, ended = self._stepped
        self._stepped = None
        if len(ending) > 1:
            reset_together(ending)
        if len(stepped) != len(members):  # (some failed after stepping: the others, in order)
            kept = {id(m) for m in members}
            keep = [k for k, m in enumerate(stepped) if id(m) in kept]
            stepped, next_obs = [stepped[k] for k in keep], [next_obs[k] for k in keep]
            rewards, terminated, truncated = rewards[keep], terminated[keep], truncated[keep]
            infos = [infos[k] for k in keep] if infos is not None else None
            ended = np.flatnonzero(np.logical_or(terminated, truncated)).tolist()
        if not stepped:
            return
        c, idx = self.counters, self._positions(stepped)[2]
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

    # learning: due, then per gradient step sample, weigh, learn, check_results, update_priorities, measure

    def due(self, members: Sequence[Trainer]) -> tuple[list, list]:
        """(the members learning at this step, those of them that train now: every ``train.train_freq`` steps).
        A member's ``learning()`` is asked until it is True; then it stays True (its step and its memory only
        grow), so it is not asked again. Those training get this step's β in ``counters.beta`` (``Trainer.beta``
        at ``Trainer.beta_step``, for all at once; under ``replay.beta_increment`` each batch has its own:
        ``Trainer.beta_now``), and samplers that plan a burst of batches are told of it (``begin_phase``)."""
        latched = self._learning
        if len(latched) < len(self.index):
            for member in members:
                if id(member) not in latched and guard(member, member.learning):
                    latched.add(id(member))
        learning = members if len(latched) == len(self.index) else [m for m in members if id(m) in latched]
        if not learning:
            return learning, []
        c, idx = self.counters, self._positions(learning)[2]
        training = learning
        if self._train_freq > 1:  # (every step trains at a frequency of 1)
            due = (c.step[idx] + 1) % self._train_freq == 0
            training = learning if due.all() else [learning[k] for k in np.flatnonzero(due).tolist()]
        rule = self._beta_rule
        if rule is not None and training:
            idx = self._positions(training)[2]
            positions = rule.beta_step(c.step[idx], c.episode[idx])
            if len(positions) == 1 or (positions == positions[0]).all():  # (in lockstep: mostly one position)
                c.beta[idx] = rule.beta(int(positions[0]))
            else:
                c.beta[idx] = rule.beta.many(positions)
        if self._plans:
            for member in training:
                guard(member, member.memory.begin_phase, self._burst)
        return learning, [m for m in training if m.error is None] if any_failed(training) else training

    def sample(self, members: Sequence[Trainer]) -> Sequence[Batch | None]:
        """Each member's next batch (None for a member whose draw raised: it failed): the kind's one draw over the
        members, then their storages' gather (the cohort sampling's ``DrawnBatches``)."""
        sampling = self.sampling
        which, size = self._which(members), members[0].cfg.replay.batch_size * self._multiple
        per_batch = self._beta_rule is None  # (replay.beta_increment: each member's next batch's own)
        betas = [m.beta_now for m in members] if per_batch else self.counters.beta[self._positions(members)[2]]
        drawn = sampling.sample(which, size, betas)
        if drawn.complete:
            return drawn
        out: list[Batch | None] = list(drawn)
        for k in np.flatnonzero(~drawn.drawn).tolist():  # the draw raised: repeated alone to raise the member's error
            out[k] = guard(members[k], sampling.repeat_failed, which[k])
        return out

    def score(self, members: Sequence[Trainer], batches: Sequence[Batch]) -> Sequence[Batch]:
        """The batches to train on: for a kind whose spec says ``scores``, the networks' opinion of the drawn
        batches (one engine call, nothing learnt) handed to the kind's ``scored`` (LaBER's sub-draw, ReLo's
        priorities); for every other kind the draw itself."""
        if not self._scores:
            return batches
        which = self._which(members)
        return self.sampling.scored(which, batches, self.updates.score(which, members, stacked_rows(batches)))

    def weigh(self, members: Sequence[Trainer], batches: Sequence[Batch]) -> None:
        """Each batch's IS weights rewritten in place by the loss's rule (``replay.is_weights``; the members share
        it): the one place it is applied, between every draw and every update (:mod:`per_cli.rl.is_weights`); on
        a cohort draw's stacked weights in one call (row by row: the values of each batch's own). ``memory_max``
        keeps the sampler's weights: nothing to do."""
        rule = members[0].cfg.replay.is_weights
        if rule == "memory_max":
            return
        stacked = stacked_rows(batches)
        if stacked is batches[0].rows.arrays:  # (the draw's arrays, not a gathered copy)
            apply_rule(stacked.weights, rule)
            return
        for batch in batches:
            apply_rule(batch.weights, rule)

    def learn(self, members: Sequence[Trainer], batches: Sequence[Batch]) -> UpdateResults | Pending:
        """Each member's agent learns from its batch: their results, row k member k's (under
        ``train.priority_lag``, maybe still on their way: each phase after reads them by ``wait``)."""
        return self.updates.learn(self._which(members), members, batches)

    def check_results(self, members: Sequence[Trainer], results: UpdateResults | Pending) -> None:
        """Each member's update must be finite: the losses and mean Q values checked as arrays, only the
        non-finite ones member by member (``check_result``, which fails the member)."""
        results = results.wait()
        for k in np.flatnonzero(~results.finite()).tolist():
            guard(members[k], members[k].check_result, results.member(k))

    def update_priorities(self, members: Sequence[Trainer], batches: Sequence[Batch], results) -> None:
        """Each member's batch gets its new priorities from the update's TD errors."""
        results = results.wait()
        ids = lambda: stacked_rows(batches).indices  # noqa: E731 - the draw's stacked ids
        own = lambda m, k: guard(m, m.update_priorities, batches[k], results.member(k))  # noqa: E731
        self._priorities(members, ids, results.td, own)

    def _priorities(self, members, ids: Callable[[], list], td_errors, own: Callable[[Trainer, int], None]) -> None:
        """New priorities of the members' transitions ``ids()`` in one compiled call; ``own(member, k)`` is the
        member's own update, run where the call cannot serve (its result: the member's own error)."""
        finite = self.sampling.update_priorities(self._which(members), ids, td_errors) if members else None
        own_ones = range(len(members)) if finite is None else np.flatnonzero(~np.asarray(finite, dtype=bool)).tolist()
        for k in own_ones:
            own(members[k], k)

    def measure(self, members: Sequence[Trainer], batches: Sequence[Batch], results) -> tuple | None:
        """The members' update measures in one pass over the update's (S, B) arrays and the draw's (``measure_table``:
        (table, variances), and the batches' states where the windows keep them: iid); None should it raise: each
        member's window then measures its own update with the same function (``UpdateWindow.add``)."""
        if not members or self.rows is None:
            return None
        results, stacked = results.wait(), stacked_rows(batches)
        window = members[0].window
        held = self.sampling.episodes_held(self._which(members)) if window.iid else None
        try:
            table, variances = measure_table(window, results.td, stacked.weights, stacked.ages, stacked.obs,
                                             stacked.episodes, held, results.loss, results.q_mean)  # fmt: skip
        except Exception:  # noqa: BLE001 - each window measures its own updates (and reports its own error)
            return None
        return table, variances, stacked.obs if window.iid else None

    def record_updates(self, members: Sequence[Trainer], batches: Sequence[Batch], results, measured) -> None:
        """Each member's update into its window, logged at its log points: ``measure``'s (table, variances,
        states) kept over the seed axis (``rows``), and only the members at a log point called (``log_point``);
        else each member's own row measured by its window (``record_update``). A member that failed on the way
        is skipped."""
        if measured is None:
            results = results.wait()
            for k, member in enumerate(members):
                if member.error is None:
                    try:  # (as guard, without a call per member)
                        member.record_update(batches[k], results.member(k))
                    except Exception as exc:  # noqa: BLE001 - recorded in the member's summary, the others go on
                        fail(member, exc)
            return
        table, variances, obs = measured
        if any_failed(members):
            ok = [k for k, m in enumerate(members) if m.error is None]
            members, table = [members[k] for k in ok], table[ok]
            variances, obs = (None if a is None else a[ok] for a in (variances, obs))
            if not members:
                return
        self.rows.add(self._positions(members)[2], table, variances, obs)
        every = self._log_every
        for member in members:
            if member.agent.updates % every == 0:
                try:
                    member.log_point()
                except Exception as exc:  # noqa: BLE001 - recorded in the member's summary, the others go on
                    fail(member, exc)

    # the end of a step

    def end_steps(self, members: Sequence[Trainer], learning: Sequence[Trainer]) -> None:
        """The members' steps move on (``learning``: those that were learning at this step); a member with a
        periodic task at this step (before ``quiet_until``: none) or whose episode ended at it runs its own
        ``end_step``, which moves its step itself; one whose budget that ends joins ``finished`` (the loop
        finishes it). A member that failed on the way is skipped."""
        everyone = len(learning) == len(members)  # (learning: those of members that learn, before any left)
        if any_failed(members):
            members = [m for m in members if m.error is None]
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
