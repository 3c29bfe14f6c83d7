"""The numba update engine against the torch engine (autograd + torch.optim.Adam + clip_grad_norm_), and the
rules that decide which engine runs.

The equivalence cases are generated from ``KERNEL_VALUES``, the engine's own list of what it implements: every
listed value of every setting is run against torch (from identical initial weights and the same batches,
consecutive updates must agree on the weights, the TD errors, the loss and the mean Q to float32 rounding), and
every value a config can take that is not listed is refused with a reason. The losses the replay kind brings
(LAP's and PAL's, :mod:`per_cli.rl.losses`, not agent settings) are run against torch the same way (``LOSSES``).
"""

import dataclasses
import io
import typing

import numpy as np
import pytest
import torch

from per_cli.config import AgentConfig, ConfigError
from per_cli.rl import engines
from per_cli.rl.agent import DQNAgent
from per_cli.rl.engines import ANY, KERNEL_VALUES, choose_engine, supports
from per_cli.rl.engines.mlp import MLPEngine, shares_memory
from per_cli.rl.losses import TDLoss
from per_cli.rl.networks import MLPQNetwork, MLPSpec
from tests.rl.batches import batch as make_batch_of

OBS_DIM, N_ACTIONS = 5, 3
TOL = {"rtol": 1e-5, "atol": 1e-5}
BASE = {"hidden_sizes": [16], "lr": 3e-3, "gamma": 0.9}

# representative values of the settings the kernel takes as numbers (ANY in KERNEL_VALUES)
NUMERIC_CASES = {
    "hidden_sizes": ([], [16], [16, 8], [37, 18]),  # no hidden layer, one, two, and widths off the 2x4 blocks
    "lr": (1e-4, 3e-2),
    "adam_eps": (1e-8, 1e-3),
    "gamma": (0.0, 0.99),
    "tau": (0.3, 0.7, 1.0),
    "max_grad_norm": (None, 1e4, 0.05),
}


# every loss the engines compute: agent.loss's (as the config's) and the replay kinds' own, with κ where the
# batches' TD errors (rewards of scale 3) fall on both sides of it, and the authors' default κ
LOSSES = [
    *(TDLoss(name) for name in KERNEL_VALUES["loss"]),
    TDLoss("lap", 1.0, 0.6),
    TDLoss("pal", 1.0, 0.6),
]
KIND_LOSSES = [TDLoss("lap", 0.01, 0.6), TDLoss("pal", 0.01, 0.6), TDLoss("pal", 2.0, 0.0), TDLoss("pal", 0.5, 1.0)]


def feature_cases() -> list[tuple[str, object]]:
    cases = []
    for name, allowed in KERNEL_VALUES.items():
        cases += [(name, value) for value in (NUMERIC_CASES[name] if allowed is ANY else allowed)]
    return cases


def refused_cases() -> list[tuple[str, object]]:
    """Every value of a categorical agent setting that the kernel does not list."""
    cases = []
    hints = typing.get_type_hints(AgentConfig)
    for f in dataclasses.fields(AgentConfig):
        hint = hints[f.name]
        choices = typing.get_args(hint) if typing.get_origin(hint) is typing.Literal else ()
        allowed = KERNEL_VALUES.get(f.name, ANY)
        cases += [(f.name, value) for value in choices if allowed is not ANY and value not in allowed]
    return cases


def make_agent(engine: str, seed: int = 0, td_loss: TDLoss | None = None, **kw) -> DQNAgent:
    """An agent of ``engine``; ``td_loss``: the run's loss (a huber or mse one becomes agent.loss)."""
    torch.manual_seed(seed)
    if td_loss is not None and td_loss.name in KERNEL_VALUES["loss"]:
        kw, td_loss = {**kw, "loss": td_loss.name}, None
    cfg = AgentConfig(**{**BASE, **kw, "engine": engine})
    agent = engines.make_agent(cfg, (OBS_DIM,), N_ACTIONS, torch.device("cpu"), td_loss)
    with torch.no_grad():  # a target net that differs from the online net, so double DQN and sync matter
        for i, p in enumerate(agent.target_net.parameters()):
            p.add_(0.05 * (i + 1))
    return agent


