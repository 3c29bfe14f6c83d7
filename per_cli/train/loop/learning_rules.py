"""When a member learns and the β its batches are drawn with: pure reads of a
:class:`~per_cli.train.loop.member_data.MemberData`'s config, counters and agent, which the learning phases
(:mod:`~per_cli.train.loop.learning`) and the loop (:mod:`~per_cli.train.loop.lockstep`) call."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from per_cli.train.loop.member_data import MemberData


def learning(d: MemberData) -> bool:
    """Whether ``d`` learns at this step (hindsight stores transitions when their episode ends, so the memory can
    lag the step count). Once True it stays True: the step and the memory's length only grow (the loop stops
    asking)."""
    return d.state.step + 1 >= d.learn_from and len(d.memory) >= min_fill(d)


def min_fill(d: MemberData) -> int:
    """Transitions the memory must hold before ``learning`` (the batch, or a resumed run's refill)."""
    return max(d.refill, d.cfg.replay.batch_size)


def inserts_by_td(d: MemberData) -> bool:
    """``replay.initial_priority: td_error``: a new transition's priority is its own TD error."""
    return d.cfg.replay.initial_priority == "td_error"


def beta_now(d: MemberData) -> float:
    """β of ``d``'s next batch (a cohort draws them with it): this step's, which the loop's ``due`` sets; under
    ``replay.beta_increment`` the next batch's own, from the batches sampled so far (one per update:
    ``agent.updates``, which a checkpoint carries)."""
    if d.batch_beta is not None:
        return d.batch_beta(d.agent.updates + 1)
    return d.state.beta


def beta_by_step(d: MemberData) -> bool:
    """Whether β's position is the step alone (else it may follow the episode count: ``beta_step``)."""
    return d.cfg.train.total_episodes is None or d.cfg.replay.beta_end_step is not None


def beta_step(d: MemberData, step: int | np.ndarray, episode: int | np.ndarray | None = None) -> int | np.ndarray:
    """The position on β's schedule at ``step`` with ``episode`` episodes finished (``d``'s count by default;
    both may be int64 arrays: the loop's, for all members at once). It is defined over total_steps; under an
    episode budget the run may end sooner, so the schedule follows whichever budget is further along and β
    reaches 1 at the end."""
    t = d.cfg.train
    if beta_by_step(d):
        return step
    episode = d.state.episode if episode is None else episode
    return np.maximum(step, episode * t.total_steps // t.total_episodes)
