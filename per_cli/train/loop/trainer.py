"""A run's entry: build a member from its config (:func:`build_member`), then run it (:func:`run_member`), after
:func:`~per_cli.train.loop.trainer_state.resume` where it continues a checkpoint. The member is data
(:class:`~per_cli.train.loop.member_data.MemberData`) that the collaborators take at the loop's events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from per_cli.config import Config
from per_cli.train.loop.lockstep import run_members
from per_cli.train.loop.member_data import MemberData
from per_cli.train.loop.setup import ProgressSink, member_fields
from per_cli.train.loop.steps import Steps


def build_member(
    cfg: Config, device: str | None = None, progress: ProgressSink | None = None, env: Any = None
) -> MemberData:
    """Env, agent and memory from ``cfg``, before any run directory exists (bad input leaves nothing behind).
    ``env``: the training env, when a cohort made it (its seed's EnvPool env); else ``make_env``'s."""
    return MemberData(**member_fields(cfg, device, progress, env))


def run_member(member: MemberData, run_dir: Path) -> dict[str, Any]:
    """Train ``member`` into ``run_dir`` until its budget is spent; always leaves a ``summary.json``: completed;
    failed (re-raised; a divergence names its likely cause); or interrupted by Ctrl-C or SIGTERM (raised as
    RunInterrupted, resumable from the latest checkpoint). A cohort of one
    (:func:`~per_cli.train.loop.lockstep.run_members`), so ``--seed 1`` and ``--seeds 1`` run the same code."""
    summary = run_members([member], [run_dir], Steps([member]))[0]
    if member.error is not None:
        raise member.error
    return summary
