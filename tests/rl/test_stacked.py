"""The stacked torch update (per_cli/rl/engines/stacked.py) against each member's own torch update.

S = 3 members with different weights (different seeds, targets apart from the online nets) and different
batches. One stacked call must give every member what its own ``DQNAgent.learn`` gives: weights, optimizer
state (Adam's or centered RMSProp's moments and step counts), TD errors, loss and mean Q. The tolerance is float32
rounding (``TOL``), not bit equality: under ``vmap`` the matmuls and convolutions run batched (bmm, a grouped
convolution), which may sum in another order than a member's own mm/conv. Measured here (torch 2.13, CPU): the
MLP updates come out bit-identical; the MinAtar CNN's weights and TD errors differ by about one ulp (relative
6e-8 to 1e-7), the grouped convolution's doing. The update and acting tests also run on CUDA where there is a
device (a lent GPU machine: docs/results/pong/gpu.sh runs them), with TF32 off: TF32 rounds the members' own and
the stacked matmuls and convolutions differently, a precision setting, not the arithmetic under test.
"""

from __future__ import annotations

import copy
import io
from typing import NamedTuple

import numpy as np
import pytest
import torch

from per_cli.config import AgentConfig
from per_cli.rl.agent import DQNAgent
from per_cli.rl.engines import make_agent
from per_cli.rl.engines.stacked import CPU_MIN_MEMBERS, StackedEngine, stacked_misfit, stacked_refusal
from per_cli.rl.losses import TDLoss
from per_cli.rl.results import UpdateResults
from tests.rl.batches import batch as make_batch

TOL = {"rtol": 2e-5, "atol": 1e-6}
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
DEVICES = ["cpu", pytest.param("cuda", marks=cuda)]


