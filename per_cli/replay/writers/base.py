"""Writers sit between the training loop's ``memory.add`` and the storage: they decide what is stored.

The plain :class:`Writer` stores each transition as it comes. Hindsight relabelling (``hindsight.py``)
buffers an episode and stores it with relabelled copies at its end. A writer never samples: any sampler
works under any writer.
"""

from __future__ import annotations

from typing import Protocol

from per_cli.replay.stateless import Stateless


class Store(Protocol):
    """``ReplayMemory._store``: write one transition to the storage and tell the sampler. ``ends_episode``
    (default: ``terminated or truncated``) says the next stored transition starts a new episode."""

    def __call__(
        self, obs, action, reward, next_obs, terminated, truncated, ends_episode: bool | None = None
    ) -> None: ...


class Writer(Stateless):
    """Stores each transition as it comes (every memory without relabelling)."""

    def add(self, store: Store, obs, action, reward, next_obs, terminated: bool, truncated: bool) -> None:
        store(obs, action, reward, next_obs, terminated, truncated)
