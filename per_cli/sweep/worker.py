"""One run of a grid, in whichever process trains it: decide from its ``summary.json`` whether to skip, resume or
start it, train it as ``per train`` does, and answer with a small result dict."""

from __future__ import annotations

import contextlib
import os
import shutil
import traceback
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from per_cli.rundir.locks import Lock, Locked, hold_lock
from per_cli.rundir.logger import read_summary, write_summary
from per_cli.sweep.status import COMPLETED, FAILED, INTERRUPTED, action_for, run_state, set_aside, skip_note

RESULT_KEYS = ("total_steps", "episodes", "wall_time_s", "steps_per_second", "final_return_mean", "eval_return_mean")


def limit_threads() -> None:
    """One thread per run: the grid's parallelism is its runs."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS"):
        os.environ[var] = "1"
    import torch

    torch.set_num_threads(1)
    with contextlib.suppress(RuntimeError):  # already set in this process
        torch.set_num_interop_threads(1)


def record_failure(payload: dict[str, Any], run_dir: Path, error: str, tb: str = "") -> None:
    """A failed summary for a run that never reached the loop's own bookkeeping (or whose process died)."""
    import yaml

    config = payload["config"]
    run_dir.mkdir(parents=True, exist_ok=True)
    if not (run_dir / "config.yaml").exists():
        (run_dir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    previous = read_summary(run_dir) or {}
    replay = payload.get("replay", config["replay"]["kind"])
    base = {"env": config["env"]["id"], "replay": replay, "seed": config["seed"]}
    write_summary(run_dir, {**base, **previous, "status": FAILED, "error": error, "traceback": tb})


def summary_result(summary: dict[str, Any], note: str = "") -> dict[str, Any]:
    """A finished run's result, from its summary: its status, and its numbers where it completed, else its error."""
    if summary.get("status") == COMPLETED:
        return {"status": COMPLETED, "note": note, **{k: summary.get(k) for k in RESULT_KEYS}}
    return {"status": summary.get("status", FAILED), "error": summary.get("error"), "note": note}


def prepared(member: Any, run_dir: Path, mode: str, fresh: Callable[[], Any]) -> tuple[Any, str]:
    """(member, note) ready to train into ``run_dir``: ``fresh``, any older attempt removed (an unfinished or failed
    one: no mixed logs); ``resume``, resumed from its latest checkpoint, or where that is damaged or does not fit,
    the run's files set aside and ``fresh()`` in its place."""
    if mode != "resume":
        if run_dir.exists():
            shutil.rmtree(run_dir)
        return member, ""
    from per_cli.train.loop.trainer_state import resume

    try:
        return member, f"resumed from step {resume(member, run_dir)}"
    except Exception as exc:  # noqa: BLE001 - a damaged checkpoint: its files aside, the run over again
        why = f"{type(exc).__name__}: {exc}"
        return fresh(), f"checkpoint not usable ({why}); its files moved to {set_aside(run_dir)}; started again"


def decide(payload: dict[str, Any], run_dir: Path) -> str | dict[str, Any]:
    """What to do with a run, from its state on disk (:mod:`per_cli.sweep.status`): a result dict if it must
    not run (a failed one, the run's files set aside, where its checkpoint is refused: crafted, altered or of an
    older format), else ``resume`` or ``fresh``."""
    state = run_state(run_dir).state
    action = action_for(state, payload["retry_failed"], run_dir)
    if action == "skip":
        return {"status": "skipped", "note": skip_note(state)}
    if action != "resume":
        return "fresh"
    from per_cli.train.checkpoints.checkpoint import refusal_of

    refused = refusal_of(run_dir)
    if refused is None:
        return "resume"
    where = set_aside(run_dir)
    why = str(refused).removeprefix("--resume: ")
    error = f"checkpoint refused: {why}; its files were moved to {where}; --retry-failed starts the run again"
    record_failure(payload, run_dir, error)
    return {"status": FAILED, "error": error}


def execute_run(payload: dict[str, Any], run_dir: Path, mode: str = "fresh", progress=None) -> dict[str, Any]:
    """Train one run into ``run_dir``: ``fresh`` clears any older attempt; ``resume`` continues from its latest
    checkpoint (fresh where that is damaged). Leaves a summary.json that says completed, failed or interrupted."""
    note = ""
    try:
        from per_cli.config import from_dict
        from per_cli.train.loop.trainer import build_member, run_member

        cfg = from_dict(payload["config"])
        fresh = partial(build_member, cfg, progress=progress)
        member, note = prepared(fresh(), run_dir, mode, fresh)
    except Exception as exc:  # noqa: BLE001 - a run that cannot even start is a failed run
        error = f"{type(exc).__name__}: {exc}"
        if run_dir.exists() and mode == "fresh":
            shutil.rmtree(run_dir)
        record_failure(payload, run_dir, error, traceback.format_exc())
        return {"status": FAILED, "error": error, "note": note}
    try:
        summary = run_member(member, run_dir)
    except KeyboardInterrupt:  # SIGTERM or Ctrl-C: the run recorded it as interrupted; the grid resumes it
        return {"status": INTERRUPTED, "note": note}
    except Exception as exc:  # noqa: BLE001 - the run recorded it as failed; the grid goes on
        return {"status": FAILED, "error": f"{type(exc).__name__}: {exc}", "note": note}
    return summary_result({**summary, "status": COMPLETED}, note)


def lock_members(members: Sequence[dict[str, Any]]) -> tuple[dict[str, dict], list[Lock], list[tuple[dict, str]]]:
    """Each run's lock held and :func:`decide`'s answer under it: (the result of each run that must not train, ``busy``
    where another process holds its lock; the locks held; each run to train, with ``resume`` or ``fresh``)."""
    answered: dict[str, dict[str, Any]] = {}
    locks, todo = [], []
    for member in members:
        try:
            lock = hold_lock(Path(member["lock"]))
        except Locked:
            answered[member["name"]] = {"status": "busy", "error": "another process holds this run's lock"}
            continue
        mode = decide(member, Path(member["run_dir"]))
        if isinstance(mode, dict):
            lock.release()
            answered[member["name"]] = mode
        else:
            locks.append(lock)
            todo.append((member, mode))
    return answered, locks, todo
