"""Where the runs of a grid train: a pool of spawned local worker processes, or Ray tasks.

Both run the real training code, ``Trainer(cfg).run(run_dir)``, in-process in the worker (the same code
``per train`` calls). The local pool keeps its workers alive across runs, so torch is imported once per
worker, not once per run; each worker trains one run at a time, so the driver always knows which run a dead
worker held.

Safety rules that make a SIGKILL of the grid lose at most the runs in flight, and never run anything twice:
- A local worker takes an exclusive lock (``<grid>/.locks/<run>.lock``) for the run it trains and re-checks
  the run's summary under that lock; a run already ``completed`` is never started again.
- A local worker dies with its driver (``PR_SET_PDEATHSIG`` on Linux, plus a watchdog thread), so no orphan
  keeps writing into a run directory that a resumed grid is about to restart.
- Ray tasks train in a temporary directory on whichever node runs them and return the run directory's files
  as bytes; the driver, holding the run's lock, writes them into the grid directory and renames them into
  place. No shared filesystem is needed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from multiprocessing import connection
from pathlib import Path
from typing import Any

from per_cli.train.logger import read_summary, write_summary

Event = tuple[str, str, Any]  # ("progress", run, step) | ("done", run, result dict)
STOP_GRACE_S = 15.0
LOCK_WAIT_S = 10.0
# an unfinished run resumes on Ray from its checkpoint only when its directory is at most this big (a
# checkpoint with the replay memory can be gigabytes: then the run starts again instead)
RAY_RESUME_MAX_BYTES = 512 * 2**20

# ----------------------------------------------------------------------------------------------------------
# locks


class GridLockedError(RuntimeError):
    pass


class _Lock:
    def __init__(self, fd: int | None):
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None


def hold_lock(path: Path, wait_s: float = LOCK_WAIT_S) -> _Lock:
    """An exclusive advisory lock on ``path`` (released when the holder exits, however it exits)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: no locks
        return _Lock(None)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                raise GridLockedError(str(path)) from None
            time.sleep(0.2)
            continue
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        return _Lock(fd)


# ----------------------------------------------------------------------------------------------------------
# one run, in whichever process trains it

RESULT_KEYS = ("total_steps", "episodes", "wall_time_s", "steps_per_second", "final_return_mean", "eval_return_mean")


def _summary_base(config: dict) -> dict[str, Any]:
    return {"env": config["env"]["id"], "replay": config["replay"]["kind"], "seed": config["seed"]}


