"""``make_replay(cfg, ...)``: the registry of replay kinds."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from per_cli.replay.memory import Batch, ReplayMemory
from per_cli.replay.samplers import (
    CombinedSampler,
    PrioritizedSampler,
    RankSampler,
    RecentSampler,
    Sampler,
    UniformSampler,
)
from per_cli.replay.storage.frames import make_storage

SamplerFactory = Callable[..., Sampler]

# kind -> factory(replay_cfg, storage, rng) returning a sampler
REPLAY_KINDS: dict[str, SamplerFactory] = {
    "none": lambda cfg, storage, rng: RecentSampler(storage, rng),
    "uniform": lambda cfg, storage, rng: UniformSampler(storage, rng),
    "combined": lambda cfg, storage, rng: CombinedSampler(storage, rng),
    "prioritized": lambda cfg, storage, rng: PrioritizedSampler(storage, rng, cfg.alpha, cfg.priority_eps),
    "rank": lambda cfg, storage, rng: RankSampler(storage, rng, cfg.alpha, cfg.rank_resort_period),
    # goal relabelling (replay/hindsight.py): the sampler of replay.her_sampler under a HindsightMemory
    "hindsight": lambda cfg, storage, rng: REPLAY_KINDS[cfg.her_sampler](cfg, storage, rng),
}


def make_replay(cfg, obs_shape: tuple[int, ...], obs_dtype: np.dtype, seed: int, env=None) -> ReplayMemory:
    """Build the memory for ``cfg.replay`` (``cfg`` is the whole run config). ``env`` is needed only by
    ``hindsight``, for the env's goal layout and reward function."""
    storage = make_storage(cfg, obs_shape, obs_dtype)  # Atari frame stacks: each frame stored once
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x5EED]))
    sampler = REPLAY_KINDS[cfg.replay.kind](cfg.replay, storage, rng)
    if cfg.replay.kind == "hindsight":
        from per_cli.replay.writers.hindsight import make_hindsight

        return make_hindsight(cfg, storage, sampler, env, seed)
    return ReplayMemory(storage, sampler)


__all__ = ["Batch", "REPLAY_KINDS", "ReplayMemory", "make_replay"]
