"""Claiming a run directory: one process trains in it at a time.

A new run directory is made with an exclusive ``os.mkdir`` (two processes asking for the same name cannot both
get it), and its ``.lock`` is held with ``fcntl.flock`` for the run's life; ``per train --resume`` takes the same
lock on an existing directory, so a resume of a run in progress is refused too. The kernel drops the lock when its
holder exits, however it exits, so a crashed run never leaves its directory claimed. The refused process has
written nothing: its ``mkdir`` failed, or the lock it tried was the other process's.

Default names (env, replay, seed and the start second) collide when two runs of the same seed start in the same
second; both are runs the user asked for, so the second takes the next free name (``<name>-2``, ...) rather than
failing. A name the user gave (``--name``) is theirs: a clash is refused.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from per_cli.errors import ConfigError

LOCK_FILE = ".lock"  # inside the run directory: holds the pid of the process training it
_MAX_SUFFIX = 100


class Claim:
    """A run directory held by this process until :meth:`release` (or its exit)."""

    def __init__(self, path: Path, fd: int | None, made_dir: bool, made_lock: bool):
        self.path = path
        self._fd = fd
        self._made_dir = made_dir
        self._made_lock = made_lock
        self.made_parents: list[Path] = []  # the missing folders above a new run directory, made for it

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None

    def abandon(self) -> None:
        """Release, and take back what claiming wrote (the directory it made, the lock file it created), for a
        run refused or failed before it wrote anything: bad input leaves the disk as it was."""
        self.release()
        if self._made_lock or self._made_dir:
            (self.path / LOCK_FILE).unlink(missing_ok=True)
        if self._made_dir:
            for folder in (self.path, *self.made_parents):  # the deepest first
                with contextlib.suppress(OSError):  # (not empty: something was written after all; keep it)
                    folder.rmdir()


def _lock(path: Path, made_dir: bool) -> Claim:
    """Hold ``path``'s lock file; None-descriptor claim where flock does not exist (Windows: no locks)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        return Claim(path, None, made_dir, False)
    lock = path / LOCK_FILE
    made_lock = not lock.exists()
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise ConfigError(
            f"--resume: {path} is being trained by another process (pid {holder}); wait for it to end or stop it"
        ) from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return Claim(path, fd, made_dir, made_lock)


def claim_new(path: Path) -> Claim:
    """Make ``path`` (exclusively) and hold it. ConfigError, nothing written, when it exists already (another
    run has it, or had it). Missing folders above it are made (and taken back by :meth:`Claim.abandon`)."""
    parents = [p for p in path.parents if not p.exists()]
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(path)
    except FileExistsError:
        raise ConfigError(f"--name: run directory {path} already exists; choose another --name") from None
    claim = _lock(path, made_dir=True)
    claim.made_parents = parents
    return claim


def claim_free_name(runs_dir: Path, name: str) -> Claim:
    """Make and hold ``runs_dir / name``, or the first free of ``name-2``, ``name-3``, ... (a default name that
    another run of the same seed took in the same second)."""
    for k in range(1, _MAX_SUFFIX + 1):
        with contextlib.suppress(ConfigError):
            return claim_new(runs_dir / (name if k == 1 else f"{name}-{k}"))
    raise ConfigError(f"--runs-dir {runs_dir}: {name} and {_MAX_SUFFIX - 1} suffixed names are taken; use --name")


def claim_existing(path: Path) -> Claim:
    """Hold the existing run directory ``path`` (``--resume``). ConfigError when another process holds it."""
    return _lock(path, made_dir=False)
