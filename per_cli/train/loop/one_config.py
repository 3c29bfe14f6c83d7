"""What the loop's members share: one config (they differ at most in the seed, as
:class:`~per_cli.train.loop.cohort.Cohort` checks) and the objects each built from it. The phases are built over
these named values, checked once, never over whichever member comes first."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import TypeVar

T = TypeVar("T", bound=Hashable)


def shared(values: Iterable[T], what: str) -> T:
    """The one value the members hold of ``what`` (each built it from the one config); ValueError where they
    differ."""
    found = set(values)
    if len(found) != 1:
        raise ValueError(f"the loop's members must share {what} (one config)")
    return found.pop()
