"""A cohort's updates kept as arrays over the seed axis until each member's window takes its own, measured.

Each step's update arrays go into one ring of (steps, S, ...) arrays; a member's window takes its rows in order
(``pull``) before it reads, saves or adds an update and before the ring overwrites rows it has not taken, so its
updates and their order are what they would be alone. The updates are measured when a window first needs them,
every member's kept so far in one :func:`~per_cli.train.measures.update_measures.measure_table` call: each row's
measures are a function of that row alone, so the values are those of measuring each step, for one call per
member's event instead of a call per step."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import NamedTuple

import numpy as np

from per_cli.train.measures.update_measures import KEPT_AS, MeasuredBy, UpdateArrays, measure_table
from per_cli.train.measures.update_window import UpdateWindow


class Kept(NamedTuple):
    """How a field of :class:`UpdateArrays` is kept: one update's shape and the dtype."""

    shape: tuple[int, ...]
    dtype: np.dtype


RING_BYTES = 64 << 20  # the most the kept update arrays take: fewer steps where they would take more


class CohortRows:
    """The updates of ``windows`` (member k's window at position k), kept until each window pulls them (each is
    attached to this, :meth:`UpdateWindow.attach`) and measured as ``measured_by`` says (the windows' one setting).
    ``steps``: how many steps the ring holds at most (a window's log window, ``log.every``, holds every update a
    member makes between two pulls in lockstep); fewer where the ring would take over ``RING_BYTES``.

    Should measuring raise, the updates stay unmeasured and each pull raises it again: every member whose window
    needs them fails with that error at its next event (no update is measured alone)."""

    def __init__(self, windows: Sequence[UpdateWindow], steps: int, measured_by: MeasuredBy):
        self._windows = list(windows)
        self._steps = max(1, steps)
        self._measured_by = measured_by
        self._written = 0  # steps written so far: the next one goes to slot written % len(ring)
        self._measured = 0  # steps measured so far: those from here to _written are kept unmeasured
        self._taken = np.zeros(len(self._windows), dtype=np.int64)  # per member: the steps it has taken
        self._behind = 0  # at most the fewest steps any member has taken (``_taken`` only grows): checked first
        self._key: tuple[Kept | None, ...] | None = None  # what the ring was made for, field by field
        for k, window in enumerate(self._windows):
            window.attach(partial(self.pull, k))

    def add(self, members: np.ndarray | slice, updates: UpdateArrays) -> None:
        """One step's updates: row j of each of ``updates``' arrays is the update of member ``members[j]``
        (positions, int64, or ``slice(None)``: every member in order). The arrays are copied."""
        arrays = [None if a is None else np.asarray(a) for a in updates]
        key = tuple(
            None if a is None else Kept(a.shape[1:], a.dtype if as_ is None else as_)
            for a, as_ in zip(arrays, KEPT_AS, strict=True)
        )
        if key != self._key:
            self._make(key)
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
        for kept, array in zip(self._kept, arrays, strict=True):
            if kept is not None:
                kept[slot, members] = array
        self._written += 1

    def pull(self, k: int) -> None:
        """Member ``k``'s window takes its updates of the steps since it last did, in order (``add_block``),
        measured first where they are not yet."""
        start, end = int(self._taken[k]), self._written
        if start == end:
            return
        self._measure()
        self._taken[k] = end
        slots = np.arange(start, end) % len(self._has)
        slots = slots[self._has[slots, k]]
        if len(slots):
            self._windows[k].add_block(self._table[slots, k], self._vars[slots, k] if self._vars is not None else None)

    def _measure(self) -> None:
        """Every member's updates kept unmeasured, measured into the ring's table (and variances): one call per run
        of slots that does not wrap around the ring (at most two)."""
        ring = len(self._has)
        while self._measured < self._written:
            lo = self._measured % ring
            hi = min(ring, lo + self._written - self._measured)
            self._measure_slots(lo, hi)
            self._measured += hi - lo

    def _measure_slots(self, lo: int, hi: int) -> None:
        """The updates of slots ``lo:hi`` measured in one call: the kept arrays as they lie (a view, no copy) where
        every member updated at each of those steps, else the rows of the members that did (step-major: each
        member's rows in the order they came)."""
        has = self._has[lo:hi]
        if has.all():
            at, lead = slice(lo, hi), has.shape  # (the rows' places in the table: steps, members)
            arrays = UpdateArrays(*(None if kept is None else _flat(kept[at]) for kept in self._kept))
        else:
            steps, members = np.nonzero(has)
            if not len(steps):
                return
            at, lead = (steps + lo, members), steps.shape
            arrays = UpdateArrays(*(None if kept is None else kept[at] for kept in self._kept))
        table, variances = measure_table(self._measured_by, *arrays)
        if self._table is None:
            ring, size = self._has.shape
            self._table = np.empty((ring, size, *table.shape[1:]), dtype=np.float64)
            if variances is not None:
                self._vars = np.empty((ring, size, *variances.shape[1:]), dtype=np.float64)
        self._table[at] = table.reshape(*lead, *table.shape[1:])
        if self._vars is not None:
            self._vars[at] = variances.reshape(*lead, *variances.shape[1:])

    def _make(self, key: tuple[Kept | None, ...]) -> None:
        """A ring for updates of these (shape, dtype) per field (None: not kept; every window first takes what an
        older ring held); its table and variances are made at its first measuring, in the shapes that gives."""
        for k in range(len(self._windows)):
            self.pull(k)
        size = len(self._windows)
        per_step = size * sum(0 if f is None else int(np.prod(f.shape)) * f.dtype.itemsize for f in key)
        steps = max(1, min(self._steps, RING_BYTES // max(per_step, 1)))
        self._has = np.zeros((steps, size), dtype=bool)
        self._kept = [None if f is None else np.empty((steps, size, *f.shape), dtype=f.dtype) for f in key]
        self._table: np.ndarray | None = None
        self._vars: np.ndarray | None = None


def _flat(steps: np.ndarray) -> np.ndarray:
    """Kept arrays (steps, S, ...) as rows (steps · S, ...), step-major: a view."""
    return steps.reshape(-1, *steps.shape[2:])
