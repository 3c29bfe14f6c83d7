"""How a run stops early: interrupted by a signal (resumable), or failed because the updates diverged.

Ctrl-C and SIGTERM raise :class:`RunInterrupted` inside the run, which records ``status: interrupted`` and
re-raises; the CLI exits 128 + the signal number. A non-finite loss or Q value, or TD errors whose squares overflow
float32, raise :class:`RunDiverged` naming the likely cause."""

from __future__ import annotations

import errno
import math
import os
import shlex
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from per_cli.config.schema import AgentConfig


class RunInterrupted(KeyboardInterrupt):
    """A run stopped by a signal. A KeyboardInterrupt, so callers that stop on Ctrl-C stop on it too."""

    def __init__(self, signum: int):
        self.signum = int(signum)
        super().__init__(f"interrupted by {signal.Signals(self.signum).name}")

    def __reduce__(self):  # pickles (process pools, Ray) by its signal number
        return (RunInterrupted, (self.signum,))

    @property
    def exit_code(self) -> int:
        """The shell's convention for a process ended by this signal: 128 + its number."""
        return 128 + self.signum


class RunDiverged(FloatingPointError):
    """The updates produced values that are no longer numbers (or soon will not be): the run cannot go on."""


class SignalStop:
    """Within ``installed()``, SIGTERM (and Ctrl-C, unless ignored) raise :class:`RunInterrupted`: at once, or with
    ``deferred`` at the next :meth:`check` (a second signal raises at once). Training defers because an exception
    raised inside compiled code's callbacks crashes or is mangled; a grid's driver and workers do not, since it must
    break their waits. The signal is this object's own record (``received``), so it never reaches another run."""

    def __init__(self, deferred: bool = False) -> None:
        self.deferred = deferred
        self.received: int | None = None  # the signal received since installed() (None: none)

    def _handle(self, signum: int, _frame) -> None:  # (a signal handler's signature)
        again = self.received is not None
        self.received = signum
        if again or not self.deferred:
            raise RunInterrupted(signum)

    def check(self) -> None:
        """Raise the interrupt of a signal received since ``installed()`` (deferred: here)."""
        if self.received is not None:
            raise RunInterrupted(self.received)

    def interrupt_behind(self, exc: BaseException) -> RunInterrupted | None:
        """The KeyboardInterrupt in ``exc``'s chain of causes (a signal's RunInterrupted; one raised outside our
        handler, e.g. a caller's own, counts as Ctrl-C), else the interrupt of a signal received since
        ``installed()`` and not yet raised through (an error then may stand in for it with no chain: numba unboxing a
        typed list while the handler's exception is set), if any."""
        seen: set[int] = set()
        link: BaseException | None = exc
        while link is not None and id(link) not in seen:
            if isinstance(link, KeyboardInterrupt):
                return link if isinstance(link, RunInterrupted) else RunInterrupted(signal.SIGINT)
            seen.add(id(link))
            link = link.__cause__ or link.__context__
        return None if self.received is None else RunInterrupted(self.received)

    @contextmanager
    def installed(self) -> Iterator[SignalStop]:
        self.received = None
        if threading.current_thread() is not threading.main_thread():  # only the main thread gets signals
            yield self
            return
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
        signal.signal(signal.SIGTERM, self._handle)
        if previous[signal.SIGINT] is signal.default_int_handler:  # SIG_IGN (a grid worker): leave it
            signal.signal(signal.SIGINT, self._handle)
        try:
            yield self
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


def full_disk(exc: BaseException) -> OSError | None:
    """The "no space left on device" error behind ``exc`` (itself, or its cause or context: torch.save wraps
    it), or None."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
            return exc
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


def _mount_point(path: Path) -> Path:
    path = path.resolve()
    while not os.path.ismount(path) and path != path.parent:
        path = path.parent
    return path


def describe_failure(exc: BaseException, run_dir: Path) -> str:
    """A failed run's one line for summary.json and the terminal: a diverged run's cause; a full disk named as
    the disk (the fix is space, not the config); else the exception's type and message."""
    if isinstance(exc, RunDiverged):
        return str(exc)
    if full_disk(exc) is not None:
        mount = _mount_point(run_dir)
        return (
            f"the disk is full: no space left on the file system at {shlex.quote(str(mount))} while writing "
            f"{shlex.quote(str(run_dir))}; free space there, then continue with per train --resume (if it "
            "checkpointed) or run it again"
        )
    return f"{type(exc).__name__}: {exc}"


def check_update(loss: float, q_mean: float, step: int, agent_cfg: AgentConfig) -> None:
    """Raise :class:`RunDiverged` if this update's loss or mean Q is not finite (two float checks: cheap
    enough for every update). A NaN TD error is caught by the memory's priority update (FloatingPointError,
    see :func:`diverged`), finite TD errors too large to square by :func:`check_logged`."""
    if not math.isfinite(loss):
        raise diverged(f"the loss became {loss}", step, agent_cfg)
    if not math.isfinite(q_mean):
        raise diverged(f"the Q values became {q_mean}", step, agent_cfg)


def check_logged(values: dict[str, np.ndarray], step: int, agent_cfg: AgentConfig) -> None:
    """Raise :class:`RunDiverged` if a per-update statistic of the metrics window is not finite: TD errors
    beyond ~1.8e19 are still finite, but their squares (the TD standard deviation, an MSE loss) overflow
    float32. Checked once per window (every ``log.every`` updates and at episode ends)."""
    for tag, array in values.items():
        if not np.isfinite(array).all():
            raise diverged(f"{tag} became {float(array[~np.isfinite(array)][0])}", step, agent_cfg)


def diverged(what: str, step: int, agent_cfg: AgentConfig) -> RunDiverged:
    """The error that ends a diverged run: what happened, when, and the likely cause."""
    return RunDiverged(f"{what} at step {step}: {likely_cause(agent_cfg)}")


def _number(x: float) -> str:
    return f"{x:g}".replace("e+0", "e").replace("e+", "e").replace("e-0", "e-")


def likely_cause(a: AgentConfig) -> str:
    """The most likely reason why DQN updates diverged, with the key to change."""
    if a.lr > 1e-2:
        return f"the learning rate (agent.lr={_number(a.lr)}) is probably too high; try 1e-3 or lower"
    if a.max_grad_norm is None:
        return "gradients are not clipped (agent.max_grad_norm: null); set it (e.g. 10) or lower agent.lr"
    if a.loss == "mse":
        return f"the MSE loss grows with δ²; use agent.loss=huber or lower agent.lr (now {_number(a.lr)})"
    return (
        f"the updates diverged with agent.lr={_number(a.lr)}, agent.gamma={a.gamma:g}; lower the learning rate, or "
        "check the rewards' scale"
    )
