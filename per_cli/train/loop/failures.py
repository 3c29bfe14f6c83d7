"""How a member fails in the loop without stopping the others: :func:`fail` turns its row of the alive mask
(:mod:`~per_cli.train.loop.alive`) False and has :mod:`~per_cli.train.loop.run_record` record and close it.
Every phase fails a member through this one function, so no phase imports another for it."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from per_cli.train.loop import run_record

if TYPE_CHECKING:
    from per_cli.train.loop.member_data import MemberData


def guard(member: MemberData, phase: Callable, *args: Any) -> Any:
    """Run one phase of one member; an exception fails that member only (recorded with its traceback).

    An exception caused by an interrupt (e.g. a ``SystemError`` chained to RunInterrupted, from a signal during a
    compiled call's return) is the interrupt, not a failure: it stops every member (recorded ``interrupted``)."""
    try:
        return phase(*args)
    except Exception as exc:  # noqa: BLE001 - recorded in the member's summary, the others go on
        fail(member, exc)
        return None


def fail(member: MemberData, exc: Exception) -> None:
    """``member``'s phase raised ``exc`` (called in the ``except`` that caught it): the member fails and
    leaves (its row of the alive mask False), unless ``exc`` stems from an interrupt, which is re-raised (see
    :func:`guard` and :meth:`~per_cli.train.loop.stopping.SignalStop.interrupt_behind`)."""
    interrupt = member.stop.interrupt_behind(exc)  # (its loop's SignalStop: lockstep hands it to every member)
    if interrupt is not None:
        raise interrupt from None
    alive, row = member.alive
    alive.lose(row)
    run_record.record_failure(member, exc)
    with contextlib.suppress(OSError):  # (a full disk fails the flush of its files too: its failure is recorded)
        run_record.close(member)
