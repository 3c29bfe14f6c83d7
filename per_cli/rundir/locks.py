"""Exclusive advisory file locks (``flock``): a run directory's claim, a grid's lock, a grid's lock per run. The
kernel drops a lock when its holder exits, however it exits."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

LOCK_WAIT_S = 10.0


class Locked(RuntimeError):
    """Another process holds the lock; the message is the pid it wrote (``?`` if none)."""


class Lock:
    def __init__(self, fd: int | None):
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None


def hold_lock(path: Path, wait_s: float = LOCK_WAIT_S) -> Lock:
    """An exclusive lock on ``path`` (created), holding this process's pid; :class:`Locked` after ``wait_s``."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: no locks
        return Lock(None)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
                os.close(fd)
                raise Locked(holder) from None
            time.sleep(0.2)
    with contextlib.suppress(OSError):  # the pid is for people; a full disk is said by what fails next, not here
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
    return Lock(fd)
