"""Samplers decide which stored transitions form a batch; the storage turns their slots into arrays.

Each sampler owns a seeded ``numpy.random.Generator``: same seed, same batches.

| kind          | class                | batch                                                | IS weights        |
| ------------- | -------------------- | ---------------------------------------------------- | ----------------- |
| `none`        | `RecentSampler`      | the last B transitions, oldest first                 | ones              |
| `uniform`     | `UniformSampler`     | uniform without replacement                          | ones              |
| `combined`    | `CombinedSampler`    | the latest transition + B-1 uniform w/o replacement  | ones              |
| `prioritized` | `PrioritizedSampler` | P(i) ∝ p_i^α, p = abs(δ) + ε; stratified (sum tree)  | (p_i / p_min)^-β  |
| `rank`        | `RankSampler`        | P(i) ∝ rank(i)^-α by abs(δ); stratified (heap)       | (rank_i / N)^(αβ) |

The storage contract
--------------------
Samplers talk to a storage only through ``storage.size``, ``storage.capacity``, ``storage.cursor``,
``storage.latest_slot`` and ``storage.sampleable(slots)``, so any storage with those (the ring
``TransitionStorage``, an Atari frame storage) works with every sampler. Slots ``0 .. size-1`` are filled;
``sampleable(slots)`` is False for a filled slot whose transition is incomplete (e.g. its stacked frame
history was partly overwritten). How an unsampleable slot is never sampled:

- Sum-tree and rank samplers keep a *zero-mass* entry for it: ``on_add(slot)`` asks
  ``storage.sampleable([slot])`` and gives the slot the maximum priority only if True, and
  ``on_invalidate(slots)`` (called by the memory when an add makes other slots unsampleable) zeroes their
  mass. A zero-mass slot is never drawn (``sum_tree.find`` only enters positive subtrees; the rank heap
  drops the slot) and ignores priority updates until ``on_add`` writes it again. A storage whose slot
  becomes sampleable later than its add calls ``on_add(slot)`` again at that point.
- Uniform, combined and none draw, then check ``storage.sampleable`` on the drawn slots and redraw any
  that fail (exactly uniform over the sampleable slots: drawing on until B pass is sampling without
  replacement from the sampleable ones).

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
- ``ReplayMemory.update_priorities`` calls ``sampler.update_current(ids, td_errors, stored_ids) -> bool``;
  the base class filters stale ids and non-finite errors (``structures/ids.py``) and calls ``update``, and
  both prioritized samplers override it with one compiled call doing the same (this glue cost more than
  the tree itself at small batches).

Modules: ``base.py`` (the ``Sampler`` base class with no-op hooks, the ``Storage`` protocol), ``recent.py``,
``uniform.py``, ``combined.py``, ``prioritized.py``, ``rank.py``.
"""

from __future__ import annotations

from per_cli.replay.samplers.base import Sampler, Storage
from per_cli.replay.samplers.combined import CombinedSampler
from per_cli.replay.samplers.prioritized import PrioritizedSampler
from per_cli.replay.samplers.rank import RankSampler
from per_cli.replay.samplers.recent import RecentSampler
from per_cli.replay.samplers.uniform import UniformSampler

__all__ = [
    "CombinedSampler",
    "PrioritizedSampler",
    "RankSampler",
    "RecentSampler",
    "Sampler",
    "Storage",
    "UniformSampler",
]