@pytest.fixture
def exact_cuda():
    """TF32 off for the test (torch's defaults put back after)."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved
MLP = ((4,), 2, 64)  # the seed notebook's CartPole network: 4-128-2, batch 64
MINATAR = ((10, 10, 4), 3, 8)  # MinAtar Breakout's grids, a small batch
CASES = {
    "mlp-adam-huber": (AgentConfig(hidden_sizes=[128], engine="torch", max_grad_norm=1.0), MLP),
    "mlp-adam-double-mse": (
        AgentConfig(hidden_sizes=[128], engine="torch", double_dqn=True, loss="mse", max_grad_norm=1.0),
        MLP,
    ),
    "minatar-rmsprop": (AgentConfig(network="minatar", optimizer="rmsprop", lr=2.5e-4, engine="torch"), MINATAR),
}


def make_agents(
    cfg: AgentConfig, obs_shape, n_actions: int, size: int = 3, td_loss=None, device: str = "cpu"
) -> list[DQNAgent]:
    """``size`` members of ``cfg`` on ``device`` (on CUDA without the CUDA graph: the stacked path refuses its
    capturable optimizers)."""
    cfg = AgentConfig(**{**cfg.__dict__, "cuda_graph": False}) if device == "cuda" else cfg
    agents = []
    for seed in range(size):
        torch.manual_seed(seed)
        agent = make_agent(cfg, obs_shape, n_actions, torch.device(device), td_loss)
        with torch.no_grad():  # targets apart from the online nets, so the target and double DQN matter
            for p in agent.target_net.parameters():
                p.add_(0.02 * torch.randn_like(p))
        agents.append(agent)
    return agents


def make_batches(rng: np.random.Generator, obs_shape, n_actions: int, size: int, n: int = 3, reward_scale=None):
    """``n`` batches; terminated and bootstrapping samples, non-uniform IS weights; MinAtar grids as 0/1 bools."""
    scales = reward_scale or [3.0] * n
    batches = []
    for scale in scales:
        if len(obs_shape) == 3:
            obs, next_obs = (rng.random((size, *obs_shape)) < 0.2 for _ in range(2))
        else:
            obs, next_obs = (rng.normal(size=(size, *obs_shape)).astype(np.float32) for _ in range(2))
        terminated = (np.arange(size) < size // 4).astype(np.float32)
        rewards = (scale * rng.normal(size=size)).astype(np.float32)
        weights = rng.uniform(0.1, 1.0, size=size).astype(np.float32)
        batches.append(make_batch(obs, rng.integers(n_actions, size=size), rewards, next_obs, terminated, weights))
    return batches


def assert_same_member(stacked: DQNAgent, own: DQNAgent) -> None:
    for a, b in zip(stacked.q_net.parameters(), own.q_net.parameters(), strict=True):
        np.testing.assert_allclose(a.detach().cpu().numpy(), b.detach().cpu().numpy(), **TOL)
    states = stacked.optimizer.state_dict()["state"], own.optimizer.state_dict()["state"]
    assert states[0].keys() == states[1].keys()
    for j in states[1]:
        assert states[0][j].keys() == states[1][j].keys()
        for key, value in states[1][j].items():
            got, want = states[0][j][key].cpu().numpy(), value.cpu().numpy()
            np.testing.assert_allclose(got, want, rtol=TOL["rtol"], atol=1e-9)
    assert stacked.updates == own.updates


def assert_same_result(got, want) -> None:
    got, want = (r.member(0) if isinstance(r, UpdateResults) else r for r in (got, want))
    scale = float(np.abs(want.td_errors).max())
    np.testing.assert_allclose(got.td_errors, want.td_errors, rtol=TOL["rtol"], atol=TOL["rtol"] * scale)
    assert got.loss == pytest.approx(want.loss, rel=TOL["rtol"])
    assert got.q_mean == pytest.approx(want.q_mean, rel=TOL["rtol"], abs=TOL["atol"])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", list(CASES))
def test_a_stacked_update_is_each_members_own_update(case, device, exact_cuda):
    cfg, (obs_shape, n_actions, batch_size) = CASES[case]
    agents = make_agents(cfg, obs_shape, n_actions, device=device)
    own = [copy.deepcopy(a) for a in agents]  # before the engine makes the members views of shared storage
    engine = StackedEngine(agents)
    rng = np.random.default_rng(1)
    for _ in range(2):  # the second update starts from optimizer state the first one wrote
        batches = make_batches(rng, obs_shape, n_actions, batch_size)
        results = engine.learn([0, 1, 2], batches).members()
        for agent, mine, batch, result in zip(agents, own, batches, results, strict=True):
            assert_same_result(result, mine.learn(batch))
            assert_same_member(agent, mine)


def test_fused_adam_members_stack_as_their_own_updates():
    """Members whose Adam is torch's fused kernel (a CUDA agent's: ``make_optimizer``; here on the CPU, which has
    one too) update stacked as their own fused steps do, their step counts kept where the fused optimizer keeps
    them, the second update starting from the state the first wrote; a subset's step keeps them there too."""
    cfg, (obs_shape, n_actions, batch_size) = CASES["mlp-adam-huber"]
    agents = make_agents(cfg, obs_shape, n_actions)
    for agent in agents:
        agent.optimizer = torch.optim.Adam(agent.q_net.parameters(), lr=cfg.lr, eps=cfg.adam_eps, fused=True)
    own = [copy.deepcopy(a) for a in agents]
    engine = StackedEngine(agents)
    rng = np.random.default_rng(7)
    for which in ([0, 1, 2], [0, 1, 2], [2, 0]):
        batches = make_batches(rng, obs_shape, n_actions, batch_size)
        results = engine.learn(which, [batches[i] for i in which]).members()
        for k, i in enumerate(which):
            assert_same_result(results[k], own[i].learn(batches[i]))
            assert_same_member(agents[i], own[i])
    assert [a.optimizer.state_dict()["state"][0]["step"].item() for a in agents] == [3.0, 2.0, 3.0]


KIND_LOSSES = [TDLoss("lap", 1.0, 0.6), TDLoss("pal", 1.0, 0.6), TDLoss("pal", 0.01, 0.4)]


@pytest.mark.parametrize("td_loss", KIND_LOSSES, ids=str)
@pytest.mark.parametrize("case", ["mlp-adam-huber", "mlp-adam-double-mse"])
def test_lap_and_pal_stacked_updates_are_each_members_own(case, td_loss):
    """The replay kinds' own losses, by the same function as a member's own ``learn``; the members' batches come
    at reward scales 0.3, 3 and 30, so their PAL λ differ (one λ over the stacked batches would not be any
    member's)."""
    cfg, (obs_shape, n_actions, batch_size) = CASES[case]
    agents = make_agents(cfg, obs_shape, n_actions, td_loss=td_loss)
    own = [copy.deepcopy(a) for a in agents]
    engine = StackedEngine(agents)
    rng = np.random.default_rng(5)
    for _ in range(2):
        batches = make_batches(rng, obs_shape, n_actions, batch_size, reward_scale=[0.3, 3.0, 30.0])
        results = engine.learn([0, 1, 2], batches).members()
        for agent, mine, batch, result in zip(agents, own, batches, results, strict=True):
            assert_same_result(result, mine.learn(batch))
            assert_same_member(agent, mine)


