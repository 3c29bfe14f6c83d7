"""Claiming a run directory: one process trains in it at a time."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from per_cli.errors import ConfigError
from per_cli.rundir.locks import Lock, Locked, hold_lock

LOCK_FILE = ".lock"  # inside the run directory: holds the pid of the process training it
_MAX_SUFFIX = 100


class Claim:
    """A run directory held by this process until :meth:`release` (or its exit)."""

    def __init__(self, path: Path, lock: Lock, made_dir: bool, made_lock: bool, made_parents: list[Path]):
        self.path = path
        self._lock = lock
        self._made_dir = made_dir
        self._made_lock = made_lock
        self.made_parents = made_parents  # the missing folders above a new run directory, made for it

    def release(self) -> None:
        self._lock.release()

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


def _lock(path: Path, made_dir: bool, made_parents: list[Path]) -> Claim:
    made_lock = not (path / LOCK_FILE).exists()
    try:
        lock = hold_lock(path / LOCK_FILE, wait_s=0)
    except Locked as exc:
        raise ConfigError(
            f"--resume: {path} is being trained by another process (pid {exc}); wait for it to end or stop it"
        ) from None
    return Claim(path, lock, made_dir, made_lock, made_parents)


def claim_new(path: Path) -> Claim:
    """Make ``path`` (exclusively) and hold it. ConfigError, nothing written, when it exists already (another
    run has it, or had it). Missing folders above it are made (and taken back by :meth:`Claim.abandon`)."""
    parents = [p for p in path.parents if not p.exists()]
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(path)
    except FileExistsError:
        raise ConfigError(f"--name: run directory {path} already exists; choose another --name") from None
    return _lock(path, made_dir=True, made_parents=parents)


def claim_free_name(runs_dir: Path, name: str) -> Claim:
    """Make and hold ``runs_dir / name``, or the first free of ``name-2``, ``name-3``, ... (a default name that
    another run of the same seed took in the same second)."""
    for k in range(1, _MAX_SUFFIX + 1):
        with contextlib.suppress(ConfigError):
            return claim_new(runs_dir / (name if k == 1 else f"{name}-{k}"))
    raise ConfigError(f"--runs-dir {runs_dir}: {name} and {_MAX_SUFFIX - 1} suffixed names are taken; use --name")


def claim_existing(path: Path) -> Claim:
    """Hold the existing run directory ``path`` (``--resume``). ConfigError when another process holds it."""
    return _lock(path, made_dir=False, made_parents=[])
