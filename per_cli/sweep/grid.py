"""``per grid``: expand a sweep (env × replay label × seed × swept keys) into runs, run them on a local process pool or
on Ray, and resume after any crash."""

from __future__ import annotations

import os
import shlex
import sys
from collections import deque
from pathlib import Path
from typing import Any

from per_cli.errors import ConfigError
from per_cli.rundir.logger import UNREADABLE
from per_cli.sweep.cohorts import cohort_payload, default_cohort_size, pack
from per_cli.sweep.plan import GridPlan, RunSpec, check_devices, plan_grid
from per_cli.sweep.report import GridProgress, dry_run_table, report
from per_cli.sweep.request import build_request
from per_cli.sweep.status import (
    EVENT_LOG,
    GRID_LOCK,
    LOCKS_DIR,
    EventLog,
    action_for,
    find_grid_dir,
    missing_config_note,
    run_state,
    set_aside,
    write_manifest,
)

__all__ = ["build_request", "check_devices", "dry_run_table", "find_grid_dir", "plan_grid", "run_grid"]


def default_workers() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return os.cpu_count() or 1


def run_grid(
    plan: GridPlan,
    grid_dir: Path,
    *,
    workers: int | None,
    backend: str = "local",
    ray_address: str | None = None,
    retry_failed: bool = False,
    cohort_size: int | None = None,
) -> int:
    """Run every run of ``plan`` that is not complete into ``grid_dir``; returns the exit code (0 all
    completed, 1 any not, 130 interrupted). On the local pool, runs that differ only in the seed train as
    cohorts of up to ``cohort_size`` seeds (None: :func:`~per_cli.sweep.cohorts.default_cohort_size`; 1: solo)."""
    from per_cli.rundir.locks import Locked, hold_lock
    from per_cli.train.loop.stopping import SignalStop

    states = {spec.name: run_state(grid_dir / spec.name).state for spec in plan.runs}
    todo = [s for s in plan.runs if action_for(states[s.name], retry_failed) != "skip"]
    run_notes = [n for s in plan.runs if (n := missing_config_note(grid_dir / s.name, states[s.name]))]
    # the executor before anything is written: a Ray cluster that cannot be reached is bad input, and leaves nothing
    # on disk; Ray first, as how many CPUs it has is known once it has started
    n_workers = workers or (default_workers() if backend == "local" else None)  # None: all of Ray's CPUs
    executor = _executor(backend, n_workers, ray_address) if todo and backend == "ray" else None
    size = cohort_size or default_cohort_size(todo, executor.size if executor is not None else n_workers or 1)
    tasks = pack(todo, size) if size > 1 else [[spec] for spec in todo]
    if todo and backend == "local":
        executor = _executor(backend, max(1, min(n_workers, len(tasks))), ray_address)
    try:
        grid_dir.mkdir(parents=True, exist_ok=True)
        (grid_dir / LOCKS_DIR).mkdir(exist_ok=True)
        grid_lock = hold_lock(grid_dir / GRID_LOCK, wait_s=0)
    except Locked:
        if executor is not None:
            executor.close()
        raise ConfigError(f"{grid_dir} is being run by another per grid process; wait for it or stop it") from None
    print(
        f"grid {shlex.quote(str(grid_dir))}: {len(plan.runs)} runs, {len(todo)} to run, "
        f"{len(plan.runs) - len(todo)} skipped "
        f"({sum(v == 'completed' for v in states.values())} already complete); backend {backend}"
        + (f", {executor.size} worker{'s' if executor.size != 1 else ''}" if executor is not None else "")
        + (f"; seeds in cohorts of up to {size} ({len(tasks)} tasks)" if size > 1 else ""),
        file=sys.stderr,
        flush=True,
    )  # (said before the manifest is written: a large grid's takes a while)
    command = shlex.join(["per", *sys.argv[1:]])
    write_manifest(grid_dir, command, plan.request.manifest(), [s.manifest() for s in plan.runs])
    for spec in todo:  # an unreadable summary with no checkpoint to resume: its files are kept, aside
        run_dir = grid_dir / spec.name
        if states[spec.name] == UNREADABLE and action_for(UNREADABLE, retry_failed, run_dir) == "retry":
            where = set_aside(run_dir)
            run_notes.append(f"{spec.name}: summary.json cannot be read; its files moved to {shlex.quote(str(where))}")
    for note in run_notes:
        print(f"note: {note}", file=sys.stderr)

    events = EventLog(grid_dir / EVENT_LOG)
    ran: dict[str, dict] = {}  # finished in this invocation: name -> result
    started: set[str] = set()
    interrupted = False
    try:  # SIGTERM (timeout, Slurm) stops the grid as Ctrl-C does: RunInterrupted is a KeyboardInterrupt
        with SignalStop().installed():
            if executor is not None:
                with GridProgress(len(todo), sum(s.total_steps for s in todo)) as progress:
                    try:
                        _drive(executor, tasks, size > 1, grid_dir, retry_failed, progress, events, ran, started)
                    except KeyboardInterrupt:
                        interrupted = True
                        progress.line("interrupted: stopping the runs in flight (Ctrl-C again to kill them at once)")
                        try:
                            executor.stop(interrupt=True)
                        except KeyboardInterrupt:
                            executor.kill()
    finally:
        if executor is not None:
            executor.close()
        events.write("end-grid", "-", "interrupted" if interrupted else "")
        events.close()
        grid_lock.release()

    return report(plan, grid_dir, ran, started, retry_failed, interrupted, sys.stdout)


