"""The learning phases of the loop's step (:class:`~per_cli.train.loop.steps.Steps`, whose base this is): ``due``,
then per gradient step ``sample``, ``score``, ``weigh``, ``learn``, ``check_results``, ``update_priorities``
and ``record_updates``, each one call over the members it is given (lockstep.py orders them)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from per_cli.config import Config
from per_cli.replay import Batch, kind_spec
from per_cli.replay.cohort import CohortSampling, stacked_rows
from per_cli.replay.sampler import defines
from per_cli.rl.is_weights import apply_rule
from per_cli.rl.results import Pending, UpdateResults
from per_cli.train.loop import learning_rules, reporting
from per_cli.train.loop.failures import guard
from per_cli.train.loop.loop_state import Counters
from per_cli.train.loop.one_config import shared
from per_cli.train.loop.positions import PositionsOf
from per_cli.train.loop.stopping import check_update, diverged
from per_cli.train.loop.updates import Updates
from per_cli.train.measures.cohort_rows import CohortRows
from per_cli.train.measures.update_measures import UpdateArrays

if TYPE_CHECKING:
    from per_cli.train.loop.member_data import MemberData


class LearningPhases:
    """The learning phases over the members on the seed axis; the subclass builds the ``counters``, the members'
    ``_positions``, their ``sampling`` and ``updates`` before this ``__init__``."""

    counters: Counters
    sampling: CohortSampling
    updates: Updates
    index: dict[int, int]
    _positions: PositionsOf

    def __init__(self, members: Sequence[MemberData], cfg: Config):
        """``cfg``: the members' one config."""
        # β by the step on the members' one schedule (MemberData.beta at learning_rules.beta_position), for all at
        # once; under replay.beta_increment β per batch instead (MemberData.batch_beta)
        self._beta = shared((m.beta for m in members), "β's schedule")
        self._beta_position = learning_rules.beta_position(cfg)
        self._beta_per_batch = cfg.replay.beta_increment is not None
        self.gradient_steps = cfg.train.gradient_steps
        self.lagged = cfg.train.priority_lag > 0  # (train.priority_lag: an update's results read a step later)
        self.inserts_by_td = cfg.replay.initial_priority == "td_error"  # (a new transition's priority: its δ)
        self._is_rule = cfg.replay.is_weights
        # the windows' measure settings (a resumed window keeps those it was saved with)
        self._measured_by = shared((MeasureSettings(w.threshold, w.iid) for w in (m.window for m in members)),
                                   "the update measures' settings")  # fmt: skip
        self._scores = kind_spec(cfg.replay.kind).scores  # (the kind scores its batches: score)
        multiple = shared((m.memory.sampler.multiple for m in members), "the draw's multiple")  # (LaBER's m)
        self._draw_size = cfg.replay.batch_size * multiple
        self._plans = any(defines(type(m.memory.sampler), "begin_phase") for m in members)  # (plans its bursts)
        self._train_freq = cfg.train.train_freq
        self._log_every = cfg.log.every
        # the members' measured updates over the seed axis (their windows measure alike: one config)
        self.rows = CohortRows([m.window for m in members], self._log_every, self._measured_by)
        self._learning: set[int] = set()  # the members (ids) whose learning_rules.learning was True: it stays True

    def due(self, members: Sequence[MemberData]) -> tuple[list, list]:
        """(the members learning at this step, those of them that train now: every ``train.train_freq`` steps).
        Once a member learns it keeps learning (its step and memory only grow), so it is not asked again. Those training
        get this step's β in ``counters.beta`` (per batch under ``replay.beta_increment``), and samplers that plan a
        burst of batches are told of it (``begin_phase``)."""
        latched = self._learning
        if len(latched) < len(self.index):
            for member in members:
                if id(member) not in latched and guard(member, learning_rules.learning, member):
                    latched.add(id(member))
        learning = members if len(latched) == len(self.index) else [m for m in members if id(m) in latched]
        if not learning:
            return learning, []
        c, idx = self.counters, self._positions(learning).index
        training = learning
        if self._train_freq > 1:  # (every step trains at a frequency of 1)
            due = (c.step[idx] + 1) % self._train_freq == 0
            training = learning if due.all() else [learning[k] for k in np.flatnonzero(due).tolist()]
        if not self._beta_per_batch and training:
            idx = self._positions(training).index
            positions = self._beta_position(c.step[idx], c.episode[idx])
            if len(positions) == 1 or (positions == positions[0]).all():  # (in lockstep: mostly one position)
                c.beta[idx] = self._beta(int(positions[0]))
            else:
                c.beta[idx] = self._beta.many(positions)
        if self._plans:
            for member in training:
                guard(member, member.memory.begin_phase, self.gradient_steps)
        return learning, training  # (those whose learning or begin_phase failed: left out by the loop's mask)

    def sample(self, members: Sequence[MemberData]) -> Sequence[Batch | None]:
        """Each member's next batch (None for a member whose draw failed: it fails with its draw's error, as its
        solo run raises it): the kind's one draw over the members, then their storages' gather (the cohort
        sampling's ``DrawnBatches``)."""
        sampling, at = self.sampling, self._positions(members)
        which = at.which
        # (replay.beta_increment: each member's next batch's own β, by its updates so far; else this step's)
        if self._beta_per_batch:
            betas = [m.batch_beta(m.agent.updates + 1) for m in members]
        else:
            betas = self.counters.beta[at.index]
        drawn = sampling.sample(which, self._draw_size, betas)
        if not drawn.complete:
            for k in (~drawn.drawn).nonzero()[0].tolist():  # (the error of the draw's status: draw_error)
                guard(members[k], sampling.raise_failed, which[k])
        return drawn

    def score(self, members: Sequence[MemberData], batches: Sequence[Batch]) -> Sequence[Batch]:
        """The batches to train on: for a kind whose spec says ``scores``, the networks' opinion of the drawn
        batches (one engine call, nothing learnt) handed to the kind's ``scored`` (LaBER's sub-draw, ReLo's
        priorities); for every other kind the draw itself."""
        if not self._scores:
            return batches
        which = self._positions(members).which
        return self.sampling.scored(which, batches, self.updates.score(which, members, stacked_rows(batches)))

    def weigh(self, batches: Sequence[Batch]) -> None:
        """Each batch's IS weights rewritten in place by the loss's rule (``replay.is_weights``; the members share
        it): the one place it is applied, between every draw and every update (:mod:`per_cli.rl.is_weights`), on
        the draw's stacked weights in one call, row by row (the values of each batch's own; the rows of members
        that left since the draw are rewritten too, and read by no one). ``memory_max`` keeps the sampler's
        weights: nothing to do."""
        if self._is_rule != "memory_max":
            apply_rule(batches[0].rows.arrays.weights, self._is_rule)  # (every batch is a row of one draw)

    def learn(self, members: Sequence[MemberData], batches: Sequence[Batch]) -> UpdateResults | Pending:
        """Each member's agent learns from its batch: their results, row k member k's (under
        ``train.priority_lag``, maybe still on their way: each phase after reads them by ``wait``)."""
        return self.updates.learn(self._positions(members).which, members, batches)

    def check_results(self, members: Sequence[MemberData], results: UpdateResults | Pending) -> None:
        """Each member's update must be finite: the losses and mean Q values checked as arrays; a member whose row
        is not fails with :func:`~per_cli.train.loop.stopping.check_update`'s diverged error, built from its row."""
        results = results.wait()
        for k in (~results.finite()).nonzero()[0].tolist():
            member = members[k]
            guard(member, check_update, float(results.loss[k]), float(results.q_mean[k]), member.state.step + 1,
                  member.cfg.agent)  # fmt: skip

    def update_priorities(self, members: Sequence[MemberData], batches: Sequence[Batch], results) -> None:
        """Each member's batch gets its new priorities from the update's TD errors, in one compiled call; a member
        whose TD errors the call refused (not finite: its priorities unchanged) fails: its run diverged."""
        results = results.wait()
        ids = lambda: stacked_rows(batches).indices  # noqa: E731 - the draw's stacked ids
        self._priorities(members, ids, results.td, _td_diverged)

    def _priorities(
        self, members, ids: np.ndarray | Callable[[], np.ndarray], td_errors, refused: Callable[[MemberData, int], None]
    ) -> None:
        """New priorities of the members' transitions ``ids`` (or ``ids()``) in one compiled call; ``refused(member,
        k)`` is called for each member whose TD errors the call refused (not finite), to fail it with its error."""
        if not members:
            return
        finite = self.sampling.update_priorities(self._positions(members).which, ids, td_errors)
        for k in (~np.asarray(finite, dtype=bool)).nonzero()[0].tolist():
            refused(members[k], k)

    def update_arrays(self, members: Sequence[MemberData], batches: Sequence[Batch], results) -> UpdateArrays:
        """The members' updates as their measures read them: the update's (S, B) arrays and the draw's, the
        states, episode ids and episodes held where the windows measure what needs them."""
        results, stacked = results.wait(), stacked_rows(batches)
        window = self._measured_by
        iid, states = window.iid, window.iid or window.threshold is not None
        held = self.sampling.episodes_held(self._positions(members).rows) if iid else None
        return UpdateArrays(results.td, results.losses, stacked.weights, stacked.ages, stacked.obs if states else None,
                            stacked.episodes if iid else None, held, results.loss, results.q_mean)  # fmt: skip

    def record_updates(self, members: Sequence[MemberData], batches: Sequence[Batch], results) -> None:
        """Each member's update kept over the seed axis (``rows``) until its window takes it, measured then
        (``CohortRows``, the one measuring route); only the members at a log point are logged
        (``reporting.log_point``). Should taking the arrays raise, the error is every member's of the call: each
        fails with it."""
        if not members:
            return
        try:
            self.rows.add(self._positions(members).index, self.update_arrays(members, batches, results))
        except Exception as exc:  # noqa: BLE001 - recorded in each member's summary
            for member in members:
                guard(member, _raise, exc)
            return
        every = self._log_every
        for member in members:
            if member.agent.updates % every == 0:
                guard(member, reporting.log_point, member)


class MeasureSettings(NamedTuple):
    """What the measures read of the members' windows: the correlation threshold (or None) and iid."""

    threshold: float | None
    iid: bool


def _td_diverged(member: MemberData, k: int) -> None:  # noqa: ARG001 - the priority update's refused(member, k)
    """Fail ``member``, whose TD errors were not finite: its run diverged."""
    guard(member, _raise, diverged("a TD error became non-finite", member.state.step + 1, member.cfg.agent))


def _raise(exc: Exception) -> None:
    raise exc
