"""The agent: its engine chosen once by ``make_agent``, the TD target by hand for a terminated and a truncated
transition, and the loop's storage of both."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from per_cli.config import AgentConfig, load_config
from per_cli.rl.agent import DQNAgent, TorchAgent
from per_cli.rl.engines import make_agent
from per_cli.rl.engines.numba_agent import NumbaAgent
from per_cli.rl.losses import td_targets
from per_cli.train.loop.trainer import build_member, run_member
from per_cli.train.loop.updates import CompiledUpdates, updates_for
from tests.rl.batches import batch as make_batch


def _batch(obs, actions, rewards, next_obs, terminated):
    return make_batch(np.asarray(obs, np.float32), actions, rewards, np.asarray(next_obs, np.float32), terminated)


def test_make_agent_builds_the_chosen_engines_agent_and_the_interface_is_not_an_agent():
    """The engine is chosen once, by the factory: each engine is its own class (no method asks which it is)."""
    cpu = torch.device("cpu")
    numba = make_agent(AgentConfig(hidden_sizes=[8]), (3,), 2, cpu)
    assert type(numba) is NumbaAgent and (numba.engine, numba.engine_note) == ("numba", None)
    fallback = make_agent(AgentConfig(hidden_sizes=[8], activation="tanh"), (3,), 2, cpu)
    assert type(fallback) is TorchAgent and fallback.engine == "torch" and "activation=tanh" in fallback.engine_note
    assert type(make_agent(AgentConfig(hidden_sizes=[8], engine="torch"), (3,), 2, cpu)) is TorchAgent
    with pytest.raises(TypeError, match="abstract"):
        DQNAgent(AgentConfig(), (3,), 2, cpu, numba.td_loss)


def test_a_cohorts_updates_are_chosen_once_from_the_engine_its_members_share():
    """updates_for reads the members' one engine (no member stands for the others) and refuses a mixture."""
    cpu = torch.device("cpu")
    members = [
        SimpleNamespace(agent=make_agent(AgentConfig(hidden_sizes=[8], engine=engine), (3,), 2, cpu))
        for engine in ("numba", "torch")
    ]
    with pytest.raises(ValueError, match=r"one engine, not \['numba', 'torch'\]"):
        updates_for(members)
    assert isinstance(updates_for(members[:1]), CompiledUpdates)


def test_td_target_formula():
    target = td_targets(torch.tensor([1.0, 1.0]), torch.tensor([1.0, 0.0]), torch.tensor([5.0, 5.0]), 0.9)
    assert target.tolist() == pytest.approx([1.0, 1.0 + 0.9 * 5.0])


@pytest.mark.parametrize("double_dqn", [False, True])
def test_terminated_does_not_bootstrap_and_truncated_does(double_dqn):
    torch.manual_seed(0)
    agent = make_agent(AgentConfig(hidden_sizes=[8], gamma=0.9, double_dqn=double_dqn), (3,), 2, torch.device("cpu"))
    with torch.no_grad():  # make the target net differ from the online net, so double DQN matters
        for p in agent.target_net.parameters():
            p.add_(0.3)
    obs = [[0.1, 0.2, 0.3], [0.3, -0.2, 0.5]]
    next_obs = [[1.0, -1.0, 0.5], [0.4, 0.4, -0.4]]
    # row 0 terminated, row 1 truncated by a time limit: the stored flag is terminated only
    batch = _batch(obs, [0, 1], [1.0, 2.0], next_obs, [1.0, 0.0])
    with torch.no_grad():
        q = agent.q_net(torch.tensor(obs)).numpy()
        q_next_target = agent.target_net(torch.tensor(next_obs)).numpy()
        q_next_online = agent.q_net(torch.tensor(next_obs)).numpy()
    a1 = int(q_next_online[1].argmax()) if double_dqn else int(q_next_target[1].argmax())
    expected = np.array([1.0 - q[0, 0], 2.0 + 0.9 * q_next_target[1, a1] - q[1, 1]])
    np.testing.assert_allclose(agent.td_errors(batch), expected, rtol=1e-5, atol=1e-6)


def test_loop_stores_truncation_as_not_terminated_with_the_real_last_observation(tmp_path):
    cfg = load_config(
        None,
        [
            "env.max_episode_steps=5",
            "train.total_steps=5",
            "train.eval_episodes=0",
            "replay.capacity=16",
            "replay.batch_size=4",
            "train.learning_starts=100",
        ],
    )
    member = build_member(cfg, device="cpu")
    run_member(member, tmp_path / "run")
    storage = member.memory.storage
    assert storage.size == 5
    assert storage.truncated[4] and storage.terminated[4] == 0.0
    # the stored next observation of the truncated step is the episode's last one, not the reset one
    np.testing.assert_array_equal(storage.obs[1:5], storage.next_obs[0:4])
    reset_obs, _ = member.env.reset(seed=cfg.seed)
    assert not np.array_equal(storage.next_obs[4], reset_obs)


def test_terminated_transitions_are_stored_as_terminal(tmp_path):
    cfg = load_config(
        None,
        [
            "train.total_steps=200",
            "train.eval_episodes=0",
            "replay.capacity=256",
            "replay.batch_size=4",
            "train.learning_starts=1000",
        ],
    )
    member = build_member(cfg, device="cpu")
    run_member(member, tmp_path / "run")
    s = member.memory.storage
    n_term = int(s.terminated[: s.size].sum())
    assert n_term == member.state.episode > 0  # CartPole episodes of random play end by termination


def test_rmsprop_is_the_minatar_papers_and_learns():
    """agent.optimizer=rmsprop: torch's centered RMSprop with the MinAtar paper's alpha 0.95 and eps 0.01."""
    torch.manual_seed(0)
    cfg = AgentConfig(optimizer="rmsprop", lr=2.5e-4, hidden_sizes=[16], engine="auto")
    agent = make_agent(cfg, (3,), 2, torch.device("cpu"))
    assert agent.engine == "torch" and "agent.optimizer=rmsprop" in agent.engine_note
    assert isinstance(agent.optimizer, torch.optim.RMSprop)
    group = agent.optimizer.param_groups[0]
    assert (group["lr"], group["alpha"], group["eps"], group["centered"], group["momentum"]) == (
        2.5e-4,
        0.95,
        0.01,
        True,
        0,
    )
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(32, 3)).astype(np.float32)
    b = _batch(obs, rng.integers(2, size=32), np.ones(32), obs[::-1].copy(), np.ones(32))  # targets: r = 1
    before = np.abs(agent.td_errors(b)).mean()
    for _ in range(50):
        agent.learn(b)
    assert np.abs(agent.td_errors(b)).mean() < before
