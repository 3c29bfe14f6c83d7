"""ε-greedy's draws of several members in one compiled call (per_cli/rl/explore.py): each member's action, ε and
generator state are those of ``DQNAgent.explore`` drawing alone with the member's own generator."""

from __future__ import annotations

import numpy as np
import pytest
from numba.typed import List

from per_cli.rl import explore
from per_cli.rl.schedules import LinearSchedule

pytestmark = pytest.mark.skipif(not explore.usable(), reason="numba cannot bind this numpy's bit generators")


def _explore(rng: np.random.Generator, epsilon: float, n_actions: int) -> int:
    """DQNAgent.explore's draw (-1: greedy), written out so that the test does not build agents."""
    return int(rng.integers(n_actions)) if rng.random() < epsilon else -1


@pytest.mark.parametrize("n_actions", [2, 3, 18])
def test_each_member_draws_its_solo_action_and_epsilon_on_its_own_generator(n_actions):
    schedule = LinearSchedule(1.0, 0.05, 950)
    seeds = [3, 1, 4, 1_000_003]
    ours = List([np.random.default_rng(s) for s in seeds])
    theirs = [np.random.default_rng(s) for s in seeds]
    which = np.array([2, 0, 3], dtype=np.int64)  # a subset, out of order (a member left the cohort)
    steps = np.array([0, 500, 949], dtype=np.int64)
    epsilons, draws = np.empty(3), np.empty(3, dtype=np.int64)
    for _ in range(400):
        explore.explore_kernel(ours, which, steps, schedule.start, schedule.end, schedule.duration, n_actions,
                               epsilons, draws)  # fmt: skip
        for k, i in enumerate(which):
            epsilon = schedule(int(steps[k]))
            assert epsilons[k] == epsilon
            assert draws[k] == _explore(theirs[i], epsilon, n_actions)
        steps += 1  # (past the schedule's end: ε stays at its end)
    for rng, own in zip(ours, theirs, strict=True):
        assert rng.bit_generator.state == own.bit_generator.state
    assert (draws >= -1).all() and (draws < n_actions).all()
