"""Writers sit between the loop's ``memory.add`` and the store and decide what is stored: the plain :class:`Writer`
as it comes, hindsight relabelling (``hindsight.py``) an episode with relabelled copies at its end. A writer never
samples, so any sampler works under any writer."""

from __future__ import annotations

from per_cli.replay.stateless import Stateless
from per_cli.replay.storage.rows import Rows


class Writer(Stateless):
    """Stores each transition as it comes (every memory without relabelling)."""

    def add(self, rows: Rows) -> Rows:
        """The rows to store now for these transitions (of this writer's member): here, themselves."""
        return rows
