"""Which steps carry a periodic task: each by its own period."""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

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
    assert [s for s in steps if due.ends(s, 0)] == [50]
    assert [s for s in range(1, 3 * PROGRESS_EVERY + 1) if due.reports(s)] == [1000, 2000, 3000]


def test_an_episode_budget_ends_the_run_at_its_last_episode_or_the_step_budget_first():
    cfg = _config(sync=7, total=50, eval_every=20, eval_episodes=3, checkpoint_every=25)
    due = Periodic(dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, total_episodes=4)))
    assert [e for e in range(8) if due.ends(10, e)] == [4, 5, 6, 7]
    assert due.ends(50, 0) and not Periodic(cfg).ends(49, 10**9)  # (no episode budget: the steps alone)


def test_no_evaluation_without_episodes_and_no_checkpoint_at_zero():
    due = Periodic(_config(sync=10**6, total=10**6, eval_every=5, eval_episodes=0, checkpoint_every=0))
    assert not any(due.evaluates(s) or due.checkpoints(s) for s in range(1, 200))


@given(
    sync=st.integers(1, 60), total=st.integers(1, 3000), eval_every=st.integers(0, 900),
    eval_episodes=st.integers(0, 2), checkpoint_every=st.integers(0, 900), after=st.integers(1, 3000),
)  # fmt: skip
def test_next_due_is_the_first_step_carrying_any_task(sync, total, eval_every, eval_episodes, checkpoint_every, after):
    """next_due(after): no step in [after, next_due) carries a task, and next_due itself carries one (or is
    the budget's end): what end_step's early exit relies on."""
    due = Periodic(_config(sync, total, eval_every, eval_episodes, checkpoint_every))
    first = due.next_due(after)

    def carries(s: int) -> bool:
        return due.syncs(s) or due.ends(s, 0) or due.evaluates(s) or due.reports(s) or due.checkpoints(s)

    assert not any(carries(s) for s in range(after, min(first, after + 5000)))
    if after <= total:
        assert after <= first and carries(first)
