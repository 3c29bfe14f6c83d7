"""The sampler base class: what a sampler may ask of a storage, and the hooks every sampler has (no-op
defaults, so the memory calls them all without probing)."""

from __future__ import annotations

from typing import Protocol

import numpy as np

from per_cli.replay.stateless import Stateless
from per_cli.replay.structures.ids import all_finite, current_priorities


class Storage(Protocol):
    """What a sampler may ask of a storage (the ring ``TransitionStorage``, the Atari frame storage, ...)."""

    capacity: int
    size: int
    cursor: int
    added: int
    filled_slots_sampleable: bool  # every filled slot is sampleable: ``sampleable`` need not be asked

    @property
    def latest_slot(self) -> int: ...

    def sampleable(self, slots: np.ndarray) -> np.ndarray: ...

    def oldest_sampleable_id(self) -> int: ...


def ones(n: int) -> np.ndarray:
    """IS weights of a sampler that does not prioritise."""
    return np.ones(n, dtype=np.float32)


class Sampler(Stateless):
    """Picks the slots of a batch. Subclasses implement ``sample``; every other hook has a default.

    Each sampler owns a seeded ``numpy.random.Generator`` (``rng``): same seed, same batches."""

    window: int | None = None  # replay.window, for the samplers that honour it

    def __init__(self, storage: Storage, rng: np.random.Generator):
        self.storage = storage
        self.rng = rng

    def window_bounds(self) -> tuple[int, int]:
        """(first slot, width) of the ring window the next draw is restricted to; (0, 0) when no window is
        active (none set, or it covers every transition held)."""
        window, storage = self.window, self.storage
        if window is None or window >= storage.size:
            return 0, 0
        return (storage.cursor - window) % storage.capacity, window

    @staticmethod
    def bytes_needed(capacity: int) -> int:
        """Bytes the sampler allocates for a memory of ``capacity`` transitions (its structures)."""
        return 0

    def on_add(self, slot: int) -> None:
        """Called after ``slot`` was (over)written with a new transition."""

    def on_invalidate(self, slots: np.ndarray) -> None:
        """The transitions in ``slots`` became unsampleable (a frame storage overwrote their history)."""

    def begin_phase(self, n_batches: int) -> None:
        """``n_batches`` samples follow with no add in between (one burst of gradient steps)."""

    def sample(self, batch_size: int, beta: float) -> tuple[np.ndarray, np.ndarray]:
        """Return (slots, importance-sampling weights as float32)."""
        raise NotImplementedError

    def update(self, slots: np.ndarray, td_abs: np.ndarray) -> None:
        """New abs(TD error) of the transitions in ``slots`` (all current, finite)."""

    @classmethod
    def keeps_priorities(cls) -> bool:
        """Whether ``update`` does anything (a sampler that does not override it ignores priorities)."""
        return cls.update is not Sampler.update

    def update_current(self, ids: np.ndarray, td_errors: np.ndarray, stored_ids: np.ndarray) -> bool:
        """What ``ReplayMemory.update_priorities`` calls: False (nothing changed) if a TD error is not
        finite; else ``update`` with the slots of the ids still held (stale ones skipped) and their abs(TD).
        Prioritized samplers override it with one compiled call doing all of it."""
        if not self.keeps_priorities():  # ``update`` does nothing: only the check is left
            return bool(all_finite(td_errors))
        slots, td_abs, finite = current_priorities(ids, td_errors, stored_ids)
        if finite and slots.size:
            self.update(slots, td_abs)
        return finite
