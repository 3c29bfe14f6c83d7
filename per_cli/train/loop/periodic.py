"""Which env steps carry a periodic task of a run: a target sync by period, the step budget, an evaluation, a
progress update, a checkpoint. One definition, read by ``tasks.end_step`` (each member's, solo or in a
cohort)."""

from __future__ import annotations

import math

PROGRESS_EVERY = 1000  # env steps between progress-bar updates


class Periodic:
    """The periodic tasks of a run of ``cfg``, by the step count ``after`` a step (``state.step + 1``)."""

    def __init__(self, cfg):
        self._sync_period = cfg.agent.target_update_period
        self._total_steps = cfg.train.total_steps
        self._total_episodes = math.inf if cfg.train.total_episodes is None else cfg.train.total_episodes
        self._eval_every = cfg.train.eval_every if cfg.train.eval_episodes > 0 else 0
        self._checkpoint_every = cfg.train.checkpoint_every or 0

    def syncs(self, after: int) -> bool:
        return after % self._sync_period == 0

    def ends(self, after: int, episodes: int) -> bool:
        """The budget is spent: ``after`` steps, or ``episodes`` finished under an episode budget
        (``train.total_episodes``)."""
        return after == self._total_steps or episodes >= self._total_episodes

    def evaluates(self, after: int) -> bool:
        return bool(self._eval_every) and after % self._eval_every == 0

    def reports(self, after: int) -> bool:
        return after % PROGRESS_EVERY == 0

    def checkpoints(self, after: int) -> bool:
        return bool(self._checkpoint_every) and after % self._checkpoint_every == 0

    def next_due(self, after: int) -> int:
        """The first step count >= ``after`` at which any task above falls (the budget's end at the latest):
        until then a step carries none of them, and ``tasks.end_step`` only moves the counter on."""
        periods = (self._sync_period, PROGRESS_EVERY, self._eval_every, self._checkpoint_every)
        return min(self._total_steps, *(-(-after // p) * p for p in periods if p))