class Stacked(NamedTuple):
    """Batches as a gather hands them (each field stacked over the members)."""

    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    next_obs: np.ndarray
    terminated: np.ndarray


def _stacked(batches) -> Stacked:
    return Stacked(*(np.stack([getattr(b, f) for b in batches]) for f in Stacked._fields))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", list(CASES))
def test_stacked_acting_td_errors_and_scores_are_each_members_own(case, device, exact_cuda):
    """Members 2 and 0 (of 3; member 1 left) act greedily, score their batches and give their newest transitions'
    δ in one batched call each, as each member's own ``greedy_action``, ``score`` and ``td_errors`` (the actions
    exactly: these random networks have no ties; the values to float32 rounding), after an update moved them."""
    cfg, (obs_shape, n_actions, batch_size) = CASES[case]
    agents = make_agents(cfg, obs_shape, n_actions, device=device)
    engine = StackedEngine(agents)
    rng = np.random.default_rng(6)
    engine.learn([0, 1, 2], make_batches(rng, obs_shape, n_actions, batch_size))
    which = [2, 0]
    batches = make_batches(rng, obs_shape, n_actions, batch_size, n=2)
    observations = np.stack([b.obs for b in batches])  # (2, B, ...): B states per member
    actions = [engine.greedy(which, observations[:, j]) for j in range(batch_size)]
    own_actions = [[agents[i].greedy_action(observations[k, j]) for k, i in enumerate(which)]
                   for j in range(batch_size)]  # fmt: skip
    assert actions == own_actions and len({a for row in actions for a in row}) > 1
    td, scores = engine.td_errors(which, _stacked(batches)), engine.score(which, _stacked(batches))
    assert td.shape == scores.td.shape == (2, batch_size)
    for k, i in enumerate(which):
        own_td, own_scores = agents[i].td_errors(batches[k]), agents[i].score(batches[k])
        np.testing.assert_allclose(td[k], own_td, rtol=TOL["rtol"], atol=TOL["rtol"] * float(np.abs(own_td).max()))
        for field in own_scores._fields:
            want = getattr(own_scores, field)[0]
            got = getattr(scores, field)[k]
            np.testing.assert_allclose(got, want, rtol=TOL["rtol"], atol=TOL["rtol"] * float(np.abs(want).max()))


def test_clipping_is_per_member():
    """Member 1's rewards are huge, so its gradient norm is far past max_grad_norm and it is clipped; members 0
    and 2 stay under it, so their updates are those of an unclipped update (one norm over the cohort would have
    shrunk them too)."""
    cfg, (obs_shape, n_actions, batch_size) = CASES["mlp-adam-huber"]
    cfg = AgentConfig(**{**cfg.__dict__, "max_grad_norm": 50.0, "loss": "mse"})
    batches = make_batches(np.random.default_rng(2), obs_shape, n_actions, batch_size, reward_scale=[0.1, 1e4, 0.1])
    runs = {}
    for clip in (50.0, None):
        agents = make_agents(AgentConfig(**{**cfg.__dict__, "max_grad_norm": clip}), obs_shape, n_actions)
        StackedEngine(agents).learn([0, 1, 2], batches)
        runs[clip] = [a.optimizer.state_dict()["state"][0]["exp_avg"] for a in agents]  # (1 - β1) × the gradient
    norms = [float(torch.linalg.vector_norm(m)) / 0.1 for m in runs[None]]  # a member's first-layer gradient norm
    assert norms[1] > 10 * 50.0 and max(norms[0], norms[2]) < 50.0  # (a lower bound of its whole gradient's norm)
    torch.testing.assert_close(runs[50.0][0], runs[None][0], rtol=0, atol=0)
    torch.testing.assert_close(runs[50.0][2], runs[None][2], rtol=0, atol=0)
    assert float(torch.linalg.vector_norm(runs[50.0][1])) < 0.1 * 50.0 * 1.0001


