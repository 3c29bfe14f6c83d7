"""The Ray backend: one task per run, or per cohort of runs that differ only in the seed; the files come back to the
driver, which writes them into the grid directory holding each run's lock (no shared filesystem needed)."""

from __future__ import annotations

import os
import shutil
import tempfile
import traceback
from pathlib import Path
from typing import Any

from per_cli.rundir.locks import Lock
from per_cli.sweep.cohorts import members_of, task_result, train_runs
from per_cli.sweep.worker import limit_threads, lock_members, record_failure

Event = tuple[str, str, Any]
# an unfinished run resumes on Ray from its checkpoint only when its directory is at most this big (a
# checkpoint with the replay memory can be gigabytes: then the run starts again instead)
RAY_RESUME_MAX_BYTES = 512 * 2**20


def _collect_files(run_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}


def ray_train(payload: dict[str, Any]) -> dict[str, Any]:
    """The body of a Ray task: its runs trained as a local worker trains them (:func:`train_runs`), each in a
    temporary directory on this node that starts from the files the driver sent (to resume from a checkpoint);
    returns a result per run and each run directory's files."""
    import socket

    limit_threads()
    with tempfile.TemporaryDirectory(prefix="per-grid-") as tmp:
        todo = []
        for member in members_of(payload):
            run_dir = Path(tmp) / member["name"]
            if member.get("files"):
                _write_files(run_dir, member.pop("files"))
            todo.append(({**member, "run_dir": str(run_dir)}, member["mode"]))
        results = train_runs(payload, todo)
        files = {m["name"]: _collect_files(Path(m["run_dir"])) for m, _ in todo if Path(m["run_dir"]).exists()}
    host = socket.gethostname()
    return {"results": {name: {**result, "host": host} for name, result in results.items()}, "files": files}


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


def _with_files(member: dict[str, Any], mode: str) -> dict[str, Any]:
    """A run's task payload: its ``mode``; to resume, the run directory's files, when small enough to send
    (else it starts again)."""
    task = dict(member, mode=mode)
    if mode == "resume":
        run_dir = Path(member["run_dir"])
        if sum(p.stat().st_size for p in run_dir.rglob("*") if p.is_file()) <= RAY_RESUME_MAX_BYTES:
            task["files"] = _collect_files(run_dir)  # the task continues from these files on its node
        else:
            task["mode"] = "fresh"
    return task


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
        self.size = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        # max_retries: a task whose node or worker process dies is retried (its result is written only once,
        # by this driver); an exception inside the run is never retried -- it is a failed run
        remote = ray.remote(num_cpus=1, max_retries=2, retry_exceptions=False)
        self._task = remote(ray_train)
        # a task in flight: (its payload, the lock of each run it trains, results of its runs answered at once)
        self._refs: dict[Any, tuple[dict, list[Lock], dict[str, dict]]] = {}
        self._immediate: list[Event] = []  # tasks answered without Ray (busy, or finished meanwhile)

    def free(self) -> int:
        return self.size - len(self._refs) - len(self._immediate)

    def submit(self, payload: dict[str, Any]) -> None:
        """Send a task's runs to Ray, each under its lock, but those that its state on disk says to skip or that
        another process holds: they are answered at once (the whole task, where none is left to train)."""
        answered, locks, todo = lock_members(members_of(payload))
        if not todo:
            self._immediate.append(("done", payload["name"], task_result(payload, answered)))
            return
        sent = [_with_files(member, mode) for member, mode in todo]
        task = dict(payload, cohort=sent) if "cohort" in payload else sent[0]
        self._refs[self._task.remote(task)] = (payload, locks, answered)

    def poll(self, timeout: float) -> list[Event]:
        if self._immediate or not self._refs:
            events, self._immediate = self._immediate, []
            return events
        events: list[Event] = []
        ready, _ = self._ray.wait(list(self._refs), num_returns=1, timeout=timeout)
        for ref in ready:
            payload, locks, answered = self._refs.pop(ref)
            try:
                events.append(("done", payload["name"], self._install(ref, payload, answered)))
            finally:
                for lock in locks:
                    lock.release()
        return events

    def _install(self, ref, payload: dict[str, Any], answered: dict[str, dict]) -> dict[str, Any]:
        """A finished task's result; its runs' files installed into the grid directory. A task lost to Ray
        (its node died, ...) is a failed result for each run it trained."""
        trained = [m for m in members_of(payload) if m["name"] not in answered]
        try:
            out = self._ray.get(ref)
            for member in trained:
                install_files(Path(member["run_dir"]), out["files"].get(member["name"], {}))
            results = out["results"]
        except Exception as exc:  # noqa: BLE001 - recorded in each run's summary; the grid goes on
            error = f"ray task failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            for member in trained:
                record_failure(member, Path(member["run_dir"]), error, traceback.format_exc())
            results = dict.fromkeys((m["name"] for m in trained), {"status": "failed", "error": error})
        return task_result(payload, {**answered, **results})

    def stop(self, interrupt: bool = False) -> None:
        for ref, (_payload, locks, _answered) in list(self._refs.items()):
            self._ray.cancel(ref, force=True)
            for lock in locks:
                lock.release()
        self._refs.clear()

    def kill(self) -> None:
        self.stop(interrupt=True)

    def close(self) -> None:
        self.stop(interrupt=True)
        if self._ray.is_initialized():
            self._ray.shutdown()
