"""``make_replay(cfg, ...)``: the registry of replay kinds."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from per_cli.replay.memory import Batch, ReplayMemory
from per_cli.replay.samplers import CombinedSampler, RecentSampler, Sampler, UniformSampler
from per_cli.replay.storage import TransitionStorage

SamplerFactory = Callable[..., Sampler]

# kind -> factory(replay_cfg, storage, rng) returning a sampler
REPLAY_KINDS: dict[str, SamplerFactory] = {
    "none": lambda cfg, storage, rng: RecentSampler(storage, rng),
    "uniform": lambda cfg, storage, rng: UniformSampler(storage, rng),
    "combined": lambda cfg, storage, rng: CombinedSampler(storage, rng),
}


def make_replay(cfg, obs_shape: tuple[int, ...], obs_dtype: np.dtype, seed: int) -> ReplayMemory:
    """Build the memory for ``cfg.replay`` (``cfg`` is the whole run config)."""
    storage = TransitionStorage(cfg.replay.capacity, obs_shape, obs_dtype)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x5EED]))
    sampler = REPLAY_KINDS[cfg.replay.kind](cfg.replay, storage, rng)
    return ReplayMemory(storage, sampler)


__all__ = ["Batch", "REPLAY_KINDS", "ReplayMemory", "make_replay"]
