"""A member's life in its run directory: begin (config.yaml, running summary, logger), finish (final evaluation,
checkpoint, completed summary) or a recorded end (failed with its cause, or interrupted with how to resume), and
close. Functions over a :class:`~per_cli.train.loop.member_data.MemberData`, called at that member's events."""

from __future__ import annotations

import shlex
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from per_cli.config import dump_config
from per_cli.replay import replay_label
from per_cli.rundir.logger import COMPLETED, FAILED, INTERRUPTED, RUNNING, RunLogger, read_summary, write_summary
from per_cli.rundir.machine import machine
from per_cli.train.checkpoints import checkpoint
from per_cli.train.loop import trainer_state
from per_cli.train.loop.reporting import evaluate, progress_of, results_of
from per_cli.train.loop.stopping import describe_failure

if TYPE_CHECKING:
    from per_cli.train.loop.member_data import MemberData


def begin(d: MemberData, run_dir: Path) -> None:
    """Write config.yaml and the running summary, open the logger, take the observation in hand."""
    d.run_dir = run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    checkpoint.remove_leftovers(run_dir)  # a killed or disk-full run's half-written files
    (run_dir / "config.yaml").write_text(dump_config(d.cfg))
    d.start_time = time.time() - d.elapsed_before  # a resumed run's wall time goes on from its checkpoint
    d.base = _summary_base(d)
    resumed = d.resumed_from is not None
    if resumed:
        checkpoint.truncate_metrics(run_dir, d.resumed_from)
    write_summary(run_dir, d.base)
    # TensorBoard hides events a crashed run logged after the checkpoint (purge_step)
    purge = d.resumed_from + 1 if resumed else None
    d.logger = RunLogger(run_dir, tensorboard=d.cfg.log.tensorboard, append=resumed, purge_step=purge)
    if d.obs is None:
        d.obs, _info = d.env.reset(seed=d.cfg.seed)
    d.done = d.state.step >= d.cfg.train.total_steps


def finish(d: MemberData) -> None:
    """After the last step: the final evaluation, progress line and checkpoint, then the completed summary."""
    if d.cfg.train.eval_episodes > 0:
        evaluate(d, d.state.step)
    d.progress.update(d.state.step, progress_of(d, d.epsilon(d.state.step), final=True))
    if d.cfg.train.checkpoint_every:
        trainer_state.save(d)
    d.summary = {**d.base, **results_of(d), "status": COMPLETED}
    close(d)
    write_summary(d.logger.run_dir, d.summary)


def record_failure(d: MemberData, exc: BaseException) -> None:
    """Called inside the ``except`` that caught ``exc``: the failed summary, with its traceback."""
    message = describe_failure(exc, d.run_dir or Path("."))
    d.error = exc
    _record_end(d, FAILED, message, traceback.format_exc())


def record_interrupt(d: MemberData, interrupt: BaseException) -> None:
    """The interrupted summary, with how to continue the run."""
    _record_end(d, INTERRUPTED, f"{interrupt} at step {d.state.step}; " + _resume_hint(d.run_dir))


def close(d: MemberData) -> None:
    """Close the logger and the envs (once; the loop may call it again when it ends)."""
    if d.closed:
        return
    d.closed = True
    if d.logger is not None:
        d.logger.close()
    d.env.close()
    d.evaluator.close()


def _summary_base(d: MemberData) -> dict[str, Any]:
    """summary.json's fields from the run's start (``begin`` set ``d.run_dir`` and ``d.start_time``)."""
    base = {
        "status": RUNNING,
        "env": d.cfg.env.id,
        "replay": replay_label(d.cfg.replay),
        "seed": d.cfg.seed,
        "device": str(d.device),
        "engine": d.agent.engine,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(d.start_time)),
        "machine": machine(),  # (what computed it: a run equals another bit for bit only on the same)
    }
    if d.agent.engine_note:  # why `auto` did not pick the numba engine
        base["engine_note"] = d.agent.engine_note
    if d.resumed_from is not None:
        base["started_at"] = (read_summary(d.run_dir) or {}).get("started_at", base["started_at"])
        base["resumed_from_step"] = d.resumed_from
    return base


def _record_end(d: MemberData, status: str, error: str, tb: str | None = None) -> None:
    d.summary = {**d.base, **results_of(d), "status": status, "error": error}
    if tb is not None:
        d.summary["traceback"] = tb
    if d.run_dir is not None and d.run_dir.is_dir():
        write_summary(d.run_dir, d.summary)


def _resume_hint(run_dir: Path | None) -> str:
    if run_dir is None or checkpoint.latest_checkpoint(run_dir) is None:
        return "it has no checkpoint (train.checkpoint_every: 0), so running it again starts over"
    return f"continue it with: per train --resume {shlex.quote(str(run_dir))}"
