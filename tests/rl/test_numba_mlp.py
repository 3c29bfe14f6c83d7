"""The numba update engine against torch autograd + torch.optim.Adam + clip_grad_norm_ (the torch engine).

From identical initial weights and the same batches, consecutive updates of both engines must agree on the
weights, the TD errors, the loss and the mean Q to float32 rounding.
"""

import io

import numpy as np
import pytest
import torch

from per_cli.config import AgentConfig, ConfigError
from per_cli.replay import Batch
from per_cli.rl.agent import DQNAgent, resolve_engine
from per_cli.rl.engines.numba_mlp import shares_memory
from per_cli.rl.networks import NatureCNN

OBS_DIM, N_ACTIONS, BATCH = 5, 3, 32
TOL = {"rtol": 1e-5, "atol": 1e-5}


def make_agent(engine: str, seed: int = 0, **kw) -> DQNAgent:
    torch.manual_seed(seed)
    cfg = AgentConfig(**{"hidden_sizes": [16], "lr": 3e-3, "gamma": 0.9, **kw, "engine": engine})
    agent = DQNAgent(cfg, (OBS_DIM,), N_ACTIONS, torch.device("cpu"))
    with torch.no_grad():  # a target net that differs from the online net, so double DQN and sync matter
        for i, p in enumerate(agent.target_net.parameters()):
            p.add_(0.05 * (i + 1))
    return agent


