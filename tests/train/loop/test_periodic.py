"""Which steps carry a periodic task: each by its own period."""

from __future__ import annotations

import dataclasses

from per_cli.config import Config
from per_cli.train.loop.periodic import PROGRESS_EVERY, Periodic


def _config(sync: int, total: int, eval_every: int, eval_episodes: int, checkpoint_every: int) -> Config:
    cfg = Config()
    train = dataclasses.replace(
        cfg.train, total_steps=total, eval_every=eval_every, eval_episodes=eval_episodes,
        checkpoint_every=checkpoint_every,
    )  # fmt: skip
    return dataclasses.replace(cfg, agent=dataclasses.replace(cfg.agent, target_update_period=sync), train=train)


def test_each_task_falls_on_its_own_period():
    due = Periodic(_config(sync=7, total=50, eval_every=20, eval_episodes=3, checkpoint_every=25))
    steps = range(1, 51)
    assert [s for s in steps if due.syncs(s)] == [7, 14, 21, 28, 35, 42, 49]
    assert [s for s in steps if due.evaluates(s)] == [20, 40]
    assert [s for s in steps if due.checkpoints(s)] == [25, 50]
    assert [s for s in steps if due.ends(s)] == [50]
    assert [s for s in range(1, 3 * PROGRESS_EVERY + 1) if due.reports(s)] == [1000, 2000, 3000]


def test_no_evaluation_without_episodes_and_no_checkpoint_at_zero():
    due = Periodic(_config(sync=10**6, total=10**6, eval_every=5, eval_episodes=0, checkpoint_every=0))
    assert not any(due.evaluates(s) or due.checkpoints(s) for s in range(1, 200))
