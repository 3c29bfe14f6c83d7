"""Samplers decide which stored transitions form a batch; the storage turns their slots into arrays.

Each sampler owns a seeded ``numpy.random.Generator``; same seed, same batches.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from per_cli.replay.storage import TransitionStorage


class Sampler(Protocol):
    def on_add(self, slot: int) -> None:
        """Called after ``slot`` was (over)written with a new transition."""

    def sample(self, batch_size: int, beta: float) -> tuple[np.ndarray, np.ndarray]:
        """Return (slots, importance-sampling weights)."""

    def update(self, slots: np.ndarray, td_abs: np.ndarray) -> None:
        """New |TD error| of the transitions in ``slots`` (all current, finite)."""

    def stats(self) -> dict[str, float]:
        """Scalars worth logging (e.g. ``priority_max``)."""


class _UnweightedSampler:
    """Shared plumbing of the samplers whose IS weights are all one."""

    def __init__(self, storage: TransitionStorage, rng: np.random.Generator):
        self.storage = storage
        self.rng = rng

    def on_add(self, slot: int) -> None:
        pass

    def update(self, slots: np.ndarray, td_abs: np.ndarray) -> None:
        pass

    def stats(self) -> dict[str, float]:
        return {}

    @staticmethod
    def _ones(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)


class UniformSampler(_UnweightedSampler):
    """Uniform without replacement over the stored transitions."""

    def sample(self, batch_size: int, beta: float) -> tuple[np.ndarray, np.ndarray]:
        slots = self.rng.choice(self.storage.size, size=batch_size, replace=False)
        return slots.astype(np.int64), self._ones(batch_size)


class RecentSampler(_UnweightedSampler):
    """The most recent ``batch_size`` transitions, oldest first: the correlated no-replay baseline."""

    def sample(self, batch_size: int, beta: float) -> tuple[np.ndarray, np.ndarray]:
        start = self.storage.cursor - batch_size
        slots = np.arange(start, start + batch_size, dtype=np.int64) % self.storage.capacity
        return slots, self._ones(batch_size)


class CombinedSampler(UniformSampler):
    """Uniform plus the latest transition in every batch (Zhang & Sutton 2017)."""

    def sample(self, batch_size: int, beta: float) -> tuple[np.ndarray, np.ndarray]:
        latest = self.storage.latest_slot
        # uniform over the other stored slots, so the latest transition is not drawn twice
        others = self.rng.choice(self.storage.size - 1, size=batch_size - 1, replace=False)
        # the stored slots are 0..size-1 and the latest is one of them: shift past it, cyclically
        others = (latest + 1 + others) % self.storage.size
        return np.append(others, latest).astype(np.int64), self._ones(batch_size)
