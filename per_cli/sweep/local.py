"""The local backend: spawned worker processes, each training one run (or cohort) at a time under its lock, and dying
with the driver, so that no orphan writes into a run directory that a resumed grid restarts."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from multiprocessing import connection
from pathlib import Path
from typing import Any

from per_cli.errors import os_error_line
from per_cli.rundir.logger import COMPLETED, FAILED, read_summary
from per_cli.sweep.cohorts import for_each_run, members_of, run_task_locked
from per_cli.sweep.worker import limit_threads, record_failure, summary_result
from per_cli.train.loop.stopping import SignalStop

Event = tuple[str, str, Any]  # ("progress", run, step) | ("done", run, result dict)
STOP_GRACE_S = 15.0


def _die_with_parent(parent_pid: int) -> None:
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: the kernel kills us when the driver dies
        except Exception:  # noqa: BLE001, S110 - the watchdog below still covers it
            pass

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(1.0)
        os._exit(70)

    if os.getppid() != parent_pid:
        os._exit(70)
    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


class _PipeProgress:
    """Sends the run's step to the driver (every 1000 steps)."""

    def __init__(self, conn, name: str):
        self.conn, self.name = conn, name

    def update(self, step: int, info: dict[str, Any]) -> None:
        self.conn.send(("progress", self.name, step))


def worker_main(conn, parent_pid: int) -> None:
    """A local worker: trains the runs the driver sends, one at a time, until told to stop (None)."""
    _die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C belongs to the driver, which decides
    # SIGTERM is the driver's way to stop a run: in a run, the loop records it as interrupted; between runs
    # it ends the worker. Either way it is raised as RunInterrupted (a KeyboardInterrupt).
    try:
        with SignalStop().installed():
            limit_threads()
            while True:
                payload = conn.recv()
                if payload is None:  # idle, holding no run and no open file: skip the slow interpreter teardown
                    conn.close()
                    os._exit(0)
                try:
                    result = run_task_locked(payload, _PipeProgress(conn, members_of(payload)[0]["name"]))
                except OSError as exc:  # outside a run's own handling (its lock, its old files): a full disk
                    error = os_error_line(exc)  # (one line, no traceback from the worker)
                    result = for_each_run(payload, lambda _, error=error: {"status": "failed", "error": error})
                conn.send(("done", payload["name"], result))
                statuses = {result["status"], *(r["status"] for r in result.get("members", {}).values())}
                if "interrupted" in statuses:
                    return
    except (KeyboardInterrupt, EOFError, BrokenPipeError):
        return


def _lost(payload: dict[str, Any], error: str) -> dict[str, Any]:
    run_dir = Path(payload["run_dir"])
    summary = read_summary(run_dir) or {}
    if summary.get("status") == COMPLETED:
        return summary_result(summary)
    record_failure(payload, run_dir, error)
    return {"status": FAILED, "error": error}


class _Worker:
    def __init__(self, proc, conn):
        self.proc, self.conn = proc, conn
        self.task: dict | None = None


class LocalExecutor:
    def __init__(self, workers: int):
        import multiprocessing

        self._ctx = multiprocessing.get_context("spawn")
        self.size = workers
        self._workers: list[_Worker] = []

    def free(self) -> int:
        return self.size - sum(w.task is not None for w in self._workers)

    def _start_worker(self) -> _Worker:
        parent_conn, child_conn = self._ctx.Pipe()
        proc = self._ctx.Process(target=worker_main, args=(child_conn, os.getpid()), daemon=True, name="per-grid")
        # started with SIGINT ignored (inherited through exec), so a Ctrl-C during its start-up cannot hit it
        old = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            proc.start()
        finally:
            signal.signal(signal.SIGINT, old)
        child_conn.close()
        worker = _Worker(proc, parent_conn)
        self._workers.append(worker)
        return worker

    def submit(self, payload: dict[str, Any]) -> None:
        worker = next((w for w in self._workers if w.task is None), None) or self._start_worker()
        worker.task = payload
        worker.conn.send(payload)

    def poll(self, timeout: float) -> list[Event]:
        events: list[Event] = []
        by_conn = {w.conn: w for w in self._workers}
        by_sentinel = {w.proc.sentinel: w for w in self._workers}
        dead = []
        for obj in connection.wait(list(by_conn) + list(by_sentinel), timeout):
            if obj in by_sentinel:  # its process ended
                dead.append(by_sentinel[obj])
            elif not self._drain(by_conn[obj], events):  # its pipe closed
                dead.append(by_conn[obj])
        for worker in dict.fromkeys(dead):
            self._drain(worker, events)
            worker.proc.join(timeout=5)
            self._workers.remove(worker)
            if worker.task is not None:  # it died holding a run: record the run as failed, go on
                events.append(("done", worker.task["name"], self._died(worker)))
        return events

    def _drain(self, worker: _Worker, events: list[Event]) -> bool:
        try:
            while worker.conn.poll():
                kind, name, data = worker.conn.recv()
                events.append((kind, name, data))
                if kind == "done":
                    worker.task = None
        except (EOFError, OSError):
            return False
        return True

    @staticmethod
    def _died(worker: _Worker) -> dict[str, Any]:
        """The result of each run of a dead worker's task: completed where its summary says so, else failed."""
        code = worker.proc.exitcode
        how = f"signal {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit code {code}"
        return for_each_run(worker.task, lambda payload: _lost(payload, f"worker process died ({how}) during the run"))

    def stop(self, interrupt: bool = False) -> None:
        """Stop every worker: busy ones get SIGTERM (their run records the interrupt), idle ones exit."""
        for w in self._workers:
            if not w.proc.is_alive():
                continue
            if w.task is not None and interrupt:
                w.proc.terminate()
            else:
                try:
                    w.conn.send(None)
                except (BrokenPipeError, OSError):
                    w.proc.terminate()
        deadline = time.monotonic() + STOP_GRACE_S
        for w in self._workers:
            w.proc.join(timeout=max(0.0, deadline - time.monotonic()))
        self.kill()

    def kill(self) -> None:
        for w in self._workers:
            if w.proc.is_alive():
                w.proc.kill()
                w.proc.join(timeout=5)

    def close(self) -> None:
        self.stop()
        for w in self._workers:
            w.conn.close()
        self._workers.clear()
