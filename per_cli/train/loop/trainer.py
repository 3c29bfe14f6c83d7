"""A run's entry: build a member from its config (:func:`~per_cli.train.loop.setup.build_member`), then run it
(:func:`run_member`), after :func:`~per_cli.train.loop.trainer_state.resume` where it continues a checkpoint. The
member is data (:class:`~per_cli.train.loop.member_data.MemberData`) that the collaborators take at the loop's
events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from per_cli.train.loop.lockstep import run_members
from per_cli.train.loop.member_data import MemberData
from per_cli.train.loop.setup import build_member
from per_cli.train.loop.steps import Steps

__all__ = ["build_member", "run_member"]  # (a run's two calls, from one module)


def run_member(member: MemberData, run_dir: Path) -> dict[str, Any]:
    """Train ``member`` into ``run_dir`` until its budget is spent; always leaves a ``summary.json``: completed;
    failed (re-raised; a divergence names its likely cause); or interrupted by Ctrl-C or SIGTERM (raised as
    RunInterrupted, resumable from the latest checkpoint). A cohort of one
    (:func:`~per_cli.train.loop.lockstep.run_members`), so ``--seed 1`` and ``--seeds 1`` run the same code."""
    summary = run_members([member], [run_dir], Steps([member]))[0]
    if member.error is not None:
        raise member.error
    return summary
