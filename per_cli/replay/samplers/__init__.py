"""Samplers decide which stored transitions form a batch; the storage turns their slots into arrays.

Each sampler owns a seeded ``numpy.random.Generator``: same seed, same batches. Each kind's draw is one compiled
function over a list of members (``draw_members``, samplers/base.py): a solo run calls it over a list of one, a
cohort over its members, so a member's batches do not depend on the cohort it is drawn in.

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

The storage contract: samplers read a storage only through ``storage.counters`` (storage/ring.py),
``latest_slot``, ``oldest_sampleable_id()`` and ``sampleable(slots)``, so every sampler works on every storage. The
sampleable ids are ``oldest .. added - 1`` and id ``t`` lives in slot ``t % capacity``: uniform, combined and none
draw from that range (inside the ``window`` newest, if set); the sum-tree and rank kinds give a slot zero mass while
it is unsampleable (``add_members`` with ``entering`` False), and a zero-mass slot is never drawn and ignores
priority updates until it is written again.

Priorities and IS weights (Schaul et al. 2016): a new transition enters at the largest priority held now (1 for the
first: Algorithm 1), so the entry priority falls as early large TD errors shrink. IS weights are normalised by the
largest weight over the whole memory, w_i = (P(i) / P_min)^-β, so every weight lies in (0, 1].

Each kind's file states its ``KindSpec`` (``per_cli/replay/kinds.py``: the registry; ``lap.py`` that of ``pal``
too); ``laber.py`` and ``relo.py`` register theirs as a user's plugin does.
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