def test_a_subset_of_members_updates_only_those():
    cfg, (obs_shape, n_actions, batch_size) = CASES["mlp-adam-double-mse"]
    agents = make_agents(cfg, obs_shape, n_actions)
    own = [copy.deepcopy(a) for a in agents]
    engine = StackedEngine(agents)
    rng = np.random.default_rng(3)
    batches = make_batches(rng, obs_shape, n_actions, batch_size)
    untouched = copy.deepcopy(agents[1].state_dict())
    # member 1 has left (or does not train this step)
    results = engine.learn([2, 0], [batches[2], batches[0]]).members()
    for k, i in enumerate((2, 0)):
        assert_same_result(results[k], own[i].learn(batches[i]))
        assert_same_member(agents[i], own[i])
    after = agents[1].state_dict()
    for a, b in zip(after["q_net"].values(), untouched["q_net"].values(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    torch.testing.assert_close(after["optimizer"]["state"], untouched["optimizer"]["state"], rtol=0, atol=0)
    assert agents[1].updates == 0
    # the members' step counts now differ (1, 0, 1): one call steps them in two groups
    batches = make_batches(rng, obs_shape, n_actions, batch_size)
    results = engine.learn([0, 1, 2], batches).members()
    for agent, mine, batch, result in zip(agents, own, batches, results, strict=True):
        assert_same_result(result, mine.learn(batch))
        assert_same_member(agent, mine)


def test_members_stay_their_own_agents():
    """After stacking, a member's own learn, target sync and checkpoint work on the numbers the stacked update
    wrote, and a checkpoint holds that member's tensors only."""
    cfg, (obs_shape, n_actions, batch_size) = CASES["mlp-adam-huber"]
    agents = make_agents(cfg, obs_shape, n_actions)
    own = [copy.deepcopy(a) for a in agents]
    engine = StackedEngine(agents)
    rng = np.random.default_rng(4)
    for step in range(3):
        batches = make_batches(rng, obs_shape, n_actions, batch_size)
        if step == 1:  # member 0 learns on its own in between
            assert_same_result(agents[0].learn(batches[0]), own[0].learn(batches[0]))
            agents[0].sync_target()
            own[0].sync_target()
        else:
            for mine, batch, result in zip(own, batches, engine.learn([0, 1, 2], batches).members(), strict=True):
                assert_same_result(result, mine.learn(batch))
    for agent, mine in zip(agents, own, strict=True):
        assert_same_member(agent, mine)
    sizes = []
    for agent in (agents[0], own[0]):
        buffer = io.BytesIO()
        torch.save(agent.state_dict(), buffer)
        sizes.append(buffer.tell())
    assert sizes[0] < 1.05 * sizes[1]  # not the three members' shared storage


def test_what_the_stacked_path_refuses():
    cfg, (obs_shape, n_actions, _) = CASES["mlp-adam-huber"]
    assert stacked_refusal(make_agents(cfg, obs_shape, n_actions, CPU_MIN_MEMBERS)) is None
    assert stacked_misfit(make_agents(cfg, obs_shape, n_actions, CPU_MIN_MEMBERS - 1)) is None
    assert "slower than one per member" in stacked_refusal(make_agents(cfg, obs_shape, n_actions, CPU_MIN_MEMBERS - 1))
    sgd = make_agents(cfg, obs_shape, n_actions)
    sgd[2].optimizer = torch.optim.SGD(sgd[2].q_net.parameters(), lr=0.1)
    assert "Adam and RMSprop, not SGD" in stacked_misfit(sgd)
    mixed = [*make_agents(cfg, obs_shape, n_actions, 1), *make_agents(AgentConfig(hidden_sizes=[128]), (4,), 2, 1)]
    assert "engine is numba" in stacked_misfit(mixed)
    other_lr = AgentConfig(**{**cfg.__dict__, "lr": 0.1})
    assert "settings" in stacked_misfit([*make_agents(cfg, (4,), 2, 1), *make_agents(other_lr, (4,), 2, 1)])
    pals = [*make_agents(cfg, (4,), 2, 1, TDLoss("pal", 0.01)), *make_agents(cfg, (4,), 2, 1, TDLoss("pal", 0.1))]
    assert "losses" in stacked_misfit(pals)
    with pytest.raises(ValueError, match="cannot run these members"):
        StackedEngine(sgd)
    minatar_cfg, (minatar_shape, minatar_actions, _) = CASES["minatar-rmsprop"]
    assert stacked_misfit(make_agents(minatar_cfg, minatar_shape, minatar_actions, 2)) is None
    assert "parameters per member" in stacked_refusal(make_agents(minatar_cfg, minatar_shape, minatar_actions, 4))
    assert "single member" in stacked_refusal(make_agents(cfg, obs_shape, n_actions, 1))