def make_batch(rng: np.random.Generator, size: int = 32, weighted: bool = True, reward_scale: float = 3.0):
    """Terminated samples (no bootstrap) and truncated ones (stored as not terminated, real next obs),
    non-uniform IS weights, rewards large enough that some Huber errors are past the quadratic zone."""
    terminated = np.zeros(size, np.float32)
    terminated[: size // 4] = 1.0  # the first quarter ended by termination; the rest (incl. truncations) bootstrap
    return make_batch_of(
        obs=rng.normal(size=(size, OBS_DIM)).astype(np.float32),
        actions=rng.integers(N_ACTIONS, size=size),
        rewards=(reward_scale * rng.normal(size=size)).astype(np.float32),
        next_obs=rng.normal(size=(size, OBS_DIM)).astype(np.float32),
        terminated=terminated,
        weights=rng.uniform(0.1, 1.0, size=size).astype(np.float32) if weighted else None,
    )


def assert_same_params(a: DQNAgent, b: DQNAgent) -> None:
    for net in ("q_net", "target_net"):
        for (name, pa), pb in zip(getattr(a, net).named_parameters(), getattr(b, net).parameters(), strict=True):
            np.testing.assert_allclose(pb.detach().numpy(), pa.detach().numpy(), err_msg=f"{net}.{name}", **TOL)


def run_both(steps=6, seed=0, sync_at=3, size=32, weighted=True, **kw) -> tuple[DQNAgent, DQNAgent]:
    ref, fast = make_agent("torch", **kw), make_agent("numba", **kw)
    assert (ref.engine, fast.engine) == ("torch", "numba")
    assert_same_params(ref, fast)
    rng = np.random.default_rng(seed)
    for step in range(steps):
        batch = make_batch(rng, size, weighted)
        r_ref, r_fast = ref.learn(batch).member(0), fast.learn(batch).member(0)
        np.testing.assert_allclose(r_fast.td_errors, r_ref.td_errors, **TOL)
        np.testing.assert_allclose(r_fast.losses, r_ref.losses, **TOL)  # each sample's, as the loss counts it
        weights = batch.weights.astype(np.float64)
        for r in (r_ref, r_fast):  # (without its IS weight: the loss is the mean of the weights times them)
            assert np.mean(weights * r.losses) == pytest.approx(r.loss, rel=1e-5, abs=1e-7)
        assert r_fast.loss == pytest.approx(r_ref.loss, rel=1e-5, abs=1e-6)
        assert r_fast.q_mean == pytest.approx(r_ref.q_mean, rel=1e-5, abs=1e-6)
        assert_same_params(ref, fast)
        if step == sync_at:
            ref.sync_target()
            fast.sync_target()
            assert_same_params(ref, fast)
    assert ref.updates == fast.updates == steps
    return ref, fast


def test_every_numeric_kernel_setting_has_test_values():
    assert set(NUMERIC_CASES) == {name for name, allowed in KERNEL_VALUES.items() if allowed is ANY}


def test_every_agent_setting_is_classified():
    """A setting added to AgentConfig must be listed as implemented or as engine-neutral (else auto refuses it)."""
    from per_cli.rl.engines import ENGINE_NEUTRAL

    names = {f.name for f in dataclasses.fields(AgentConfig)}
    assert names <= set(KERNEL_VALUES) | ENGINE_NEUTRAL
    assert supports(AgentConfig(), (4,), "cpu") is None


@pytest.mark.parametrize("name, value", feature_cases())
def test_each_supported_setting_matches_torch(name, value):
    assert supports(AgentConfig(**{**BASE, name: value}), (OBS_DIM,), "cpu") is None
    run_both(**{name: value})


@pytest.mark.parametrize("loss", LOSSES, ids=str)
@pytest.mark.parametrize("double_dqn", KERNEL_VALUES["double_dqn"])
@pytest.mark.parametrize("hidden_sizes", NUMERIC_CASES["hidden_sizes"][1:3])
def test_combined_settings_match_torch(loss, double_dqn, hidden_sizes):
    run_both(td_loss=loss, double_dqn=double_dqn, hidden_sizes=hidden_sizes, max_grad_norm=0.05, tau=0.3, sync_at=2)


@pytest.mark.parametrize("loss", KIND_LOSSES, ids=str)
def test_lap_and_pal_match_torch_at_other_kappas_and_alphas(loss):
    """The authors' κ (few TD errors inside it), α = 0 (PAL's λ is 1), α = 1; IS weights still multiply."""
    run_both(td_loss=loss)


@pytest.mark.parametrize("loss", LOSSES, ids=str)
@pytest.mark.parametrize("size, weighted", [(33, True), (1, True), (32, False)])
def test_batch_shapes_and_uniform_weights_match_torch(size, weighted, loss):
    run_both(size=size, weighted=weighted, hidden_sizes=[37, 18], double_dqn=True, td_loss=loss)


@pytest.mark.parametrize("name, value", refused_cases())
def test_each_unsupported_setting_is_refused_with_a_reason(name, value):
    cfg = AgentConfig(**{**BASE, name: value})
    reason = supports(cfg, (OBS_DIM,), "cpu")
    assert reason is not None and f"agent.{name}={value}" in reason
    with pytest.raises(ConfigError, match=rf"^agent\.engine: numba cannot run this config: .*agent\.{name}"):
        engines.make_agent(dataclasses.replace(cfg, engine="numba"), (OBS_DIM,), N_ACTIONS, torch.device("cpu"))
    agent = engines.make_agent(dataclasses.replace(cfg, engine="auto"), (OBS_DIM,), N_ACTIONS, torch.device("cpu"))
    assert (agent.engine, agent.engine_note) == ("torch", reason)


def test_refused_cases_include_a_tanh_network():
    assert ("activation", "tanh") in refused_cases()


def test_the_kernel_refuses_a_network_it_does_not_implement():
    """Built directly, the engine checks the modules against the spec: a Tanh stack is refused, not computed."""
    relu, tanh = MLPSpec(OBS_DIM, (8,), N_ACTIONS, "relu"), MLPSpec(OBS_DIM, (8,), N_ACTIONS, "tanh")
    settings = {"gamma": 0.9, "loss": "huber", "double_dqn": False, "max_grad_norm": None, "lr": 1e-3}
    with pytest.raises(ValueError, match="ReLU MLPs, not tanh"):
        MLPEngine(tanh, MLPQNetwork(tanh), MLPQNetwork(tanh), **settings)
    with pytest.raises(ValueError, match="not the spec's Linear/ReLU stack"):  # a Tanh net passed as a ReLU spec
        MLPEngine(relu, MLPQNetwork(tanh), MLPQNetwork(tanh), **settings)
    with pytest.raises(ValueError, match="not the spec's Linear/ReLU stack"):  # the wrong widths
        MLPEngine(relu, MLPQNetwork(MLPSpec(OBS_DIM, (9,), N_ACTIONS)), MLPQNetwork(relu), **settings)


@pytest.mark.parametrize(
    "kw, shape, device, words",
    [
        ({}, (OBS_DIM,), "cuda", "CPU"),
        ({"network": "cnn"}, (4, 84, 84), "cpu", "agent.network is cnn"),
        ({}, (10, 10, 4), "cpu", "agent.network is minatar"),
    ],
)
def test_networks_and_devices_the_kernel_does_not_run(kw, shape, device, words):
    reason = supports(AgentConfig(**kw), shape, device)
    assert reason is not None and words in reason
    assert choose_engine(AgentConfig(**kw), shape, device) == ("torch", reason)
    with pytest.raises(ConfigError, match=r"^agent\.engine"):
        choose_engine(AgentConfig(**kw, engine="numba"), shape, device)


def test_a_setting_the_engine_does_not_know_is_refused():
    """Fail closed: a new agent setting is not silently ignored by the kernel."""
    extended = dataclasses.make_dataclass(
        "Extended", [("noisy_nets", bool, dataclasses.field(default=True))], bases=(AgentConfig,), frozen=True
    )
    reason = supports(extended(), (OBS_DIM,), "cpu")
    assert reason is not None and "agent.noisy_nets" in reason


def test_auto_picks_numba_wherever_it_is_supported_and_says_why_not_elsewhere():
    assert choose_engine(AgentConfig(), (4,), "cpu") == ("numba", None)
    engine, note = choose_engine(AgentConfig(activation="tanh"), (4,), "cpu")
    assert engine == "torch" and "agent.activation=tanh" in note
    assert choose_engine(AgentConfig(engine="torch"), (4,), "cpu") == ("torch", None)
    assert choose_engine(AgentConfig(engine="numba"), (4,), "cpu") == ("numba", None)


def test_workspace_is_allocated_once_and_reused_across_batch_sizes():
    """The scratch memory is allocated once (grown for a larger batch); reusing it, even after a larger call
    left other values in it, gives bit-identical results to a fresh engine."""
    rng = np.random.default_rng(5)
    batches = [make_batch(rng, size) for size in (32, 32, 8, 33, 1, 32)]
    reused = make_agent("numba", double_dqn=True, hidden_sizes=[20, 12])
    reused.learn(batches[0])
    ws = reused.numba_engine.alone.workspace.buffer
    reused.learn(batches[1])
    assert reused.numba_engine.alone.workspace.buffer is ws
    for b in batches[2:]:
        reused.learn(b)
    assert reused.numba_engine.alone.workspace.batch == 33
    fresh = make_agent("numba", double_dqn=True, hidden_sizes=[20, 12])
    for b in batches:
        fresh.numba_engine.alone.workspace.batch = 0  # a new workspace for every call
        fresh.learn(b)
    for a, b in zip(reused.q_net.parameters(), fresh.q_net.parameters(), strict=True):
        assert torch.equal(a, b)
    probe = make_batch(rng, 7)
    np.testing.assert_array_equal(reused.td_errors(probe), fresh.td_errors(probe))


def test_clipping_is_active_at_a_small_norm():
    """The 0.05 case really clips: its weights move differently from an unclipped run."""
    _, clipped = run_both(steps=2, max_grad_norm=0.05)
    _, free = run_both(steps=2, max_grad_norm=None)
    diff = max(
        float((a - b).detach().abs().max())
        for a, b in zip(clipped.q_net.parameters(), free.q_net.parameters(), strict=True)
    )
    assert diff > 1e-4


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
        q = fast.q_net(torch.from_numpy(batch.obs)).numpy()[np.arange(32), batch.actions]
        next_q = fast.target_net(torch.from_numpy(batch.next_obs)).numpy().max(axis=1)
    expected = batch.rewards + 0.5 * (1.0 - batch.terminated) * next_q - q
    np.testing.assert_allclose(fast.td_errors(batch), expected, **TOL)
    np.testing.assert_allclose(fast.learn(batch).member(0).td_errors, expected, **TOL)


def test_parameters_are_views_of_the_flat_buffers():
    fast = make_agent("numba")
    assert shares_memory(fast.q_net, fast.numba_engine.params)
    assert shares_memory(fast.target_net, fast.numba_engine.target_params)
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
        np.testing.assert_allclose(restored.learn(batch).td, original.learn(batch).td, **TOL)
    assert_same_params(original, restored)


def test_a_numba_agent_learns_with_the_loaded_optimizers_settings():
    """The loaded Adam's lr, betas and eps are the ones its next updates use (MLPEngine.loaded)."""
    rng = np.random.default_rng(4)
    batches = [make_batch(rng) for _ in range(4)]
    original = make_agent("numba", lr=3e-2)
    original.learn(batches[0])
    restored = make_agent("numba", lr=1e-5, adam_eps=1e-3)  # the same initial weights, other settings
    restored.load_state_dict(original.state_dict())
    for batch in batches[1:]:
        assert restored.learn(batch).td.tobytes() == original.learn(batch).td.tobytes()
    assert restored.numba_engine.params.tobytes() == original.numba_engine.params.tobytes()


def test_fresh_optimizer_state_dict_loads_into_torch_adam():
    fast = make_agent("numba")
    ref = make_agent("torch")
    ref.optimizer.load_state_dict(fast.optimizer.state_dict())  # empty state, same param group
    assert fast.optimizer.state_dict()["param_groups"][0]["lr"] == ref.optimizer.param_groups[0]["lr"]


def test_an_rmsprop_checkpoint_does_not_load_into_the_numba_engine():
    source = make_agent("torch", optimizer="rmsprop")
    source.learn(make_batch(np.random.default_rng(0)))
    with pytest.raises(ValueError, match="Adam only"):
        make_agent("numba").load_state_dict(source.state_dict())


def test_non_finite_td_errors_propagate():
    fast = make_agent("numba")
    batch = make_batch(np.random.default_rng(0))
    batch.rewards[0] = np.nan
    assert np.isnan(fast.learn(batch).member(0).td_errors[0])


def test_the_kernels_follow_the_trainers_flush_to_zero_mode():
    """The trainer sets flush-to-zero with torch.set_flush_denormal; the kernels run on the calling thread, so
    they see it too (one of issue 17's suspects for the MountainCar gap: it is not one)."""
    from per_cli.rl.engines.optim import lerp_kernel

    def lerp_denormal() -> float:
        target, online = np.zeros(1, np.float32), np.full(1, 1e-39, np.float32)  # 1e-39 is a float32 denormal
        lerp_kernel(target, online, 0.25)
        return float(target[0])

    if not torch.set_flush_denormal(True):
        pytest.skip("this CPU has no flush-to-zero mode")
    try:
        assert lerp_denormal() == 0.0
    finally:
        torch.set_flush_denormal(False)
    assert lerp_denormal() == pytest.approx(2.5e-40, rel=1e-3)
