"""``floored``: proportional prioritized replay with a priority floor of its own (a user's kind with a
hyper-parameter of its own, docs/extending.md).

Transition i is drawn with probability ∝ (max(|δ_i|, floor) + ε)^α, with PER's importance-sampling weights. The
floor keeps transitions the network already fits from fading out of the batches (LAP's κ, Fujimoto et al. 2020,
without LAP's loss and with PER's correction), so ``replay.params.floor`` sweeps how far prioritization may go:
a floor above every TD error is uniform replay, a floor of 0 is ``prioritized``.

Use it with ``plugins: [examples/samplers/floored.py]``, ``replay.kind: floored`` and, to change the floor,
``replay.params: {floor: 0.5}`` in a config, or ``--set replay.params.floor=0.5``.
"""

from dataclasses import dataclass, field

from per_cli.replay import KindSpec, register_kind
from per_cli.replay.samplers import PrioritizedSampler


@dataclass(frozen=True)
class FlooredParams:
    """``replay.params`` of kind ``floored``, checked like any config key (type, bounds)."""

    floor: float = field(default=0.1, metadata={"lo": 0.0, "hi": None})  # priorities below it count as it


class FlooredSampler(PrioritizedSampler):
    """``prioritized``'s sum tree and draw; only the priority differs: max(|δ|, floor) before ε and α."""

    def __init__(self, storage, rng, alpha: float, eps: float, window: int | None, params: FlooredParams):
        super().__init__(storage, rng, alpha=alpha, eps=eps, window=window)
        self.floor = params.floor


register_kind(
    KindSpec(
        "floored",
        FlooredSampler,
        factory=lambda cfg, storage, rng, params: FlooredSampler(
            storage, rng, cfg.alpha, cfg.priority_eps, cfg.window, params
        ),
        params=FlooredParams,
        takes_chunks=True,
        priority_defaults=(0.6, 0.4),
    )
)
