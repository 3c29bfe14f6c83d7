"""Writers sit between the training loop's ``memory.add`` and the store: they decide what is stored.

The plain :class:`Writer` stores each transition as it comes. Hindsight relabelling (``hindsight.py``)
buffers an episode and stores it with relabelled copies at its end. A writer never samples: any sampler
works under any writer.
"""

from __future__ import annotations

from per_cli.replay.stateless import Stateless
from per_cli.replay.storage.rows import Rows


class Writer(Stateless):
    """Stores each transition as it comes (every memory without relabelling)."""

    def add(self, rows: Rows) -> Rows:
        """The rows to store now for these transitions (of this writer's member): here, themselves."""
        return rows
