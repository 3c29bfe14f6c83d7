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

The storage contract
--------------------
Samplers talk to a storage only through ``storage.counters`` (cursor, size, added, episodes ended, first
sampleable id, capacity: storage/ring.py), ``storage.latest_slot``, ``storage.oldest_sampleable_id()`` and
``storage.sampleable(slots)``, so any storage with those (the ring ``TransitionStorage``, an Atari frame storage)
works with every sampler. The sampleable transitions are always the ids ``oldest .. added - 1`` (a frame
storage's oldest transitions lose their frames first), and the slot of id ``t`` is ``t % capacity``. So:

- Uniform, combined and none draw ids from that range (inside the ``window`` newest, if set): nothing is drawn
  and then refused.
- Sum-tree and rank samplers keep a *zero-mass* entry for an unsampleable slot: the memory asks
  ``storage.sampleable([slot])`` of a written slot, and the kind's ``add_members`` gives it the maximum
  priority only if True (``entering``); the slots an add makes unsampleable reach it as events with
  ``entering`` False, which zero their mass. A zero-mass slot is never drawn (``sum_tree.find`` only enters
  positive subtrees; the rank heap drops the slot) and ignores priority updates until it is written again.

Priorities and IS weights (Schaul et al. 2016)
----------------------------------------------
- New transitions enter at the maximum priority held in the memory (p_t = max_{i<t} p_i, Algorithm 1 of the
  paper): the sum tree's max column holds max p^α, which is used as the new leaf value as it is (α is not
  applied twice); 1 for the very first transition. Because it is the max over the priorities held now
  (not a running max since the start), it falls when the large TD errors of early training shrink.
- IS weights are normalised by the maximum weight over the whole memory, not over the batch:
  w_i = (N·P(i))^-β / max_j (N·P(j))^-β = (P(i) / P_min)^-β, where P_min is the smallest sampling
  probability of any stored transition (the min tree's root for proportional, the last rank for rank-based).
  N cancels, and every weight lies in (0, 1].
- ``ReplayMemory.update_priorities`` is the kind's ``update_members`` over the member alone: one compiled
  call that skips stale ids, refuses non-finite errors (``structures/ids.py``) and writes the priorities.

Modules: ``base.py`` (the ``Sampler`` protocol and its framework, the ``Storage`` protocol), ``recent.py``,
``uniform.py``, ``combined.py``, ``prioritized.py``, ``rank.py``, ``lap.py``: each kind's file also states its
``KindSpec`` (``per_cli/replay/kinds.py``: the registry), ``lap.py`` that of ``pal`` too; ``laber.py`` and
``relo.py`` register theirs as a user's plugin does (``per_cli.replay`` imports them after the built-ins).
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