def record_failure(run_dir: Path, config: dict, error: str, tb: str = "") -> None:
    """A failed summary for a run that never reached the Trainer's own bookkeeping (or whose process died)."""
    import yaml

    run_dir.mkdir(parents=True, exist_ok=True)
    if not (run_dir / "config.yaml").exists():
        (run_dir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    previous = read_summary(run_dir) or {}
    write_summary(run_dir, {**_summary_base(config), **previous, "status": "failed", "error": error, "traceback": tb})


def has_checkpoint(run_dir: Path) -> bool:
    if not (run_dir / "checkpoints").is_dir():  # cheap test first: per_cli.train.checkpoint imports torch
        return False
    try:
        from per_cli.train.checkpoint import latest_checkpoint
    except ImportError:  # pragma: no cover - a version without checkpoints
        return False
    return latest_checkpoint(run_dir) is not None


def decide(payload: dict[str, Any], run_dir: Path) -> str | dict[str, Any]:
    """What to do with a run, from its summary on disk: a result dict if it must not run (completed, or
    failed without --retry-failed), else ``resume`` (unfinished, with a checkpoint) or ``fresh``."""
    summary = read_summary(run_dir) or {}
    status = summary.get("status")
    interrupted = status == "failed" and str(summary.get("error", "")).startswith("interrupted")
    if status == "completed":
        return {"status": "skipped", "note": "already completed"}
    if status == "failed" and not interrupted:
        return "fresh" if payload["retry_failed"] else {"status": "skipped", "note": "already failed"}
    return "resume" if run_dir.exists() and has_checkpoint(run_dir) else "fresh"


def execute_run(payload: dict[str, Any], run_dir: Path, mode: str = "fresh", progress=None) -> dict[str, Any]:
    """Train one run into ``run_dir``: ``fresh`` clears any older attempt first; ``resume`` continues from the
    run's latest checkpoint (falling back to fresh when the checkpoint cannot be used). Always returns a small
    result dict and leaves a summary.json that says completed, failed, or interrupted."""
    note = ""
    try:
        from per_cli.config import from_dict
        from per_cli.train.trainer import Trainer

        cfg = from_dict(payload["config"])
        trainer = Trainer(cfg, progress=progress)
        if mode == "resume":
            try:
                note = f"resumed from step {trainer.resume(run_dir)}"
            except Exception as exc:  # noqa: BLE001 - a checkpoint that cannot continue: start over
                note = f"checkpoint not usable ({type(exc).__name__}: {exc}); started again"
                trainer, mode = Trainer(cfg, progress=progress), "fresh"
        if mode == "fresh" and run_dir.exists():
            shutil.rmtree(run_dir)  # an unfinished or failed attempt: start clean (no mixed logs)
    except Exception as exc:  # noqa: BLE001 - a run that cannot even start is a failed run
        error = f"{type(exc).__name__}: {exc}"
        if run_dir.exists() and mode == "fresh":
            shutil.rmtree(run_dir)
        record_failure(run_dir, payload["config"], error, traceback.format_exc())
        return {"status": "failed", "error": error, "note": note}
    try:
        summary = trainer.run(run_dir)
    except KeyboardInterrupt:  # the Trainer recorded it ("interrupted"); the grid restarts it on resume
        return {"status": "interrupted", "note": note}
    except Exception as exc:  # noqa: BLE001 - the Trainer recorded it as failed; the grid goes on
        return {"status": "failed", "error": f"{type(exc).__name__}: {exc}", "note": note}
    return {"status": "completed", "note": note, **{k: summary.get(k) for k in RESULT_KEYS}}


def run_locked(payload: dict[str, Any], progress=None) -> dict[str, Any]:
    """A local worker's run: under the run's lock, re-check its state on disk, then train it."""
    run_dir = Path(payload["run_dir"])
    try:
        lock = hold_lock(Path(payload["lock"]))
    except GridLockedError:
        return {"status": "busy", "error": "another process holds this run's lock"}
    try:
        mode = decide(payload, run_dir)
        return mode if isinstance(mode, dict) else execute_run(payload, run_dir, mode, progress)
    finally:
        lock.release()


# ----------------------------------------------------------------------------------------------------------
# local backend: spawned worker processes


def _limit_threads() -> None:
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS"):
        os.environ[var] = "1"
    import torch

    torch.set_num_threads(1)
    with contextlib.suppress(RuntimeError):  # already set in this process
        torch.set_num_interop_threads(1)


def _die_with_parent(parent_pid: int) -> None:
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: the kernel kills us when the driver dies
        except Exception:  # noqa: BLE001, S110 - the watchdog below still covers it
            pass

    def watch() -> None:
        while True:
            if os.getppid() != parent_pid:
                os._exit(70)
            time.sleep(1.0)

    if os.getppid() != parent_pid:
        os._exit(70)
    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


class _PipeProgress:
    """Sends the run's step to the driver (every 1000 steps) and raises a stop request that got lost."""

    def __init__(self, conn, name: str):
        self.conn, self.name = conn, name

    def update(self, step: int, info: dict[str, Any]) -> None:
        if _STOP.is_set():  # SIGTERM came, but its KeyboardInterrupt was swallowed (e.g. inside a ctypes
            raise KeyboardInterrupt  # callback while numba compiled): raise it here, in the loop, again
        self.conn.send(("progress", self.name, step))


def worker_main(conn, parent_pid: int) -> None:
    """A local worker: trains the runs the driver sends, one at a time, until told to stop (None)."""
    _die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C belongs to the driver, which decides
    signal.signal(signal.SIGTERM, _raise_interrupt)  # the driver's way to stop a run: it records "interrupted"
    try:
        _limit_threads()
        while True:
            payload = conn.recv()
            if payload is None:  # idle, holding no run and no open file: skip the slow interpreter teardown
                conn.close()
                os._exit(0)
            result = run_locked(payload, _PipeProgress(conn, payload["name"]))
            conn.send(("done", payload["name"], result))
            if result["status"] == "interrupted":
                return
    except (KeyboardInterrupt, EOFError, BrokenPipeError):
        return


_STOP = threading.Event()


def _raise_interrupt(signum, frame) -> None:  # noqa: ARG001 - signal handler signature
    _STOP.set()
    raise KeyboardInterrupt


class _Worker:
    def __init__(self, proc, conn):
        self.proc, self.conn = proc, conn
        self.task: dict | None = None


class LocalExecutor:
    def __init__(self, workers: int):
        import multiprocessing

        self._ctx = multiprocessing.get_context("spawn")
        self._size = workers
        self._workers: list[_Worker] = []

    @property
    def size(self) -> int:
        return self._size

    def free(self) -> int:
        return self._size - sum(w.task is not None for w in self._workers)

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
        ready = connection.wait(list(by_conn) + list(by_sentinel), timeout)
        dead = []
        for obj in ready:
            worker = by_conn.get(obj)
            if worker is not None:
                if not self._drain(worker, events):
                    dead.append(worker)
            else:
                dead.append(by_sentinel[obj])
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
        code = worker.proc.exitcode
        how = f"signal {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit code {code}"
        error = f"worker process died ({how}) during the run"
        payload = worker.task
        run_dir = Path(payload["run_dir"])
        if (read_summary(run_dir) or {}).get("status") == "completed":
            return {"status": "completed", **{k: read_summary(run_dir).get(k) for k in RESULT_KEYS}}
        record_failure(run_dir, payload["config"], error)
        return {"status": "failed", "error": error}

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


# ----------------------------------------------------------------------------------------------------------
# Ray backend: one task per run, files returned to the driver


def _collect_files(run_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}


def ray_train(payload: dict[str, Any]) -> dict[str, Any]:
    """The body of a Ray task: train in a temporary directory on this node (starting from the files the
    driver sent, to resume from a checkpoint); return the result and the run directory's files."""
    import socket

    _limit_threads()
    with tempfile.TemporaryDirectory(prefix="per-grid-") as tmp:
        run_dir = Path(tmp) / payload["name"]
        if payload.get("files"):
            _write_files(run_dir, payload.pop("files"))
        result = execute_run(payload, run_dir, payload.get("mode", "fresh"))
        files = _collect_files(run_dir) if run_dir.exists() else {}
    return {"result": {**result, "host": socket.gethostname()}, "files": files}


def _write_files(root: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        path = (root / rel).resolve()
        if root.resolve() not in path.parents:
            raise ValueError(f"refusing to write {rel!r} outside {root}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    root.mkdir(parents=True, exist_ok=True)


def install_files(run_dir: Path, files: dict[str, bytes]) -> None:
    """Write a run's returned files next to ``run_dir`` and rename them into place in one step."""
    incoming = run_dir.parent / f".incoming-{run_dir.name}"
    if incoming.exists():
        shutil.rmtree(incoming)
    _write_files(incoming, files)
    if run_dir.exists():
        shutil.rmtree(run_dir)
    os.replace(incoming, run_dir)


class RayExecutor:
    def __init__(self, workers: int | None, address: str | None):
        import ray

        self._ray = ray
        if address is None:
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False, configure_logging=False)
        else:
            import per_cli

            # ship this driver's per_cli to the cluster so every node trains the same code (its dependencies
            # -- torch, gymnasium -- must be installed on the nodes)
            runtime_env = {"py_modules": [str(Path(per_cli.__file__).parent)]}
            ray.init(address=address, log_to_driver=False, runtime_env=runtime_env, configure_logging=False)
        self._size = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        # max_retries: a task whose node or worker process dies is retried (its result is written only once,
        # by this driver); an exception inside the run is never retried -- it is a failed run
        self._task = ray.remote(num_cpus=1, max_retries=2, retry_exceptions=False)(ray_train)
        self._refs: dict[Any, tuple[dict, _Lock]] = {}
        self._immediate: list[Event] = []  # runs answered without a task (busy, or finished meanwhile)

    @property
    def size(self) -> int:
        return self._size

    def free(self) -> int:
        return self._size - len(self._refs) - len(self._immediate)

    def submit(self, payload: dict[str, Any]) -> None:
        try:
            lock = hold_lock(Path(payload["lock"]))
        except GridLockedError:
            self._immediate.append(("done", payload["name"], {"status": "busy", "error": "run locked elsewhere"}))
            return
        run_dir = Path(payload["run_dir"])
        mode = decide(payload, run_dir)
        if isinstance(mode, dict):
            lock.release()
            self._immediate.append(("done", payload["name"], mode))
            return
        task = dict(payload, mode=mode)
        if mode == "resume":
            size = sum(p.stat().st_size for p in run_dir.rglob("*") if p.is_file())
            if size <= RAY_RESUME_MAX_BYTES:  # the task continues from these files on its node
                task["files"] = _collect_files(run_dir)
            else:
                task["mode"] = "fresh"
        self._refs[self._task.remote(task)] = (payload, lock)

    def poll(self, timeout: float) -> list[Event]:
        if self._immediate or not self._refs:
            events, self._immediate = self._immediate, []
            return events
        events: list[Event] = []
        ready, _ = self._ray.wait(list(self._refs), num_returns=1, timeout=timeout)
        for ref in ready:
            payload, lock = self._refs.pop(ref)
            run_dir = Path(payload["run_dir"])
            try:
                out = self._ray.get(ref)
                install_files(run_dir, out["files"])
                result = out["result"]
            except Exception as exc:  # noqa: BLE001 - a task lost to Ray (node died, ...): a failed run
                error = f"ray task failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                record_failure(run_dir, payload["config"], error, traceback.format_exc())
                result = {"status": "failed", "error": error}
            finally:
                lock.release()
            events.append(("done", payload["name"], result))
        return events

    def stop(self, interrupt: bool = False) -> None:
        for ref, (_payload, lock) in list(self._refs.items()):
            self._ray.cancel(ref, force=True)
            lock.release()
        self._refs.clear()

    def kill(self) -> None:
        self.stop(interrupt=True)

    def close(self) -> None:
        self.stop(interrupt=True)
        if self._ray.is_initialized():
            self._ray.shutdown()


def make_executor(backend: str, workers: int | None, ray_address: str | None):
    """``workers`` None: all local cores, or all of the Ray cluster's CPUs."""
    if backend == "local":
        return LocalExecutor(workers or 1)
    if backend == "ray":
        try:
            return RayExecutor(workers, ray_address)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            from per_cli.config import ConfigError

            where = f"--ray-address {ray_address}" if ray_address else "--backend ray"
            raise ConfigError(f"{where}: Ray did not start: {type(exc).__name__}: {exc}") from None
    raise ValueError(f"unknown backend {backend!r}")
