"""The loop's alive mask over the seed axis: which of its members still run, and each member's row of it. A leaf
of the loop: a member's data holds its row (:mod:`~per_cli.train.loop.member_data`), and
:func:`~per_cli.train.loop.failures.fail` turns it False."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np


class AliveRow(NamedTuple):
    """A member's place in its loop's :class:`Alive` mask."""

    loop: Alive
    row: int


class Alive:
    """Which of a loop's members still run: ``mask`` (row k: member k), False from the moment member k failed;
    ``failed`` counts them, so that while it is 0 no list of members needs looking through. Owned by one loop run
    (:func:`~per_cli.train.loop.lockstep.run_members` makes it; each member holds it and its row)."""

    def __init__(self, size: int):
        self.mask = np.ones(size, dtype=bool)
        self.failed = 0

    @classmethod
    def over(cls, members: Sequence[Any]) -> Alive:
        """One mask for ``members`` (row k: the k-th's, False where it failed already); each member's ``alive``
        is it from now on."""
        alive = cls(len(members))
        for k, member in enumerate(members):
            member.alive = AliveRow(alive, k)
            if member.error is not None:
                alive.lose(k)
        return alive

    def lose(self, row: int) -> None:
        if self.mask[row]:
            self.mask[row] = False
            self.failed += 1
