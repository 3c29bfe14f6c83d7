"""ε-greedy's draws (per_cli/rl/explore.py): a cohort's batched call draws for each member what the member's solo
draw (``DQNAgent.explore``, one member of the same kernel) draws on its own generator; the draws repeat from a
seed and from a saved generator state, and they are ε-greedy's (explore with probability ε, uniform actions)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from numba.typed import List

from per_cli.config import AgentConfig
from per_cli.rl import explore
from per_cli.rl.agent import DQNAgent
from per_cli.rl.engines import make_agent
from per_cli.rl.schedules import LinearSchedule


def _agent(n_actions: int) -> DQNAgent:
    return make_agent(AgentConfig(hidden_sizes=[8]), (3,), n_actions, torch.device("cpu"))


@pytest.mark.parametrize("n_actions", [2, 3, 18])
def test_each_member_draws_its_solo_action_and_epsilon_on_its_own_generator(n_actions):
    schedule = LinearSchedule(1.0, 0.05, 950)
    seeds = [3, 1, 4, 1_000_003]
    ours = List([np.random.default_rng(s) for s in seeds])
    solo = [np.random.default_rng(s) for s in seeds]
    agent = _agent(n_actions)
    which = np.array([2, 0, 3], dtype=np.int64)  # a subset, out of order (a member left the cohort)
    steps = np.array([0, 500, 949], dtype=np.int64)
    epsilons, draws = np.empty(3), np.empty(3, dtype=np.int64)
    explored = 0
    for _ in range(400):
        explore.explore_kernel(ours, which, steps, schedule.start, schedule.end, schedule.duration, n_actions,
                               epsilons, draws)  # fmt: skip
        for k, i in enumerate(which):
            epsilon = schedule(int(steps[k]))
            assert epsilons[k] == epsilon
            action = agent.explore(epsilon, solo[i])  # (one agent, three generators in turn: each its own)
            assert draws[k] == (-1 if action is None else action)
            explored += action is not None
        steps += 1  # (past the schedule's end: ε stays at its end)
    for rng, own in zip(ours, solo, strict=True):
        assert rng.bit_generator.state == own.bit_generator.state
    assert 0 < explored < 1200  # (both branches taken)


def test_the_same_seed_or_a_restored_state_draws_the_same_actions():
    agent, other = _agent(5), _agent(5)
    rng = np.random.default_rng(7)
    first = [agent.explore(0.5, rng) for _ in range(300)]
    rng = np.random.default_rng(7)
    assert [other.explore(0.5, rng) for _ in range(300)] == first
    seeded_otherwise = np.random.default_rng(8)
    assert [other.explore(0.5, seeded_otherwise) for _ in range(300)] != first
    saved = rng.bit_generator.state  # a checkpoint: the generator's state, restored in place
    after = [agent.explore(0.5, rng) for _ in range(50)]
    rng.bit_generator.state = saved
    assert [agent.explore(0.5, rng) for _ in range(50)] == after


def test_switching_generators_keeps_each_ones_stream():
    """Training's generator and an evaluation's taken in turn (and a third): each draws its own stream, as if it
    were the only one."""
    agent = _agent(4)
    streams = [np.random.default_rng(s) for s in (11, 12, 13)]
    alone = []
    for seed in (11, 12, 13):
        rng, solo = np.random.default_rng(seed), _agent(4)
        alone.append([solo.explore(0.4, rng) for _ in range(80)])
    got: list[list] = [[], [], []]
    order = [0, 0, 1, 0, 1, 1, 2, 0, 2, 1] * 18
    for i in order:
        got[i].append(agent.explore(0.4, streams[i]))
    for i in range(3):
        assert got[i] == alone[i][: len(got[i])]


@pytest.mark.parametrize(("epsilon", "n_actions"), [(0.0, 3), (0.3, 4), (1.0, 6)])
def test_draws_are_epsilon_greedy(epsilon, n_actions):
    """Explore with probability ε, each action then equally likely (100,000 draws of one seed: within 5
    standard deviations of their expected counts)."""
    draw, n = explore.OneMember(np.random.default_rng(2024)), 100_000
    actions = np.array([draw(epsilon, n_actions) for _ in range(n)])
    explored = actions >= 0
    assert abs(explored.sum() - epsilon * n) <= 5 * np.sqrt(n * epsilon * (1 - epsilon))
    if epsilon > 0:
        counts = np.bincount(actions[explored], minlength=n_actions)
        assert len(counts) == n_actions
        p, m = 1 / n_actions, explored.sum()
        assert (np.abs(counts - m * p) <= 5 * np.sqrt(m * p * (1 - p))).all()
