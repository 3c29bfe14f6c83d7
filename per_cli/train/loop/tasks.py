"""A member's periodic tasks at the end of a step: target syncs, the budget, evaluation, progress, checkpoint
(which steps carry one: :class:`~per_cli.train.loop.periodic.Periodic`). Functions over a
:class:`~per_cli.train.loop.member_data.MemberData`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from per_cli.train.loop import trainer_state
from per_cli.train.loop.reporting import evaluate, progress_of

if TYPE_CHECKING:
    from per_cli.train.loop.member_data import MemberData


def end_step(d: MemberData, learning: bool) -> None:
    """The rest of ``d``'s step: target syncs (by period once ``learning``, at an episode's end), the budget check
    (``done``), periodic evaluation, progress and checkpoint; then the step counter moves on. The loop calls it
    where a task may fall (``state.quiet_until``, an episode's end) and moves the others' steps itself."""
    s, cfg, due = d.state, d.cfg, d.periodic
    step = s.step
    after = step + 1
    s.quiet_until = due.next_due(after + 1)  # (the steps before it carry no task: the loop moves them on)
    if learning and due.syncs(after):
        sync_target(d)
    if s.ended and cfg.agent.target_update_on_episode_end:
        sync_target(d)
    if due.ends(after, s.episode):
        s.step, d.done = after, True  # the final evaluation, progress line and checkpoint: run_record.finish
        return
    if due.evaluates(after):
        evaluate(d, after)
    if due.reports(after):
        d.progress.update(after, progress_of(d, d.epsilon(step)))
    s.step = after  # the step to run next
    if due.checkpoints(after):
        trainer_state.save(d)


def checkpoints_now(d: MemberData) -> bool:
    """Whether this step's ``end_step`` writes a checkpoint (under ``train.priority_lag`` the loop reads the last
    update's results first)."""
    return d.periodic.checkpoints(d.state.step + 1)


def sync_target(d: MemberData) -> None:
    d.agent.sync_target()
    d.state.target_syncs += 1
