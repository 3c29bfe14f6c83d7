"""A cohort's measured updates kept as arrays over the seed axis until each member's window takes its own.

The measures go into one ring of (steps, S, ...) arrays; a member's window takes its rows in order (``pull``)
before it reads, saves or adds an update and before the ring overwrites rows it has not taken, so its updates and
their order are what they would be alone. This is one gather per member per log window, not a call per step."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import numpy as np

from per_cli.train.measures.update_window import UpdateWindow

RING_BYTES = 64 << 20  # the most the ring takes: fewer steps where it would take more


class CohortRows:
    """The measured updates of ``windows`` (member k's window at position k), kept until each window pulls them
    (each is attached to this, :meth:`UpdateWindow.attach`). ``steps``: how many steps the ring holds at most
    (a window's log window, ``log.every``, holds every update a member makes between two pulls in lockstep);
    fewer where the ring would take over ``RING_BYTES``."""

    def __init__(self, windows: Sequence[UpdateWindow], steps: int):
        self._windows = list(windows)
        self._steps = max(1, steps)
        self._written = 0  # steps written so far: the next one goes to slot written % len(ring)
        self._taken = np.zeros(len(self._windows), dtype=np.int64)  # per member: the steps it has taken
        self._behind = 0  # at most the fewest steps any member has taken (``_taken`` only grows): checked first
        self._key: tuple | None = None  # what the ring was made for: (table, variances) shapes per update
        for k, window in enumerate(self._windows):
            window.attach(partial(self.pull, k))

    def add(self, members: np.ndarray | slice, table: np.ndarray, variances: np.ndarray | None) -> None:
        """One step's updates: row j of ``table`` (its ``measure_table`` rows) and ``variances`` (the states'
        feature variances; None without iid) is the update of member ``members[j]`` (positions, int64, or
        ``slice(None)``: every member in order)."""
        key = (table.shape[1:], None if variances is None else variances.shape[1:])
        if key != self._key:
            self._make(*key)
            self._key = key
        ring = len(self._has)
        if self._written - self._behind >= ring:
            self._behind = int(self._taken.min())
        if self._written - self._behind >= ring:  # the oldest slot still has rows someone has not taken
            for k in np.flatnonzero(self._taken <= self._written - ring).tolist():
                self.pull(k)
        slot = self._written % ring
        has = self._has[slot]
        has[:] = False
        has[members] = True
        self._table[slot, members] = table
        if variances is not None:
            self._vars[slot, members] = variances
        self._written += 1

    def pull(self, k: int) -> None:
        """Member ``k``'s window takes its updates of the steps since it last did, in order (``add_block``)."""
        start, end = int(self._taken[k]), self._written
        if start == end:
            return
        self._taken[k] = end
        slots = np.arange(start, end) % len(self._has)
        slots = slots[self._has[slots, k]]
        if len(slots):
            self._windows[k].add_block(self._table[slots, k], self._vars[slots, k] if self._vars is not None else None)

    def _make(self, table: tuple[int, ...], variances: tuple[int, ...] | None) -> None:
        """A ring for arrays of these shapes per update (None: no variances kept; every window first takes what an
        older ring held)."""
        for k in range(len(self._windows)):
            self.pull(k)
        (columns,) = table
        size = len(self._windows)
        per_step = size * (columns + (0 if variances is None else int(np.prod(variances)))) * 8  # (float64)
        steps = max(1, min(self._steps, RING_BYTES // max(per_step, 1)))
        self._has = np.zeros((steps, size), dtype=bool)
        self._table = np.empty((steps, size, columns), dtype=np.float64)
        self._vars = None if variances is None else np.empty((steps, size, *variances), dtype=np.float64)