def _executor(backend: str, workers: int | None, ray_address: str | None):
    """Where the runs train: local worker processes (:mod:`.local`) or Ray tasks (:mod:`.ray_backend`), both running
    :mod:`.worker` and answering with the same events (``backend``: local or ray, as the CLI checks)."""
    if backend == "local":
        from per_cli.sweep.local import LocalExecutor

        return LocalExecutor(workers)
    from per_cli.sweep.ray_backend import RayExecutor

    try:
        return RayExecutor(workers, ray_address)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        where = f"--ray-address {ray_address}" if ray_address else "--backend ray"
        raise ConfigError(f"{where}: Ray did not start: {type(exc).__name__}: {exc}") from None


def _payload(spec: RunSpec, grid_dir: Path, retry_failed: bool) -> dict[str, Any]:
    return {
        "name": spec.name,
        "run_dir": str(grid_dir / spec.name),
        "lock": str(grid_dir / LOCKS_DIR / f"{spec.name}.lock"),
        "replay": spec.replay,
        "config": spec.config,
        "retry_failed": retry_failed,
    }


def _drive(executor, tasks, cohorts, grid_dir, retry_failed, progress, events, ran, started) -> None:
    """Submit the tasks (a run, or with ``cohorts`` a cohort of runs: a leftover seed as a cohort of one) as workers
    free up; record each run's result as it comes."""
    pending = deque(tasks)
    in_flight: dict[str, list[RunSpec]] = {}
    while pending or in_flight:
        while pending and executor.free() > 0:
            group = pending.popleft()
            payloads = [_payload(spec, grid_dir, retry_failed) for spec in group]
            payload = cohort_payload(payloads) if cohorts else payloads[0]
            for spec in group:
                events.write("start", spec.name)
                started.add(spec.name)
            executor.submit(payload)
            in_flight[payload["name"]] = group
        for kind, name, data in executor.poll(timeout=0.5):
            if kind == "progress":
                progress.step(name, data)
                continue
            group = in_flight.pop(name)
            for spec in group:
                result = data["members"].get(spec.name, _NO_RESULT) if data.get("status") == "cohort" else data
                ran[spec.name] = result
                events.write("end", spec.name, result.get("status", "?"))
                progress.finished(spec, result)


_NO_RESULT = {"status": "failed", "error": "its cohort returned no result for it"}
