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
    """The positions of lists of the loop's members (``index``: a member's id to its row). The loop asks for the
    same members (all of them, those training) several times a step: the last few answers are remembered by the
    members' ids (members live as long as the loop, so an id stays theirs), and the last few lists asked about by
    identity (the loop hands one list to several phases and never changes a list it handed on; a list held here
    keeps its identity). numpy's per-call cost is what a small cohort's step pays."""

    def __init__(self, index: dict[int, int]):
        self.index = index
        self._cached: dict[tuple[int, ...], Positions] = {}
        self._recent: list[tuple[Sequence[Any], Positions]] = []

    def __call__(self, members: Sequence[Any]) -> Positions:
        for known, answer in self._recent:
            if known is members:
                return answer
        found = self._by_ids(members)
        self._recent = [(members, found), *self._recent[:2]]
        return found

    def _by_ids(self, members: Sequence[Any]) -> Positions:
        key, cached = tuple(map(id, members)), self._cached
        found = cached.pop(key, None)  # (put back last: the least recently asked leaves first)
        if found is None:
            which = [self.index[k] for k in key]
            rows = np.asarray(which, dtype=np.int64)
            found = Positions(which, rows, slice(None) if which == list(range(len(self.index))) else rows)
            if len(cached) >= 4:
                cached.pop(next(iter(cached)))
        cached[key] = found
        return found
