"""The Ray backend: one task per run; the run's files come back to the driver.

A task trains in a temporary directory on whichever node runs it and returns the run directory's files as
bytes; the driver, holding the run's lock, writes them next to the grid directory and renames them into
place. No shared filesystem is needed. An unfinished run resumes on its node from the files the driver
sends, when they are small enough.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import traceback
from pathlib import Path
from typing import Any

from per_cli.sweep.locks import GridLockedError, Lock, hold_lock
from per_cli.sweep.worker import decide, execute_run, limit_threads, record_failure

Event = tuple[str, str, Any]
# an unfinished run resumes on Ray from its checkpoint only when its directory is at most this big (a
# checkpoint with the replay memory can be gigabytes: then the run starts again instead)
RAY_RESUME_MAX_BYTES = 512 * 2**20


def _collect_files(run_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}


def ray_train(payload: dict[str, Any]) -> dict[str, Any]:
    """The body of a Ray task: train in a temporary directory on this node (starting from the files the
    driver sent, to resume from a checkpoint); return the result and the run directory's files."""
    import socket

    limit_threads()
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
        self._refs: dict[Any, tuple[dict, Lock]] = {}
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
                record_failure(payload, run_dir, error, traceback.format_exc())
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
