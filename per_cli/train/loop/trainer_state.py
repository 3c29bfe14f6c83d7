"""A Trainer's checkpoints: what it saves, and how a run continues from them (``per train --resume``).

Each component saves itself (agent, loop counters, evaluator, RNG streams, env, metric windows) as plain data:
dicts, lists, numbers, strings, numpy arrays and torch tensors, no per_cli object, so a checkpoint is read with
``torch.load(weights_only=True)`` and does not depend on where per_cli's classes live; the envs' snapshots too
(:func:`~per_cli.train.checkpoints.env_state.snapshot_env`: their attributes' values, set back on the env the
run's config makes).
:mod:`per_cli.train.checkpoints.checkpoint` only writes and reads the files. A mixin of
:class:`~per_cli.train.loop.trainer.Trainer`, kept apart so that the trainer's module holds the loop's phases: it
uses the trainer's ``cfg``, ``agent``, ``memory``, ``state``, ``evaluator``, ``action_rng``, ``env``, ``device``,
``logger`` and metric windows.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from per_cli.config import to_dict
from per_cli.train.checkpoints import checkpoint
from per_cli.train.checkpoints.env_state import restore_env, snapshot_env
from per_cli.train.checkpoints.resume import check_resume
from per_cli.train.measures.metrics import RunningMeans
from per_cli.train.measures.update_window import UpdateWindow


class Checkpointed:
    """The checkpoint half of a Trainer: ``state_dict``/``load_state_dict``, ``resume`` and ``_checkpoint``."""

    def state_dict(self) -> dict[str, Any]:
        """Everything but the replay memory that a resumed run needs to continue exactly: the agent, the loop
        counters (also the position of the ε and β schedules), the evaluator, the RNGs (action selection, the
        sampler's, torch's), the training env with the observation in hand, the metrics not yet logged, and
        the wall time so far."""
        return {
            "config": to_dict(self.cfg),
            "loop": self.state.state_dict(),
            "agent": self.agent.state_dict(),
            "evaluator": self.evaluator.state_dict(),
            "rng": {
                "action": self.action_rng.bit_generator.state,
                "sampler": self.memory.sampler.rng.bit_generator.state,
                "torch": torch.get_rng_state(),
                "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
            },
            "env": snapshot_env(self.env),
            "obs": self.obs,
            "metrics": {
                "window": self._window.state_dict(),
                "log_means": self._log_means.state_dict(),
                "episode_means": self._episode_means.state_dict(),
            },
            "elapsed_s": time.time() - self._start_time,
            "replay_saved": bool(self.cfg.train.save_replay),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """The inverse of :meth:`state_dict`. An env that could not be pickled starts a new episode, seeded
        by the step (the episode in progress is dropped from the logs; the run goes on, not bit-for-bit)."""
        self.agent.load_state_dict(state["agent"])
        self.state.load_state_dict(state["loop"])
        self.state.quiet_until = 0  # (the step moved: end_step asks Periodic again)
        self.evaluator.load_state_dict(state["evaluator"])
        rng = state["rng"]
        self.action_rng.bit_generator.state = rng["action"]
        self.memory.sampler.rng.bit_generator.state = rng["sampler"]
        torch.set_rng_state(rng["torch"].cpu())
        if rng["cuda"] is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all([t.cpu() for t in rng["cuda"]])
        if state["env"] is not None:
            restore_env(self.env, state["env"])  # (its values set on the env this run's config made)
            self.obs = state["obs"]
        else:
            self.state.episode_return, self.state.episode_length = 0.0, 0
            self.obs, _ = self.env.reset(seed=self.cfg.seed + self.state.step)
        metrics = state["metrics"]
        self._window = UpdateWindow.from_state_dict(metrics["window"])
        self._log_means = RunningMeans.from_state_dict(metrics["log_means"])
        self._episode_means = RunningMeans.from_state_dict(metrics["episode_means"])
        self._elapsed_before = float(state["elapsed_s"])

    def resume(self, run_dir: Path, loaded: checkpoint.Loaded | None = None) -> int:
        """Load ``run_dir``'s latest checkpoint (or ``loaded``, read from it already: ``per train --resume``
        reads and checks it before the config's plugins are imported); ``run(run_dir)`` then continues it.
        Returns its step. ConfigError (nothing changed on disk) when it cannot be continued with this config;
        CheckpointRefused when it is not loaded at all (nothing in it runs)."""
        state, path = loaded if loaded is not None else checkpoint.load_checkpoint(run_dir)
        loop = state["loop"]
        check_resume(state["config"], loop["step"], loop["episode"], self.cfg)
        self.load_state_dict(state)
        replay = checkpoint.load_replay(path) if state["replay_saved"] else None
        if replay is not None:
            self.memory.load_state_dict(replay)
        else:  # an empty memory: collect learning_starts transitions again before learning
            t = self.cfg.train
            self._min_fill = min(max(t.learning_starts, self.cfg.replay.batch_size), self.cfg.replay.capacity)
        self._resumed_from = self.state.step
        return self.state.step

    def _checkpoint(self, run_dir: Path) -> None:
        replay = self.memory.state_dict() if self.cfg.train.save_replay else None
        if self.logger is not None:
            self.logger.flush()
        checkpoint.save_checkpoint(run_dir, self.state.step, self.state_dict(), replay)
