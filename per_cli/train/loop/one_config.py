"""What the loop's members share: one config (they differ at most in the seed) and the objects each built from it.
The phases are built over these named values, checked once, never over whichever member comes first."""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Iterable, Sequence
from typing import TYPE_CHECKING, TypeVar

from per_cli.config import Config

if TYPE_CHECKING:
    from per_cli.train.loop.member_data import MemberData

T = TypeVar("T", bound=Hashable)


def cohort_config(members: Sequence[MemberData]) -> Config:
    """The members' one config, as each holds it (resolved); its seed is the leading member's, which no phase
    reads. ValueError where two members' configs differ in more than the seed."""
    lead, *others = (m.cfg for m in members)
    for cfg in others:
        if dataclasses.replace(cfg, seed=lead.seed) != lead:
            raise ValueError(f"the loop's members share one config but for the seed; seed {cfg.seed} differs")
    return lead


def shared(values: Iterable[T], what: str) -> T:
    """The one value the members hold of ``what`` (each built it from the one config); ValueError where they
    differ."""
    found = set(values)
    if len(found) != 1:
        raise ValueError(f"the loop's members must share {what} (one config)")
    return found.pop()
