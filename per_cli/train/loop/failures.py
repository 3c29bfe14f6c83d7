"""How a member fails in the loop without stopping the others, and the loop's alive mask over the seed axis.

A leaf of the loop (it imports only :mod:`~per_cli.train.loop.stopping`): the phases
(:mod:`~per_cli.train.loop.steps`, :mod:`~per_cli.train.loop.updates`) and the loop that orders them
(:mod:`~per_cli.train.loop.lockstep`) all fail a member through :func:`fail`, so none of them imports another for
it. A member is anything with ``error``, ``alive`` and ``record_failure``/``close`` (a
:class:`~per_cli.train.loop.trainer.Trainer`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from per_cli.train.loop.stopping import as_interrupt, pending_interrupt


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


def guard(member: Any, phase: Callable, *args: Any) -> Any:
    """Run one phase of one member; an exception fails that member only (recorded with its traceback).

    An exception caused by an interrupt (e.g. a ``SystemError`` chained to RunInterrupted, from a signal during a
    compiled call's return) is the interrupt, not a failure: it stops every member (recorded ``interrupted``)."""
    try:
        return phase(*args)
    except Exception as exc:  # noqa: BLE001 - recorded in the member's summary, the others go on
        fail(member, exc)
        return None


def fail(member: Any, exc: Exception) -> None:
    """``member``'s phase raised ``exc`` (called in the ``except`` that caught it): the member fails and
    leaves (its row of the alive mask False), unless ``exc`` stems from an interrupt, which is re-raised (see
    :func:`guard`)."""
    interrupt = interrupt_behind(exc)
    if interrupt is not None:
        raise interrupt from None
    alive, row = member.alive
    alive.lose(row)
    member.record_failure(exc)
    with contextlib.suppress(OSError):  # (a full disk fails the flush of its files too: its failure is recorded)
        member.close()


def interrupt_behind(exc: BaseException) -> KeyboardInterrupt | None:
    """The KeyboardInterrupt (a signal's RunInterrupted) in ``exc``'s chain of causes, else the interrupt of a
    signal received and not yet raised through (an error then may stand in for it with no chain: see
    :class:`~per_cli.train.loop.stopping.SignalStop`), if any."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        if isinstance(link, KeyboardInterrupt):
            return as_interrupt(link)
        seen.add(id(link))
        link = link.__cause__ or link.__context__
    return pending_interrupt()
