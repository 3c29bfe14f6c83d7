"""``relo``: prioritized replay by the reducible loss (Sujit, Nath, Braga and Ebrahimi Kahou, NeurIPS 2023).

p = max(L_online − L_target, 0) + ε, both losses against the same TD target: a transition the target network
already fits (noise) loses its priority, one the online network has yet to learn keeps it. The rest is PER's
(``prioritized``). The loop scores each drawn batch with both networks before the update (``KindSpec.scores``),
as the paper computes ReLo beside the loss; :meth:`ReLoSampler.scored` writes the priorities, δ sets none."""

from __future__ import annotations

import numpy as np

from per_cli.replay.kind_spec import KindSpec
from per_cli.replay.kinds import register_kind
from per_cli.replay.sampler import Sampler
from per_cli.replay.samplers.prioritized import PrioritizedSampler


class ReLoSampler(PrioritizedSampler):
    """``prioritized``'s tree, draw and weights; priorities from the networks' losses (``scored``), not from δ."""

    update_members = Sampler.__dict__["update_members"]  # (δ sets no priority: only its finiteness is checked)

    @classmethod
    def scored(cls, lists, which, ids, scores):
        """Each drawn transition's priority: its reducible loss max(L_online − L_target, 0), then PER's ε and α
        (stale ids skipped, a member with a non-finite loss left unchanged); the batch is trained on as drawn."""
        reducible = np.ascontiguousarray(np.maximum(scores.loss - scores.target_loss, 0.0), dtype=np.float32)
        PrioritizedSampler.update_members(lists, which, np.ascontiguousarray(ids, dtype=np.int64), reducible)
        return None


register_kind(
    KindSpec(
        "relo", ReLoSampler, scores=True, colour="#bcbd22", priority_defaults=(0.6, 0.4),
        factory=lambda cfg, storage, rng, params: ReLoSampler(storage, rng, cfg.alpha, cfg.priority_eps, cfg.window),
    )
)  # fmt: skip
