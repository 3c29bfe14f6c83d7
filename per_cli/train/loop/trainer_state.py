"""A member's checkpoints: what it saves, and how a run continues from them (``per train --resume``).

Each component saves itself as plain data (numbers, strings, numpy arrays, torch tensors; envs by
:func:`~per_cli.train.checkpoints.env_state.snapshot_env`), so a checkpoint loads with ``weights_only=True`` and does
not depend on where per_cli's classes live."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from per_cli.config import to_dict
from per_cli.train.checkpoints import checkpoint
from per_cli.train.checkpoints.env_state import restore_env, snapshot_env
from per_cli.train.checkpoints.resume import check_resume
from per_cli.train.measures.metrics import RunningMeans
from per_cli.train.measures.update_window import UpdateWindow

if TYPE_CHECKING:
    from per_cli.train.loop.member_data import MemberData


def state_dict(d: MemberData) -> dict[str, Any]:
    """Everything but the replay memory that a resumed run needs to continue exactly: the agent, the loop
    counters (also the position of the ε and β schedules), the evaluator, the RNGs (action selection, the
    sampler's, torch's), the training env with the observation in hand, the metrics not yet logged, and the wall
    time so far."""
    return {
        "config": to_dict(d.cfg),
        "loop": d.state.state_dict(),
        "agent": d.agent.state_dict(),
        "evaluator": d.evaluator.state_dict(),
        "rng": {
            "action": d.action_rng.bit_generator.state,
            "sampler": d.memory.sampler.rng.bit_generator.state,
            "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
        },
        "env": snapshot_env(d.env),
        "obs": d.obs,
        "metrics": {
            "window": d.window.state_dict(),
            "log_means": d.log_means.state_dict(),
            "episode_means": d.episode_means.state_dict(),
        },
        "elapsed_s": time.time() - d.start_time,
        "replay_saved": bool(d.cfg.train.save_replay),
    }


def load_state_dict(d: MemberData, state: dict[str, Any]) -> None:
    """The inverse of :func:`state_dict`. An env that could not be pickled starts a new episode, seeded by the
    step (the episode in progress is dropped from the logs; the run goes on, not bit-for-bit)."""
    d.agent.load_state_dict(state["agent"])
    d.state.load_state_dict(state["loop"])
    d.state.quiet_until = 0  # (the step moved: end_step asks Periodic again)
    d.evaluator.load_state_dict(state["evaluator"])
    rng = state["rng"]
    d.action_rng.bit_generator.state = rng["action"]
    d.memory.sampler.rng.bit_generator.state = rng["sampler"]
    torch.set_rng_state(rng["torch"].cpu())
    if rng["cuda"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([t.cpu() for t in rng["cuda"]])
    if state["env"] is not None:
        restore_env(d.env, state["env"])  # (its values set on the env this run's config made)
        d.obs = state["obs"]
    else:
        d.state.episode_return, d.state.episode_length = 0.0, 0
        d.obs, _ = d.env.reset(seed=d.cfg.seed + d.state.step)
    metrics = state["metrics"]
    d.window = UpdateWindow.from_state_dict(metrics["window"])
    d.log_means = RunningMeans.from_state_dict(metrics["log_means"])
    d.episode_means = RunningMeans.from_state_dict(metrics["episode_means"])
    d.elapsed_before = float(state["elapsed_s"])


def resume(d: MemberData, run_dir: Path, loaded: checkpoint.Loaded | None = None) -> int:
    """Load ``run_dir``'s latest checkpoint (or ``loaded``, read from it already: ``per train --resume`` reads
    and checks it before the config's plugins are imported) into ``d``; running it then continues it. Returns its
    step. ConfigError (nothing changed on disk) when it cannot be continued with this config; CheckpointRefused
    when it is not loaded at all (nothing in it runs)."""
    state, path = loaded if loaded is not None else checkpoint.load_checkpoint(run_dir)
    loop = state["loop"]
    check_resume(state["config"], loop["step"], loop["episode"], d.cfg)
    load_state_dict(d, state)
    replay = checkpoint.load_replay(path) if state["replay_saved"] else None
    if replay is not None:
        d.memory.load_state_dict(replay)
    else:  # an empty memory: collect learning_starts transitions (a batch at least) again before learning
        d.refill = min(d.learn_from, d.cfg.replay.capacity)
    d.resumed_from = d.state.step
    return d.state.step


def save(d: MemberData) -> None:
    """A checkpoint of ``d`` at its step into its run directory (its memory too under ``train.save_replay``),
    after its logged rows are flushed."""
    replay = d.memory.state_dict() if d.cfg.train.save_replay else None
    d.logger.flush()
    checkpoint.save_checkpoint(d.logger.run_dir, d.state.step, state_dict(d), replay)
