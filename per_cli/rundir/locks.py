"""Exclusive advisory file locks: one per grid directory (one ``per grid`` at a time) and one per run (one
process trains a run at a time). The kernel drops a lock when its holder exits, however it exits."""

from __future__ import annotations

import os
import time
from pathlib import Path

LOCK_WAIT_S = 10.0


class GridLockedError(RuntimeError):
    pass


class Lock:
    def __init__(self, fd: int | None):
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None


def hold_lock(path: Path, wait_s: float = LOCK_WAIT_S) -> Lock:
    """An exclusive lock on ``path`` holding the holder's pid; GridLockedError after ``wait_s`` seconds."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: no locks
        return Lock(None)
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
        try:  # the pid is for people reading the file; the flock is the lock, held without it
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        except OSError:  # (a full disk: the run itself then fails with the disk named, not the lock's traceback)
            pass
        return Lock(fd)
