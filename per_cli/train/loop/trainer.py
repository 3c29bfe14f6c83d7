"""A member of the one training loop: its data (:class:`~per_cli.train.loop.member_data.MemberData`) plus the calls
the loop's phases make on it (the face :class:`~per_cli.train.loop.member.Member` names). It never branches on the
replay kind: every memory has the same face. Its run directory, checkpoints, logged rows and periodic tasks are
collaborators over its data (:mod:`~per_cli.train.loop.run_record`, :mod:`~per_cli.train.loop.trainer_state`,
:mod:`~per_cli.train.loop.reporting`, :mod:`~per_cli.train.loop.tasks`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from per_cli.config import Config
from per_cli.train.checkpoints import checkpoint
from per_cli.train.loop import reporting, run_record, tasks, trainer_state
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

    def record_failure(self, exc: BaseException) -> None:
        run_record.record_failure(self, exc)

    def close(self) -> None:
        run_record.close(self)

    # collecting one env step at ``state.step``, in phases that the loop runs for all members at once
    # (:class:`~per_cli.train.loop.steps.Steps`: ε's draw, the greedy actions, the envs' step and the stores, the
    # counters and the observations in hand, the envs' resets); a member's own call: end_episode where its
    # episode ended

    @property
    def inserts_by_td(self) -> bool:
        """``replay.initial_priority: td_error``: a new transition's priority is its own TD error."""
        return self.cfg.replay.initial_priority == "td_error"

    def end_episode(self, info: dict[str, Any]) -> None:
        """The episode ended at this step (the loop counted the step in ``state`` already): logged (``state.ended``:
        False for an Atari life lost, not a game over); the loop then resets the env for the next one."""
        self.state.ended = reporting.log_episode(self, info, self.state.epsilon)

    # learning: learning, sample (β: beta_now, beta_step), then after an update log_point (the loop's phases
    # check, prioritize and measure the update over the seed axis: learning.py)

    def learning(self) -> bool:
        """Whether learning has begun at this step (hindsight stores transitions when their episode ends, so
        the memory can lag the step count). Once True it stays True: the step and the memory's length only grow
        (the loop stops asking)."""
        return self.state.step + 1 >= self.learn_from and len(self.memory) >= self.min_fill

    @property
    def beta_now(self) -> float:
        """β of the next batch (a cohort draws them with it): this step's, which the loop's ``due`` sets; under
        ``replay.beta_increment`` the next batch's own, from the batches sampled so far (one per update:
        ``agent.updates``, which a checkpoint carries)."""
        if self.batch_beta is not None:
            return self.batch_beta(self.agent.updates + 1)
        return self.state.beta

    @property
    def min_fill(self) -> int:
        """Transitions the memory must hold before ``learning`` (the batch, or a resumed run's refill)."""
        return max(self.refill, self.cfg.replay.batch_size)

    @property
    def beta_by_step(self) -> bool:
        """Whether β's position is the step alone (else it may follow the episode count: ``beta_step``)."""
        return self.cfg.train.total_episodes is None or self.cfg.replay.beta_end_step is not None

    def beta_step(self, step: int | np.ndarray, episode: int | np.ndarray | None = None) -> int | np.ndarray:
        """The position on β's schedule at ``step`` with ``episode`` episodes finished (this run's count by
        default; both may be int64 arrays: the loop's, for all members at once). It is defined over total_steps;
        under an episode budget the run may end sooner, so the schedule follows whichever budget is further along
        and β reaches 1 at the end."""
        t = self.cfg.train
        if self.beta_by_step:
            return step
        episode = self.state.episode if episode is None else episode
        return np.maximum(step, episode * t.total_steps // t.total_episodes)

    def log_point(self) -> None:
        """The window's measures logged where the update just made is a log point (every ``log.every``
        updates). A cohort that keeps its members' measured updates itself calls it for those at a log point."""
        if self.agent.updates % self.cfg.log.every == 0:
            reporting.log_updates(self, self.state.step + 1, self.replay_beta())

    # the end of a step

    def end_step(self, learning: bool) -> None:
        """:func:`~per_cli.train.loop.tasks.end_step` of this member."""
        tasks.end_step(self, learning)

    def checkpoints_now(self) -> bool:
        return tasks.checkpoints_now(self)
