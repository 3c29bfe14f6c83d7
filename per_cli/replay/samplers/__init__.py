"""Samplers decide which stored transitions form a batch; the storage turns their slots into arrays.

| kind          | class                | batch                                                | IS weights        |
| ------------- | -------------------- | ---------------------------------------------------- | ----------------- |
| `none`        | `RecentSampler`      | the last B transitions, oldest first                 | ones              |
| `uniform`     | `UniformSampler`     | uniform without replacement                          | ones              |
| `combined`    | `CombinedSampler`    | the latest transition + B-1 uniform w/o replacement  | ones              |
| `prioritized` | `PrioritizedSampler` | P(i) ∝ p_i^α, p = abs(δ) + ε; stratified (sum tree)  | (p_i / p_min)^-β  |
| `rank`        | `RankSampler`        | P(i) ∝ rank(i)^-α by abs(δ); stratified (heap)       | (rank_i / N)^(αβ) |
| `lap`         | `LAPSampler`         | P(i) ∝ max(abs(δ), κ)^α; stratified (sum tree)       | ones (LAP's loss) |
| `pal`         | `UniformSampler`     | uniform without replacement (PAL's loss)             | ones              |
| `laber`       | `LaBERSampler`       | B ∝ abs(δ) + ε from m·B uniform (scored, LaBER)      | mean(p) / p_i     |
| `relo`        | `ReLoSampler`        | as `prioritized`, p = max(L − L_target, 0) + ε       | as `prioritized`  |

A sampler reads a storage only through :class:`~per_cli.replay.samplers.base.Storage` (its ``counters``, ids and
oldest sampleable id), so every sampler works on every storage; a slot that became unsampleable (the memory's
``add_members`` events) has zero mass in the structured kinds until it is written again. Priorities, IS
weights (normalised over the whole memory) and the phase rules: docs/replay.md. Each kind's file states its
``KindSpec``.
"""

from __future__ import annotations

from per_cli.replay.samplers.base import Sampler, Storage
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
