"""``make_replay(cfg, ...)``: the registry of replay kinds (samplers), the writer, and the run label.

``register_sampler(kind, cls)`` adds a kind: a user's sampler is one file that defines a ``Sampler`` subclass
(its one ``draw_members``) and registers it, named in the config's ``plugins`` (docs/extending.md). A registered
kind runs solo, in cohorts, under ``per grid`` and on Ray, and the sampler contract tests
(tests/replay/test_sampler_contract.py) run over the whole registry."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from per_cli.plugins import load_plugins
from per_cli.replay.memory import Batch, ReplayMemory
from per_cli.replay.samplers import (
    CombinedSampler,
    LAPSampler,
    PrioritizedSampler,
    RankSampler,
    RecentSampler,
    Sampler,
    UniformSampler,
)
from per_cli.replay.storage.budget import ensure_memory_fits
from per_cli.replay.storage.frames import make_storage, storage_bytes
from per_cli.replay.writers.base import Writer

SamplerFactory = Callable[..., Sampler]

# kind -> factory(replay_cfg, storage, rng) returning a sampler (`none` has no window: it is W = B already)
REPLAY_KINDS: dict[str, SamplerFactory] = {
    "none": lambda cfg, storage, rng: RecentSampler(storage, rng),
    "uniform": lambda cfg, storage, rng: UniformSampler(storage, rng, cfg.window),
    "combined": lambda cfg, storage, rng: CombinedSampler(storage, rng, cfg.window),
    "prioritized": lambda cfg, storage, rng: PrioritizedSampler(storage, rng, cfg.alpha, cfg.priority_eps, cfg.window),
    "rank": lambda cfg, storage, rng: RankSampler(storage, rng, cfg.alpha, cfg.rank_resort_period, cfg.window),
    # Fujimoto et al. 2020: LAP's priorities without IS weights, PAL's uniform draws; each with its own loss
    # (the agent's loss follows the kind: per_cli/rl/losses.py)
    "lap": lambda cfg, storage, rng: LAPSampler(storage, rng, cfg.alpha, cfg.min_priority, cfg.window),
    "pal": lambda cfg, storage, rng: UniformSampler(storage, rng, cfg.window),
}

SAMPLER_CLASSES: dict[str, type[Sampler]] = {
    "none": RecentSampler,
    "uniform": UniformSampler,
    "combined": CombinedSampler,
    "prioritized": PrioritizedSampler,
    "rank": RankSampler,
    "lap": LAPSampler,
    "pal": UniformSampler,
}


def register_sampler(kind: str, sampler_class: type[Sampler], factory: SamplerFactory | None = None) -> None:
    """Make ``kind`` a ``replay.kind``: ``factory(replay_cfg, storage, rng)`` builds its sampler (default:
    ``sampler_class(storage, rng, window=replay_cfg.window)``). Registering a kind again with the same class is a
    no-op (a plugin imported twice); with another class, or a class without its own ``draw_members``, it is an
    error."""
    if not kind.isidentifier():
        raise ValueError(f"a replay kind is a name of letters, digits and underscores, got {kind!r}")
    if not (isinstance(sampler_class, type) and issubclass(sampler_class, Sampler)):
        raise TypeError(f"replay kind {kind!r}: {sampler_class!r} is not a Sampler subclass")
    if sampler_class.draw_members is Sampler.draw_members:
        raise TypeError(f"replay kind {kind!r}: {sampler_class.__name__} defines no draw_members")
    known = SAMPLER_CLASSES.get(kind)
    if known is not None:
        if known.__qualname__ == sampler_class.__qualname__ and known.__module__ == sampler_class.__module__:
            return
        raise ValueError(f"replay kind {kind!r} is already registered (by {known.__module__}.{known.__qualname__})")
    if factory is None:
        factory = lambda cfg, storage, rng: sampler_class(storage, rng, window=cfg.window)  # noqa: E731
    REPLAY_KINDS[kind] = factory
    SAMPLER_CLASSES[kind] = sampler_class


def memory_bytes(cfg, obs_shape: tuple[int, ...], obs_dtype: np.dtype) -> int:
    """Bytes ``make_replay`` allocates for ``cfg`` (the whole run config): the storage's arrays (the same
    storage choice as ``make_storage``) and the sampler's structures. Allocates nothing (for preflight)."""
    sampler = SAMPLER_CLASSES.get(cfg.replay.kind, Sampler)
    return storage_bytes(cfg, obs_shape, obs_dtype) + sampler.bytes_needed(cfg.replay.capacity)


def replay_label(replay_cfg) -> str:
    """The name of a run's replay in run names and ``summary.json``: the kind, ``kind+her`` with relabelling."""
    return replay_cfg.kind if replay_cfg.her_strategy == "off" else f"{replay_cfg.kind}+her"


def make_writer(cfg, storage, env, seed: int) -> Writer:
    """The writer of ``cfg.replay``: hindsight relabelling when ``her_strategy`` is not ``off`` (it needs the
    env's goal layout), else each transition stored as it comes."""
    if cfg.replay.her_strategy == "off":
        return Writer()
    from per_cli.replay.writers.hindsight import make_hindsight

    return make_hindsight(cfg.replay, storage, env, seed)


def make_replay(cfg, obs_shape: tuple[int, ...], obs_dtype: np.dtype, seed: int, env=None) -> ReplayMemory:
    """Build the memory for ``cfg.replay`` (``cfg`` is the whole run config). ``env`` is needed only with
    relabelling (``replay.her_strategy``), for the env's goal layout and reward function."""
    load_plugins(cfg.plugins)  # (a worker builds the run: the kinds its plugins register)
    need, capacity = memory_bytes(cfg, obs_shape, obs_dtype), cfg.replay.capacity
    ensure_memory_fits(  # the whole memory, before any of it is allocated (each storage also checks its own part)
        need, f"a replay memory of {capacity:,} transitions {tuple(obs_shape)}", per_unit=max(need // capacity, 1)
    )
    storage = make_storage(cfg, obs_shape, obs_dtype)  # Atari frame stacks: each frame stored once
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x5EED]))
    sampler = REPLAY_KINDS[cfg.replay.kind](cfg.replay, storage, rng)
    sampler.chunk = cfg.replay.chunk  # (before its draw's lists are built: they carry chunk - 1)
    return ReplayMemory(storage, sampler, make_writer(cfg, storage, env, seed), cfg.replay.n_step, cfg.agent.gamma)


__all__ = [
    "Batch", "REPLAY_KINDS", "SAMPLER_CLASSES", "ReplayMemory", "make_replay", "memory_bytes", "register_sampler",
    "replay_label",
]  # fmt: skip
