"""The torch engine's greedy action (per_cli/rl/acting.py) and its update results (DeferredResult): the same values
as the plain torch expressions, without the copies those made.

The staged (pinned buffer) and graphed greedy actions need CUDA: they run on a lent GPU machine
(docs/results/pong/gpu.sh) and are skipped elsewhere.
"""

import numpy as np
import pytest
import torch

from per_cli.config import AgentConfig
from per_cli.rl.acting import GreedyAction
from per_cli.rl.agent import DeferredResult
from per_cli.rl.engines import make_agent
from tests.rl.batches import batch as make_batch

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
NETWORKS = {  # network: (observation shape, dtype, actions)
    "mlp": ((4,), np.float32, 2),
    "minatar": ((10, 10, 4), np.bool_, 3),
    "cnn": ((4, 84, 84), np.uint8, 6),
}


def _observations(shape, dtype, n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return [rng.random(shape) < 0.3 for _ in range(n)]
    if dtype == np.uint8:
        return [rng.integers(0, 256, shape, dtype=np.uint8) for _ in range(n)]
    return [rng.normal(size=shape).astype(dtype) for _ in range(n)]


def _agent(network: str, device: str = "cpu", **cfg):
    shape, _, n_actions = NETWORKS[network]
    torch.manual_seed(0)
    return make_agent(AgentConfig(network=network, engine="torch", hidden_sizes=[32], **cfg), shape, n_actions,
                      torch.device(device))  # fmt: skip


@torch.inference_mode()
def _reference(q_net, obs: np.ndarray, device: str) -> int:
    """The greedy action as the agent took it before GreedyAction: the observation moved whole, argmax over dim 1."""
    return int(q_net(torch.as_tensor(obs, device=device).unsqueeze(0)).argmax(dim=1).item())


@pytest.mark.parametrize("network", list(NETWORKS))
def test_greedy_action_is_the_online_networks_argmax_after_each_update(network):
    agent = _agent(network)
    shape, dtype, n_actions = NETWORKS[network]
    obs = _observations(shape, dtype, 6)
    for _ in range(3):
        assert [agent.greedy_action(o) for o in obs] == [_reference(agent.q_net, o, "cpu") for o in obs]
        batch = make_batch(np.stack(obs), np.arange(6) % n_actions, np.ones(6), np.stack(obs[::-1]), np.zeros(6))
        agent.learn(batch)  # (the next actions must see this update)


def test_greedy_action_takes_the_first_of_tied_maxima_and_reads_a_non_contiguous_observation():
    agent = _agent("mlp")
    with torch.no_grad():
        for p in agent.q_net.net[-1].parameters():
            p.zero_()  # every action's Q is 0
    assert agent.greedy_action(np.ones(4, np.float32)) == 0
    net = _agent("mlp").q_net
    wide = np.arange(8, dtype=np.float32)[::2]  # (a strided view, as a row of a held array may be)
    assert GreedyAction(net, torch.device("cpu"))(wide) == _reference(net, wide, "cpu")


@cuda
@pytest.mark.parametrize("graphed", [False, True])
@pytest.mark.parametrize("network", list(NETWORKS))
def test_staged_greedy_action_on_cuda_equals_the_plain_copy_and_reuses_its_buffers(network, graphed):
    """As the Pong run acts: each action read after an update was queued (and, graphed, replayed as a CUDA graph
    after three eager calls), equal to the plain forward of the network as it is after that update."""
    agent = _agent(network, "cuda", cuda_graph=graphed)
    shape, dtype, n_actions = NETWORKS[network]
    obs = _observations(shape, dtype, 6)
    staged = agent._greedy
    for _ in range(3):
        assert [agent.greedy_action(o) for o in obs] == [_reference(agent.q_net, o, "cuda") for o in obs]
        batch = make_batch(np.stack(obs), np.arange(6) % n_actions, np.ones(6), np.stack(obs[::-1]), np.zeros(6))
        agent.learn(batch, wait=False)  # (queued: the next action waits for it on the device, not on the host)
    assert staged.captured == graphed
    buffers = staged._pinned.data_ptr(), None if graphed else staged._input.data_ptr()
    agent.greedy_action(obs[0])
    assert (staged._pinned.data_ptr(), None if graphed else staged._input.data_ptr()) == buffers
    assert staged._pinned.is_pinned()


def _prefer(q_net, action: int) -> None:
    """Make ``action`` the greedy one in every state: its output bias far above the others'."""
    last = [m for m in q_net.modules() if isinstance(m, torch.nn.Linear)][-1]
    with torch.no_grad():
        last.bias.zero_()
        last.bias[action] = 1e4


@cuda
def test_graphed_greedy_action_reads_the_network_a_checkpoint_loaded():
    """A load writes the parameters in place and the graph is captured again: the actions are the loaded
    network's, not those of the one the graph was first captured over."""
    agent, loaded = _agent("cnn", "cuda"), _agent("cnn", "cuda")
    shape, dtype, _ = NETWORKS["cnn"]
    obs = _observations(shape, dtype, 5)
    _prefer(agent.q_net, 1)
    assert [agent.greedy_action(o) for o in obs] == [1] * 5 and agent._greedy.captured
    _prefer(loaded.q_net, 4)
    agent.load_state_dict(loaded.state_dict())
    assert [agent.greedy_action(o) for o in obs] == [4] * 5 and agent._greedy.captured


def test_deferred_result_on_a_cpu_is_the_updates_own_values_without_a_copy():
    td, losses = torch.tensor([0.5, -1.25, 3.0]), torch.tensor([0.125, 0.78125, 2.5])
    loss, q_mean = torch.tensor(1.1), torch.tensor(-0.3)  # (float32: 1.1 and -0.3 are not exact)
    got = DeferredResult(td, losses, loss, q_mean).wait()
    assert got.td.shape == got.losses.shape == (1, 3) and got.td.dtype == got.losses.dtype == np.float32
    assert got.td.tolist() == [td.tolist()] and got.losses.tolist() == [losses.tolist()]
    assert got.loss.dtype == got.q_mean.dtype == np.float64
    assert got.loss.tolist() == [float(loss)] and got.q_mean.tolist() == [float(q_mean)]  # (float32 widened exactly)
    assert np.shares_memory(got.td, td.numpy()) and np.shares_memory(got.losses, losses.numpy())
