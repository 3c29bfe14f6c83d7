"""Members' positions over the seed axis (their rows in the loop's counters), as the phases ask for them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np


class Positions(NamedTuple):
    """Where some members lie on the seed axis: ``which`` as a list, ``rows`` as an int64 array, and ``index``,
    which selects their rows of a counters' column (the whole column, ``slice(None)``, where they are all the
    members in order: a view, where an int64 array would copy)."""

    which: list[int]
    rows: np.ndarray
    index: slice | np.ndarray


class PositionsOf:
    """The positions of lists of the loop's members (``index``: a member's id to its row). The loop hands one
    list to several phases and never changes a list it handed on, so the last few answers are kept by the list's
    identity (a list held here keeps it)."""

    def __init__(self, index: dict[int, int]):
        self.index = index
        self._recent: list[tuple[Sequence[Any], Positions]] = []

    def __call__(self, members: Sequence[Any]) -> Positions:
        for known, answer in self._recent:
            if known is members:
                return answer
        which = [self.index[id(m)] for m in members]
        rows = np.asarray(which, dtype=np.int64)
        found = Positions(which, rows, slice(None) if which == list(range(len(self.index))) else rows)
        self._recent = [(members, found), *self._recent[:2]]
        return found