def make_batch(rng: np.random.Generator, reward_scale: float = 3.0) -> Batch:
    """Terminated samples (no bootstrap) and truncated ones (stored as not terminated, real next obs),
    non-uniform IS weights, rewards large enough that some Huber errors are past the quadratic zone."""
    terminated = np.zeros(BATCH, np.float32)
    terminated[: BATCH // 4] = 1.0  # the first quarter ended by termination; the rest (incl. truncations) bootstrap
    return Batch(
        obs=rng.normal(size=(BATCH, OBS_DIM)).astype(np.float32),
        actions=rng.integers(N_ACTIONS, size=BATCH),
        rewards=(reward_scale * rng.normal(size=BATCH)).astype(np.float32),
        next_obs=rng.normal(size=(BATCH, OBS_DIM)).astype(np.float32),
        terminated=terminated,
        indices=np.arange(BATCH),
        weights=rng.uniform(0.1, 1.0, size=BATCH).astype(np.float32),
        ages=np.zeros(BATCH, np.int64),
    )


def assert_same_params(a: DQNAgent, b: DQNAgent) -> None:
    for net in ("q_net", "target_net"):
        for (name, pa), pb in zip(getattr(a, net).named_parameters(), getattr(b, net).parameters(), strict=True):
            np.testing.assert_allclose(pb.detach().numpy(), pa.detach().numpy(), err_msg=f"{net}.{name}", **TOL)


def run_both(steps: int = 6, seed: int = 0, sync_at: int | None = 3, **kw) -> tuple[DQNAgent, DQNAgent]:
    ref, fast = make_agent("torch", **kw), make_agent("numba", **kw)
    assert (ref.engine, fast.engine) == ("torch", "numba")
    assert_same_params(ref, fast)
    rng = np.random.default_rng(seed)
    for step in range(steps):
        batch = make_batch(rng)
        r_ref, r_fast = ref.learn(batch), fast.learn(batch)
        np.testing.assert_allclose(r_fast.td_errors, r_ref.td_errors, **TOL)
        assert r_fast.loss == pytest.approx(r_ref.loss, rel=1e-5, abs=1e-6)
        assert r_fast.q_mean == pytest.approx(r_ref.q_mean, rel=1e-5, abs=1e-6)
        assert_same_params(ref, fast)
        if step == sync_at:
            ref.sync_target()
            fast.sync_target()
            assert_same_params(ref, fast)
    assert ref.updates == fast.updates == steps
    return ref, fast


@pytest.mark.parametrize("loss", ["huber", "mse"])
@pytest.mark.parametrize("double_dqn", [False, True])
@pytest.mark.parametrize("hidden_sizes", [[16], [16, 8]])
def test_updates_match_torch(loss, double_dqn, hidden_sizes):
    run_both(loss=loss, double_dqn=double_dqn, hidden_sizes=hidden_sizes)


@pytest.mark.parametrize("max_grad_norm", [None, 1e4, 0.05])
def test_gradient_clipping_matches_torch(max_grad_norm):
    run_both(max_grad_norm=max_grad_norm, double_dqn=True)


def test_clipping_is_active_at_a_small_norm():
    """The 0.05 case above really clips: its weights move differently from an unclipped run."""
    _, clipped = run_both(steps=2, max_grad_norm=0.05)
    _, free = run_both(steps=2, max_grad_norm=None)
    diff = max(
        float((a - b).detach().abs().max())
        for a, b in zip(clipped.q_net.parameters(), free.q_net.parameters(), strict=True)
    )
    assert diff > 1e-4


def test_polyak_sync_matches_torch():
    run_both(tau=0.3, sync_at=2)
    run_both(tau=0.7, sync_at=2)


def test_hard_sync_copies_the_online_weights():
    _, fast = run_both(steps=2, sync_at=None)
    fast.sync_target()
    for a, b in zip(fast.q_net.parameters(), fast.target_net.parameters(), strict=True):
        assert torch.equal(a, b)


def test_td_errors_and_greedy_action_match_torch():
    ref, fast = run_both(steps=2, double_dqn=True)
    batch = make_batch(np.random.default_rng(7))
    np.testing.assert_allclose(fast.td_errors(batch), ref.td_errors(batch), **TOL)
    with torch.no_grad():
        q = fast.q_net(torch.from_numpy(batch.obs)).numpy()  # the torch module sees the engine's weights
    assert [fast.greedy_action(o) for o in batch.obs] == list(q.argmax(axis=1))
    assert [ref.greedy_action(o) for o in batch.obs] == list(q.argmax(axis=1))


def test_terminated_stops_the_bootstrap():
    fast = make_agent("numba", gamma=0.5)
    batch = make_batch(np.random.default_rng(1))
    with torch.no_grad():
        q = fast.q_net(torch.from_numpy(batch.obs)).numpy()[np.arange(BATCH), batch.actions]
        next_q = fast.target_net(torch.from_numpy(batch.next_obs)).numpy().max(axis=1)
    expected = batch.rewards + 0.5 * (1.0 - batch.terminated) * next_q - q
    np.testing.assert_allclose(fast.td_errors(batch), expected, **TOL)
    np.testing.assert_allclose(fast.learn(batch).td_errors, expected, **TOL)


def test_parameters_are_views_of_the_flat_buffers():
    fast = make_agent("numba")
    assert shares_memory(fast.q_net, fast._fast.params)
    assert shares_memory(fast.target_net, fast._fast.target_params)
    before = fast.q_net.net[0].weight.detach().clone()
    fast.learn(make_batch(np.random.default_rng(0)))
    assert not torch.equal(before, fast.q_net.net[0].weight)  # updated in place, seen through torch


@pytest.mark.parametrize("source, dest", [("numba", "numba"), ("numba", "torch"), ("torch", "numba")])
def test_state_dict_round_trip_across_engines(source, dest):
    """A checkpoint (weights, target, Adam moments and step) restores exactly, into either engine."""
    rng = np.random.default_rng(3)
    batches = [make_batch(rng) for _ in range(6)]
    original = make_agent(source, double_dqn=True)
    for batch in batches[:3]:
        original.learn(batch)
    buffer = io.BytesIO()
    torch.save(original.state_dict(), buffer)
    buffer.seek(0)
    restored = make_agent(dest, seed=99, double_dqn=True)  # different initial weights, all overwritten
    restored.load_state_dict(torch.load(buffer, weights_only=False))
    assert restored.updates == 3
    assert_same_params(original, restored)
    for batch in batches[3:]:
        np.testing.assert_allclose(restored.learn(batch).td_errors, original.learn(batch).td_errors, **TOL)
    assert_same_params(original, restored)


def test_fresh_optimizer_state_dict_loads_into_torch_adam():
    fast = make_agent("numba")
    ref = make_agent("torch")
    ref.optimizer.load_state_dict(fast.optimizer.state_dict())  # empty state, same param group
    assert fast.optimizer.state_dict()["param_groups"][0]["lr"] == ref.optimizer.param_groups[0]["lr"]


def test_non_finite_td_errors_propagate():
    fast = make_agent("numba")
    batch = make_batch(np.random.default_rng(0))
    batch.rewards[0] = np.nan
    assert np.isnan(fast.learn(batch).td_errors[0])


def test_engine_resolution():
    from per_cli.rl.networks import MLPQNetwork

    mlp, cnn = MLPQNetwork(4, 2, [8]), NatureCNN(4, 3)
    cpu = torch.device("cpu")
    assert resolve_engine("auto", mlp, cpu) == "numba"
    assert resolve_engine("auto", cnn, cpu) == "torch"
    assert resolve_engine("auto", mlp, torch.device("cuda")) == "torch"
    assert resolve_engine("torch", mlp, cpu) == "torch"
    with pytest.raises(ConfigError, match="agent.engine"):
        resolve_engine("numba", cnn, cpu)
    with pytest.raises(ConfigError, match="agent.engine"):
        resolve_engine("numba", mlp, torch.device("cuda"))
