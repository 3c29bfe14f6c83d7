"""An engine's ``score``: the networks' opinion of a batch without an update (δ, the online and the target network's
per-sample losses against one TD target), against a hand computation in torch, and the numba engine against it."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from per_cli.rl.engines.cohort import CohortEngine
from per_cli.rl.losses import TDLoss
from tests.rl.test_engines import LOSSES, TOL, make_agent, make_batch


def hand_loss(d: torch.Tensor, loss: TDLoss) -> torch.Tensor:
    """Each sample's loss of d = Q − target, written out (κ, α: LAP's and PAL's)."""
    size, k, a = d.abs(), loss.kappa, loss.alpha
    if loss.name == "huber":
        return torch.where(size < 1.0, 0.5 * d * d, size - 0.5)
    if loss.name == "mse":
        return d * d
    if loss.name == "lap":
        return torch.where(size < k, 0.5 * d * d, k * size)
    return torch.where(size < k, k**a * 0.5 * d * d, k / (1 + a) * size ** (1 + a))


def hand_scores(agent, batch, double_dqn: bool) -> tuple[np.ndarray, ...]:
    """(δ, online loss, target loss) by hand in float64 from the agent's networks."""
    with torch.no_grad():
        # (the layers themselves: the module casts its input to float32)
        online, target_net = (copy.deepcopy(net.net).double() for net in (agent.q_net, agent.target_net))
        obs, next_obs = (torch.tensor(a, dtype=torch.float64) for a in (batch.obs, batch.next_obs))
        actions = torch.tensor(batch.actions)
        rows = torch.arange(len(actions))
        next_target = target_net(next_obs)
        best = online(next_obs).argmax(dim=1) if double_dqn else next_target.argmax(dim=1)
        bootstrap = next_target[rows, best]
        y = torch.tensor(batch.rewards, dtype=torch.float64)
        y = y + agent.cfg.gamma * (1.0 - torch.tensor(batch.terminated, dtype=torch.float64)) * bootstrap
        q, q_target = online(obs)[rows, actions], target_net(obs)[rows, actions]
        out = (y - q, hand_loss(q - y, agent.td_loss), hand_loss(q_target - y, agent.td_loss))
    return tuple(t.numpy() for t in out)


@pytest.mark.parametrize("double_dqn", [False, True])
@pytest.mark.parametrize("loss", LOSSES, ids=str)
def test_score_is_the_hand_computation_in_both_engines_and_learns_nothing(loss, double_dqn):
    rng = np.random.default_rng(3)
    for engine in ("torch", "numba"):
        agent = make_agent(engine, td_loss=loss, double_dqn=double_dqn)
        for _ in range(2):  # the online network moves away from the target network
            agent.learn(make_batch(rng))
        batch = make_batch(rng, weighted=True)  # (the IS weights do not enter a score)
        before = [p.detach().clone() for p in (*agent.q_net.parameters(), *agent.target_net.parameters())]
        scores = agent.score(batch)
        want = hand_scores(agent, batch, double_dqn)
        assert all(a.shape == (1, len(batch.actions)) for a in scores)
        for got, expected in zip(scores, want, strict=True):
            np.testing.assert_allclose(got[0], expected, rtol=2e-5, atol=2e-5)
        assert not np.allclose(scores.loss, scores.target_loss)  # the two networks' opinions differ
        after = [*agent.q_net.parameters(), *agent.target_net.parameters()]
        assert all(torch.equal(a, b) for a, b in zip(before, after, strict=True))


def test_a_cohort_score_is_each_members_own():
    agents = [make_agent("numba", seed=s, td_loss=TDLoss("pal", 1.0, 0.6)) for s in range(3)]
    cohort = CohortEngine([a.numba_engine for a in agents])
    rng = np.random.default_rng(5)
    batches = [make_batch(rng) for _ in range(2)]
    fields = ("obs", "actions", "rewards", "next_obs", "terminated")
    arrays = [np.stack([getattr(b, f) for b in batches]) for f in fields]
    scores = cohort.score([2, 0], *arrays)
    for k, i in enumerate((2, 0)):
        b = batches[k]
        own = agents[i].numba_engine.score(b.obs, b.actions, b.rewards, b.next_obs, b.terminated)
        for got, mine in zip(scores, own, strict=True):
            assert got[k].tobytes() == mine[0].tobytes()
    torch_agent = make_agent("torch", seed=2, td_loss=TDLoss("pal", 1.0, 0.6))
    for got, want in zip(scores, torch_agent.score(batches[0]), strict=True):
        np.testing.assert_allclose(got[0], want[0], **TOL)
