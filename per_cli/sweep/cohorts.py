"""``per grid --cohort-size N``: runs that differ only in the seed, packed into cohorts trained in lockstep in one
worker, each seed still in its own run directory with its own summary, lock and resume."""

from __future__ import annotations

import json
import math
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from per_cli.sweep.plan import RunSpec
from per_cli.sweep.status import FAILED, INTERRUPTED
from per_cli.sweep.worker import execute_run, lock_members, prepared, record_failure, summary_result


def default_cohort_size(todo: Sequence[RunSpec], workers: int) -> int:
    """Enough seeds per cohort that the largest group of seeds fills the workers once (at least 1)."""
    groups = _groups(todo)
    largest = max((len(g) for g in groups), default=1)
    return max(1, math.ceil(largest / max(workers, 1)))


def _groups(todo: Sequence[RunSpec]) -> list[list[RunSpec]]:
    """The runs grouped by their config without the seed, in the plan's order."""
    groups: dict[str, list[RunSpec]] = {}
    for spec in todo:
        key = json.dumps({k: v for k, v in spec.config.items() if k != "seed"}, sort_keys=True, default=str)
        groups.setdefault(key, []).append(spec)
    return list(groups.values())


def pack(todo: Sequence[RunSpec], size: int) -> list[list[RunSpec]]:
    """Cohorts of up to ``size`` runs that differ only in the seed; a group of one is a solo run."""
    return [group[i : i + size] for group in _groups(todo) for i in range(0, len(group), size)]


def members_of(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """The run payloads of a task: a cohort's runs, or the solo run itself."""
    return payload.get("cohort", [payload])


def task_result(payload: dict[str, Any], results: dict[str, dict]) -> dict[str, Any]:
    """A task's result from a result per run name: the solo run's, or, for a cohort task, all of them."""
    if "cohort" not in payload:
        return results[payload["name"]]
    return {"status": "cohort", "members": results}


def for_each_run(payload: dict[str, Any], result_of: Callable[[dict[str, Any]], dict]) -> dict[str, Any]:
    """A task's result: ``result_of`` each of its runs' payloads."""
    return task_result(payload, {m["name"]: result_of(m) for m in members_of(payload)})


def cohort_payload(payloads: list[dict[str, Any]]) -> dict[str, Any]:
    return {"name": f"{payloads[0]['name']}+{len(payloads) - 1}", "cohort": payloads}


def run_task_locked(payload: dict[str, Any], progress=None) -> dict[str, Any]:
    """A local worker's task: each run under its own lock and re-checked on disk (skip, resume or fresh), then the
    runs to train trained (:func:`train_runs`). Returns the task's result (:func:`task_result`)."""
    results, locks, todo = lock_members(members_of(payload))
    try:
        if todo:
            results |= train_runs(payload, todo, progress)
    finally:
        for lock in locks:
            lock.release()
    return task_result(payload, results)


def train_runs(payload: dict[str, Any], todo: list[tuple[dict, str]], progress=None) -> dict[str, dict[str, Any]]:
    """The runs of ``todo`` (run payload, ``fresh`` or ``resume``) of the task ``payload`` trained, each into its
    payload's ``run_dir``: a cohort task's as one cohort (:func:`train_cohort`), a solo task's run alone
    (:func:`~per_cli.sweep.worker.execute_run`). Returns one result per run name."""
    if "cohort" in payload:
        return train_cohort(todo, progress)
    ((member, mode),) = todo
    return {member["name"]: execute_run(member, Path(member["run_dir"]), mode, progress)}


def train_cohort(todo: list[tuple[dict, str]], progress=None) -> dict[str, dict[str, Any]]:
    """Train the runs of ``todo`` (run payload, ``fresh`` or ``resume``) as one cohort, each into its payload's
    ``run_dir`` (its lock is the caller's); returns one result per run name."""
    from per_cli.config import from_dict
    from per_cli.train.loop.cohort import Cohort
    from per_cli.train.loop.trainer import build_member

    payloads = [member for member, _ in todo]
    run_dirs = [Path(member["run_dir"]) for member in payloads]
    notes = [""] * len(todo)
    try:
        cohort = Cohort([from_dict(member["config"]) for member in payloads], progress=progress)
        for i, ((_, mode), run_dir) in enumerate(zip(todo, run_dirs, strict=True)):
            member = cohort.members[i]
            cohort.members[i], notes[i] = prepared(member, run_dir, mode, lambda m=member: build_member(m.cfg))
    except Exception as exc:  # noqa: BLE001 - a cohort that cannot even start: each of its runs failed
        error = f"{type(exc).__name__}: {exc}"
        for member, run_dir in zip(payloads, run_dirs, strict=True):
            record_failure(member, run_dir, error, traceback.format_exc())
        return {member["name"]: {"status": FAILED, "error": error} for member in payloads}
    try:
        summaries = cohort.run(run_dirs)
    except KeyboardInterrupt:  # SIGTERM or Ctrl-C: every unfinished run recorded it; the grid resumes them
        return {m["name"]: {"status": INTERRUPTED, "note": note} for m, note in zip(payloads, notes, strict=True)}
    return {m["name"]: summary_result(s, note) for m, s, note in zip(payloads, summaries, notes, strict=True)}
