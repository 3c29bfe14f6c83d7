"""Q-networks: the MinAtar paper's network, which network ``auto`` picks, and the config check that rejects a
network that cannot take the env's observations (before any run starts)."""

import gymnasium as gym
import minatar.gym
import numpy as np
import pytest
import torch
from torch import nn

from per_cli.config import AgentConfig
from per_cli.errors import ConfigError
from per_cli.rl.engines import make_agent
from per_cli.rl.networks import MinAtarQNetwork, MLPQNetwork, NatureCNN, check_network, make_q_network
from tests.rl.batches import batch

minatar.gym.register_envs()


def minatar_observations(game: str, n: int) -> tuple[np.ndarray, int]:
    """n real observations of a MinAtar game under random play, and its number of actions."""
    env = gym.make(f"MinAtar/{game}-v1")
    obs, _ = env.reset(seed=0)
    out = []
    for _ in range(n):
        out.append(obs)
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            obs, _ = env.reset()
    return np.stack(out), int(env.action_space.n)


def test_minatar_network_is_the_papers():
    net = MinAtarQNetwork((10, 10, 4), n_actions=3)
    conv = net.conv
    assert (conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride) == (4, 16, (3, 3), (1, 1))
    linears = [m for m in net.modules() if isinstance(m, nn.Linear)]
    assert [(lin.in_features, lin.out_features) for lin in linears] == [(16 * 8 * 8, 128), (128, 3)]
    assert sum(isinstance(m, nn.ReLU) for m in net.modules()) == 1  # plus the ReLU after the conv, in forward


@pytest.mark.parametrize("game", ["Breakout", "Seaquest"])
def test_minatar_network_takes_channels_last_bool_and_uint8(game):
    obs, n_actions = minatar_observations(game, 8)
    assert obs.dtype == np.bool_ and obs.shape[1:3] == (10, 10)
    torch.manual_seed(0)
    net = make_q_network("auto", obs.shape[1:], n_actions, [64])
    assert isinstance(net, MinAtarQNetwork)
    q_bool = net(torch.as_tensor(obs))
    q_uint8 = net(torch.as_tensor(obs.astype(np.uint8)))
    assert q_bool.shape == (8, n_actions)
    torch.testing.assert_close(q_bool, q_uint8, rtol=0, atol=0)
    # channels last: the same as a conv over the NCHW permutation, computed by hand
    x = torch.as_tensor(obs).permute(0, 3, 1, 2).float()
    expected = net.head(torch.relu(net.conv(x)).flatten(1))
    torch.testing.assert_close(q_bool, expected)


def test_dqn_agent_learns_on_minatar_observations():
    obs, n_actions = minatar_observations("Breakout", 33)
    torch.manual_seed(0)
    agent = make_agent(AgentConfig(network="minatar", engine="auto"), obs.shape[1:], n_actions, torch.device("cpu"))
    assert agent.engine == "torch"
    b = batch(obs[:-1].astype(np.uint8), np.arange(32) % n_actions, np.ones(32), obs[1:].astype(np.uint8), np.zeros(32))
    before = agent.td_errors(b)
    for _ in range(20):
        agent.learn(b)
    after = agent.td_errors(b)
    assert np.abs(after).mean() < np.abs(before).mean()
    assert agent.greedy_action(obs[0]) in range(n_actions)


@pytest.mark.parametrize(
    "shape, network",
    [((4,), "mlp"), ((4, 84, 84), "cnn"), ((10, 10, 4), "minatar"), ((10, 10, 10), "minatar"), ((2, 3), "mlp")],
)
def test_auto_picks_the_network_by_observation_shape(shape, network):
    kinds = {"mlp": MLPQNetwork, "cnn": NatureCNN, "minatar": MinAtarQNetwork}
    check_network(AgentConfig(network="auto"), shape)
    assert isinstance(make_q_network("auto", shape, 2, [8]), kinds[network])


@pytest.mark.parametrize(
    "network, shape", [("cnn", (4,)), ("cnn", (10, 10, 4)), ("minatar", (4,)), ("minatar", (4, 84)), ("cnn", (2, 3))]
)
def test_a_network_that_does_not_fit_is_a_config_error(network, shape):
    with pytest.raises(ConfigError, match=r"^agent\.network: .*use agent\.network=auto") as err:
        check_network(AgentConfig(network=network), shape)
    assert "\n" not in str(err.value) and str(shape) in str(err.value)
    with pytest.raises(ConfigError, match=r"^agent\.network"):  # the agent refuses it the same way
        make_agent(AgentConfig(network=network), shape, 2, torch.device("cpu"))


@pytest.mark.parametrize("network, shape", [("mlp", (4,)), ("mlp", (10, 10, 4)), ("cnn", (4, 84, 84))])
def test_a_network_that_fits_passes_the_check(network, shape):
    assert check_network(AgentConfig(network=network), shape) is None
