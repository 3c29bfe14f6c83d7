"""Per-update arrays kept row by row in growing preallocated arrays, copied in while they are hot.

The metrics window (:class:`per_cli.train.metrics.UpdateWindow`) keeps each update's batch arrays (TD errors,
weights, ages, states, episode ids) until it computes their measures, every ``log.every`` updates or at an
episode's end. Stacking them then cost more than the measures themselves in a cohort: by then each row lies in
a different, long evicted array (one per cohort draw), and gathering ~30 of them 5 times per window missed the
cache throughout. Copying each row in when the update is recorded (its arrays were just written) and handing
out the filled rows as one array avoids that, with the same values, dtypes and shapes as ``np.stack``.
"""

from __future__ import annotations

import numpy as np


class RowBuffer:
    """Rows of a fixed set of arrays (one row per ``append``), stored in preallocated arrays that double when
    full. A row is copied only when it has exactly the dtype and shape of the first row of its column, so the
    filled rows equal ``np.stack`` of the appended arrays bit for bit; ``append`` returns False (and keeps
    nothing of that row) for anything else, and the caller keeps the arrays itself."""

    def __init__(self, capacity: int = 64):
        self.n = 0
        self._capacity = max(1, int(capacity))
        self._columns: list[np.ndarray] | None = None
        self._spec: tuple | None = None

    def append(self, rows: tuple[np.ndarray, ...]) -> bool:
        columns, n = self._columns, self.n
        if columns is None or n == 0:
            if not all(type(r) is np.ndarray for r in rows):
                return False
            if columns is None or self._spec != tuple((r.dtype, r.shape) for r in rows):
                columns = self._columns = [np.empty((self._capacity, *r.shape), dtype=r.dtype) for r in rows]
                self._spec = tuple((r.dtype, r.shape) for r in rows)
        else:
            for row, (dtype, shape) in zip(rows, self._spec, strict=True):
                if type(row) is not np.ndarray or row.dtype != dtype or row.shape != shape:
                    return False
        if n == len(columns[0]):
            columns = self._columns = [np.concatenate([c, np.empty_like(c)]) for c in columns]
        for column, row in zip(columns, rows, strict=True):
            column[n] = row
        self.n = n + 1
        return True

    def filled(self) -> list[np.ndarray]:
        """The rows appended so far, one array per column (views: valid until the next ``append``)."""
        if self._columns is None:
            return []
        return [column[: self.n] for column in self._columns]

    def clear(self) -> None:
        self.n = 0
