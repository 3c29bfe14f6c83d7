"""The entry point of a run: a :class:`Trainer` is a member's data
(:class:`~per_cli.train.loop.member_data.MemberData`) built from a config, and runs it (``run``, ``resume``). What
happens to a member at the loop's events is the collaborators' over its data, called by the phases: when it learns
and its β (:mod:`~per_cli.train.loop.learning_rules`), its logged rows (:mod:`~per_cli.train.loop.reporting`), its
periodic tasks (:mod:`~per_cli.train.loop.tasks`), its run directory (:mod:`~per_cli.train.loop.run_record`) and
its checkpoints (:mod:`~per_cli.train.loop.trainer_state`). It never branches on the replay kind: every memory has
the same face."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from per_cli.config import Config
from per_cli.train.checkpoints import checkpoint
from per_cli.train.loop import trainer_state
from per_cli.train.loop.lockstep import run_members
from per_cli.train.loop.member_data import MemberData
from per_cli.train.loop.setup import ProgressSink, member_fields
from per_cli.train.loop.steps import Steps


class Trainer(MemberData):
    """Builds env, agent and memory from a config (before any run directory exists, so bad input leaves
    nothing behind), then ``run(run_dir)`` trains and logs."""

    def __init__(self, cfg: Config, device: str | None = None, progress: ProgressSink | None = None, env: Any = None):
        """``env``: the training env, when a cohort made it (its seed's EnvPool env); else ``make_env``'s."""
        super().__init__(**member_fields(cfg, device, progress, env))

    def run(self, run_dir: Path) -> dict[str, Any]:
        """Train until the budget is spent; always leaves a ``summary.json``: completed; failed (re-raised; a
        divergence names its likely cause); or interrupted by Ctrl-C or SIGTERM (raised as RunInterrupted,
        resumable from the latest checkpoint). A cohort of one (:func:`~per_cli.train.loop.lockstep.run_members`),
        so ``--seed 1`` and ``--seeds 1`` run the same code."""
        summary = run_members([self], [run_dir], Steps([self]))[0]
        if self.error is not None:
            raise self.error
        return summary

    def resume(self, run_dir: Path, loaded: checkpoint.Loaded | None = None) -> int:
        """:func:`~per_cli.train.loop.trainer_state.resume`: ``run(run_dir)`` then continues the checkpoint."""
        return trainer_state.resume(self, run_dir, loaded)
