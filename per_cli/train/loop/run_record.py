"""A Trainer's life in its run directory: begin (config.yaml, the running summary, the logger), finish (the final
evaluation, checkpoint and the completed summary), or a recorded end (failed, with the cause named, or
interrupted, with how to resume), and the reporting that feeds them.

A mixin of :class:`~per_cli.train.loop.trainer.Trainer`, kept apart so that the trainer's module holds the loop's
phases, as :class:`~per_cli.train.loop.trainer_state.Checkpointed` holds its checkpoints: it uses the trainer's
``cfg``, ``agent``, ``env``, ``evaluator``, ``state``, ``progress``, ``device``, ``epsilon`` and the fields set in
its ``__init__`` (``run_dir``, ``logger``, ``summary``, ``error``, ``_base``, ``_closed``, ``obs``,
``_start_time``, ``_elapsed_before``, ``_resumed_from``).
"""

from __future__ import annotations

import shlex
import time
import traceback
from pathlib import Path
from typing import Any

from per_cli.config import dump_config
from per_cli.replay import replay_label
from per_cli.rundir.logger import COMPLETED, FAILED, INTERRUPTED, RUNNING, RunLogger, read_summary, write_summary
from per_cli.train.checkpoints import checkpoint
from per_cli.train.loop.reporting import progress_info, run_results
from per_cli.train.loop.stopping import describe_failure


class RunRecord:
    """The run-directory half of a Trainer: ``begin``, ``finish``, ``record_failure``, ``record_interrupt``,
    ``close`` and the summaries they write."""

    # a member's life in the loop of lockstep.py: begin, steps, then finish or a recorded end


    def begin(self, run_dir: Path) -> None:
        """Write config.yaml and the running summary, open the logger, take the observation in hand."""
        self.run_dir = run_dir
        run_dir.mkdir(parents=True, exist_ok=True)
        checkpoint.remove_leftovers(run_dir)  # a killed or disk-full run's half-written files
        (run_dir / "config.yaml").write_text(dump_config(self.cfg))
        started = time.time() - self._elapsed_before  # a resumed run's wall time goes on from its checkpoint
        self._start_time = started
        self._base = self._summary_base(run_dir, started)
        if self._resumed_from is not None:
            checkpoint.truncate_metrics(run_dir, self._resumed_from)
        write_summary(run_dir, self._base)
        resumed = self._resumed_from is not None
        # TensorBoard hides events a crashed run logged after the checkpoint (purge_step)
        purge = self._resumed_from + 1 if resumed else None
        self.logger = RunLogger(run_dir, tensorboard=self.cfg.log.tensorboard, append=resumed, purge_step=purge)
        if self.obs is None:
            self.obs = self.env.reset(seed=self.cfg.seed)[0]
        self.done = self.state.step >= self.cfg.train.total_steps

    def finish(self) -> None:
        """After the last step: the final evaluation, progress line and checkpoint, then the completed summary."""
        if self.cfg.train.eval_episodes > 0:
            self._evaluate(self.state.step)
        self.progress.update(self.state.step, self._progress_info(final=True))
        if self.cfg.train.checkpoint_every:
            self._checkpoint(self.logger.run_dir)
        self.summary = {**self._base, **self._results(), "status": COMPLETED}
        self.close()
        write_summary(self.logger.run_dir, self.summary)

    def record_failure(self, exc: BaseException) -> None:
        """Called inside the ``except`` that caught ``exc``: the failed summary, with its traceback."""
        message = describe_failure(exc, self.run_dir or Path("."))
        self.error = exc
        self._record_end(FAILED, message, traceback.format_exc())

    def record_interrupt(self, interrupt: BaseException) -> None:
        self._record_end(INTERRUPTED, f"{interrupt} at step {self.state.step}; " + self._resume_hint())

    def close(self) -> None:
        """Close the logger and the envs (once; the loop may call it again when it ends)."""
        if self._closed:
            return
        self._closed = True
        if self.logger is not None:
            self.logger.close()
        self.env.close()
        self.evaluator.close()

    def _summary_base(self, run_dir: Path, started: float) -> dict[str, Any]:
        base = {
            "status": RUNNING,
            "env": self.cfg.env.id,
            "replay": replay_label(self.cfg.replay),
            "seed": self.cfg.seed,
            "device": str(self.device),
            "engine": self.agent.engine,
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
        }
        if self.agent.engine_note:  # why `auto` did not pick the numba engine
            base["engine_note"] = self.agent.engine_note
        if self._resumed_from is not None:
            base["started_at"] = (read_summary(run_dir) or {}).get("started_at", base["started_at"])
            base["resumed_from_step"] = self._resumed_from
        return base

    def _record_end(self, status: str, error: str, tb: str | None = None) -> None:
        self.summary = {**self._base, **self._results(), "status": status, "error": error}
        if tb is not None:
            self.summary["traceback"] = tb
        if self.run_dir is not None and self.run_dir.is_dir():
            write_summary(self.run_dir, self.summary)

    def _resume_hint(self) -> str:
        run_dir = self.run_dir
        if run_dir is None or checkpoint.latest_checkpoint(run_dir) is None:
            return "it has no checkpoint (train.checkpoint_every: 0), so running it again starts over"
        return f"continue it with: per train --resume {shlex.quote(str(run_dir))}"

    # reporting

    def _progress_info(self, epsilon: float | None = None, final: bool = False) -> dict[str, Any]:
        epsilon = self.epsilon(self.state.step) if epsilon is None else epsilon
        return progress_info(self.state, self.evaluator, epsilon, time.time() - self._start_time, final)

    def _results(self) -> dict[str, Any]:
        wall = time.time() - self._start_time
        return run_results(self.state, self.evaluator, self.agent.updates, wall, self.replay_state(self.state.step))
