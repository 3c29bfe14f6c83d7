"""The one training loop, over S ≥ 1 members (a solo run is a cohort of one).

A member is its data (:class:`~per_cli.train.loop.member_data.MemberData`). This module only orders the phases,
each ONE call of :class:`~per_cli.train.loop.steps.Steps` for the members alive (docs/architecture.md, "One step
of the loop"). A member that raises is recorded ``failed`` and leaves (its row of
:class:`~per_cli.train.loop.alive.Alive` turns False); the others go on. Ctrl-C or SIGTERM stop them all, each
recorded ``interrupted`` and resumable."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from per_cli.train.loop import run_record
from per_cli.train.loop.alive import Alive
from per_cli.train.loop.failures import guard
from per_cli.train.loop.member_data import MemberData
from per_cli.train.loop.steps import Steps
from per_cli.train.loop.stopping import SignalStop
from per_cli.train.loop.tasks import checkpoints_now


def run_members(members: Sequence[MemberData], run_dirs: Sequence[Path], steps: Steps) -> list[dict[str, Any]]:
    """Train ``members`` in lockstep; return their final summaries (a failed member's says ``failed``, its exception in
    ``member.error``). SIGTERM and Ctrl-C stop the loop between steps and are re-raised as RunInterrupted once every
    unfinished member recorded one. Denormals are flushed to zero meanwhile: Adam's moments of dead ReLU units decay
    through the denormal range, where x86 arithmetic is far slower."""
    alive = Alive.over(members)  # (this run's: a member fails through failures.fail)
    stop = SignalStop(deferred=True)  # (this run's: what its members' evaluations and failures look at)
    for member, run_dir in zip(members, run_dirs, strict=True):
        member.stop = stop
        run_record.begin(member, run_dir)
    torch.set_flush_denormal(True)
    with stop.installed(), np.errstate(over="ignore", invalid="ignore"):
        try:
            steps.begin(alive, stop)  # (every member has its observation in hand: the loop holds them)
            _Loop(steps, alive).run(list(members), stop)
        except BaseException as exc:  # noqa: BLE001 - every failure must be recorded, then re-raised
            interrupt = stop.interrupt_behind(exc)
            unfinished = [member for member in members if not member.summary]
            if interrupt is None:
                for member in unfinished:
                    run_record.record_failure(member, exc)
                raise
            for member in unfinished:
                run_record.record_interrupt(member, interrupt)
            raise interrupt from None
        finally:
            torch.set_flush_denormal(False)
            for member in members:
                run_record.close(member)
    return [member.summary for member in members]


class _Loop:
    """The steps of one run over ``steps``' members; ``alive``: the run's mask over them (run_members made it),
    through which every phase's members are filtered before the next."""

    def __init__(self, steps: Steps, alive: Alive):
        self.steps, self.alive = steps, alive

    def keep(self, members: list[MemberData], *aligned: Any) -> tuple:
        """(``members``, then each of ``aligned``: lists or sequences row by row with them) without the members
        whose row of the alive mask is False: all of them as they are (the same objects) where none was dropped."""
        alive = self.alive
        if not members or alive.failed == 0:
            return (members, *aligned)
        kept = [k for k, m in enumerate(members) if alive.mask[m.alive.row]]
        if len(kept) == len(members):
            return (members, *aligned)
        return ([members[k] for k in kept], *([rows[k] for k in kept] for rows in aligned))

    def keep_update(self, training: list[MemberData], batches: Sequence[Any], results: Any) -> tuple:
        """``keep`` of an update: the members, their batches, and the rows of their results (``UpdateResults`` or
        ``Pending``: ``take``)."""
        kept, rows = self.keep(training, range(len(training)))
        if len(kept) == len(training):
            return training, batches, results
        return kept, [batches[k] for k in rows], results.take(rows)

    def running(self, members: list[MemberData]) -> list[MemberData]:
        """Those of ``members`` still running by the alive mask (``members`` itself where none was dropped)."""
        return self.keep(members)[0]

    def settle(self, active: list[MemberData]) -> list:
        """Finish the members whose budget is spent; keep those still training (``active`` itself where none
        finished or failed). Only a member's ``tasks.end_step`` ends its budget, so only those that ``steps`` saw
        finish there (``steps.finished``; before the first step every member) are looked at."""
        steps = self.steps
        finished, steps.finished = steps.finished, []
        running = self.running(active)
        if not finished and running is active:
            return active
        for member in self.running(finished):
            if member.done:
                guard(member, run_record.finish, member)
        return [m for m in self.running(running) if not m.done]

    def collect(self, active: list[MemberData]) -> list:
        """One env step of every member (see the module docstring); returns those still running."""
        steps = self.steps
        actions = steps.choose_actions(active)
        stepping, actions = self.keep(active, actions)
        steps.step_envs(stepping, actions)
        active = self.running(active)
        if active and steps.inserts_by_td:  # (replay.initial_priority: td_error)
            steps.insert_priorities(*self.keep(active, steps.insertion_td(active)))
            active = self.running(active)
        steps.end_collects(active)
        return self.running(active)

    def run(self, active: list[MemberData], stop: SignalStop) -> None:
        steps = self.steps
        steps.finished = list(active)  # (a member may start with its budget spent)
        active = self.settle(active)
        lag = steps.lagged
        pending: tuple | None = None  # train.priority_lag: the last update's (training, batches, results), unread
        while active:
            stop.check()
            active = self.collect(active)
            learning, training = steps.due(active)
            learning, training = self.running(learning), self.running(training)
            for _ in range(steps.gradient_steps if training else 0):
                training, batches = self.keep(training, steps.sample(training))
                if not training:  # (every member failed: a full disk fails them all)
                    break
                batches = steps.score(training, batches)
                steps.weigh(batches)
                results = steps.learn(training, batches)
                if lag:  # this update's results are read after the next one is queued
                    previous, pending = pending, (training, batches, results)
                    if previous is not None:
                        self.after_update(*previous)
                    training = self.running(training)
                else:
                    training = self.after_update(training, batches, results)
                if not training:
                    break
            active = self.running(active)
            if pending is not None and any(checkpoints_now(m) for m in active):  # (a checkpoint holds every update)
                self.after_update(*pending)
                pending = None
                active = self.running(active)
            steps.end_steps(active, self.running(learning))
            if pending is not None and steps.finished:  # (a finished member's summary counts every update)
                self.after_update(*pending)
                pending = None
            active = self.settle(active)

    def after_update(self, training: list[MemberData], batches: Sequence[Any], results: Any) -> list:
        """What follows an update of ``training``: its results checked, the priorities updated from its TD
        errors, its measures recorded; returns those of ``training`` still running. Under ``train.priority_lag``
        it runs for the previous update after the next one is queued (members that failed since are left out)."""
        steps = self.steps
        training, batches, results = self.keep_update(training, batches, results)
        steps.check_results(training, results)
        training, batches, results = self.keep_update(training, batches, results)
        steps.update_priorities(training, batches, results)
        training, batches, results = self.keep_update(training, batches, results)
        steps.record_updates(training, batches, results)
        return self.running(training)
