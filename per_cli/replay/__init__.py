"""``make_replay(cfg, ...)``: the registry of replay kinds (:data:`KINDS`, one :class:`KindSpec` each), the writer,
and the run label. A user's kind is one file that defines its ``Sampler`` subclass (and its ``replay.params``
dataclass) and calls ``register_kind``; it then runs everywhere a built-in kind runs and the contract tests cover
it (docs/extending.md)."""

from __future__ import annotations

import numpy as np

from per_cli.plugins import load_plugins
from per_cli.replay.kinds import KINDS, KindSpec, kind_spec, register_kind, resolve_config
from per_cli.replay.memory import Batch, ReplayMemory
from per_cli.replay.samplers.combined import COMBINED
from per_cli.replay.samplers.lap import LAP, PAL
from per_cli.replay.samplers.prioritized import PRIORITIZED
from per_cli.replay.samplers.rank import RANK
from per_cli.replay.samplers.recent import NONE
from per_cli.replay.samplers.uniform import UNIFORM
from per_cli.replay.storage.budget import ensure_memory_fits
from per_cli.replay.storage.frames import make_storage, storage_bytes
from per_cli.replay.writers.base import Writer

for _spec in (NONE, UNIFORM, COMBINED, PRIORITIZED, RANK, LAP, PAL):  # (this order: grids' and figures' order)
    register_kind(_spec)
# the literature's kinds, each one file that registers itself as a user's plugin does (after the built-ins: their order)
from per_cli.replay.samplers import laber, relo  # noqa: E402, F401


def memory_bytes(cfg, obs_shape: tuple[int, ...], obs_dtype: np.dtype, frame_stack: int | None = None) -> int:
    """Bytes ``make_replay`` allocates for ``cfg`` (the whole run config): the storage's arrays (the same
    storage choice as ``make_storage``) and the sampler's structures. Allocates nothing (for preflight)."""
    spec = KINDS.get(cfg.replay.kind)
    sampler = 0 if spec is None else spec.sampler.bytes_needed(cfg.replay.capacity)
    return storage_bytes(cfg, obs_shape, obs_dtype, frame_stack) + sampler


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


def make_replay(
    cfg, obs_shape: tuple[int, ...], obs_dtype: np.dtype, seed: int, env=None, frame_stack: int | None = None
) -> ReplayMemory:
    """Build the memory for ``cfg.replay`` (``cfg`` is the whole run config). ``env`` is needed only with
    relabelling (``replay.her_strategy``), for the env's goal layout and reward function; ``frame_stack``, the
    frames an observation stacks where the env's observations are frame stacks (Atari's; None elsewhere)."""
    load_plugins(cfg.plugins)  # (a worker builds the run: the kinds its plugins register)
    need, capacity = memory_bytes(cfg, obs_shape, obs_dtype, frame_stack), cfg.replay.capacity
    ensure_memory_fits(  # the whole memory, before any of it is allocated (each storage also checks its own part)
        need, f"a replay memory of {capacity:,} transitions {tuple(obs_shape)}", per_unit=max(need // capacity, 1)
    )
    storage = make_storage(cfg, obs_shape, obs_dtype, frame_stack)  # frame stacks: each frame stored once
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x5EED]))
    sampler = kind_spec(cfg.replay.kind).build(cfg.replay, storage, rng)
    sampler.chunk = cfg.replay.chunk  # (before its draw's lists are built: they carry chunk - 1)
    return ReplayMemory(storage, sampler, make_writer(cfg, storage, env, seed), cfg.replay.n_step, cfg.agent.gamma)


__all__ = [
    "KINDS", "Batch", "KindSpec", "ReplayMemory", "kind_spec", "make_replay", "memory_bytes", "register_kind",
    "replay_label", "resolve_config",
]  # fmt: skip
