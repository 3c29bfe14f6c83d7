"""Samplers decide which stored transitions form a batch; the storage turns their slots into arrays.

A sampler reads a storage only through :class:`~per_cli.replay.sampler.Storage` (counters, ids, oldest
sampleable id), so every sampler works on every storage; a slot that became unsampleable has zero mass in the
structured kinds until it is written again. Each kind's file states its rule and ``KindSpec``; priorities, IS
weights and phases: docs/replay.md."""

from __future__ import annotations

from per_cli.replay.sampler import Sampler, Storage
from per_cli.replay.samplers.combined import CombinedSampler
from per_cli.replay.samplers.lap import LAPSampler
from per_cli.replay.samplers.prioritized import PrioritizedSampler
from per_cli.replay.samplers.rank import RankSampler
from per_cli.replay.samplers.recent import RecentSampler
from per_cli.replay.samplers.uniform import UniformSampler

__all__ = [
    "CombinedSampler",
    "LAPSampler",
    "PrioritizedSampler",
    "RankSampler",
    "RecentSampler",
    "Sampler",
    "Storage",
    "UniformSampler",
]
