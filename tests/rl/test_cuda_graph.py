"""The CUDA-graphed update equals the eager one (on a GPU), and an optimizer state moves between the two (here).

The graph tests need CUDA: they run on a lent GPU machine (docs/results/pong/gpu.sh runs this file first)
and are skipped elsewhere. The capturable round trip runs everywhere: a checkpoint written under a graph resumes
on a CPU.
"""

import numpy as np
import pytest
import torch

from per_cli.config import AgentConfig
from per_cli.replay.storage.device_frames import DeviceStacks
from per_cli.rl.agent import DQNAgent
from per_cli.rl.cuda_graph import match_capturable
from per_cli.rl.engines import make_agent
from tests.rl.batches import batch as make_batch

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
ATARI = (4, 84, 84)


@pytest.fixture(autouse=True)
def _no_tf32():
    """TF32 convolutions round to ~1e-3: two agents whose cuDNN autotuning picks different kernels would differ
    by that much, which is not what these tests look for."""
    before = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32 = before


def _agent(graphed: bool, device: str, obs_shape=ATARI, **cfg) -> DQNAgent:
    torch.manual_seed(0)
    config = AgentConfig(**{"network": "cnn", "double_dqn": True, "lr": 1e-4, "cuda_graph": graphed, **cfg})
    return make_agent(config, obs_shape, 6, torch.device(device))


def _batches(n: int, size: int = 32, obs_shape=ATARI):
    rng = np.random.default_rng(1)
    for _ in range(n):
        obs = rng.integers(0, 256, (size, *obs_shape), dtype=np.uint8)
        next_obs = rng.integers(0, 256, (size, *obs_shape), dtype=np.uint8)
        yield make_batch(
            obs, rng.integers(0, 6, size), rng.normal(size=size), next_obs, (rng.random(size) < 0.1).astype(float)
        )


def _params(agent: DQNAgent) -> np.ndarray:
    return torch.cat([p.detach().flatten().cpu() for p in agent.q_net.parameters()]).numpy()


def _assert_same_learning(actual: np.ndarray, desired: np.ndarray) -> None:
    """Two agents' parameters after the same updates agree, all but a few of them within 1%. Why not all: the
    GPU's kernels are not bit-deterministic (atomic sums in cuDNN's backward), and Adam and RMSProp divide each
    gradient by its running RMS, so where a gradient is near zero that noise moves a parameter by up to about the
    learning rate (one H200 run of 24 updates: 5 of 1.7M parameters off by up to 2.5e-4). A wrong update (a missed
    or repeated step, stale inputs) moves nearly every parameter, which the fraction catches."""
    off = ~np.isclose(actual, desired, rtol=1e-2, atol=1e-4)
    assert off.mean() < 1e-4, f"{off.sum()} of {off.size} parameters differ"
    np.testing.assert_allclose(actual, desired, rtol=1e-2, atol=1e-2)


@cuda
@pytest.mark.parametrize("optimizer", ["adam", "rmsprop"])
def test_graphed_update_equals_eager_across_a_target_sync_and_a_checkpoint(optimizer):
    eager, graphed = _agent(False, "cuda", optimizer=optimizer), _agent(True, "cuda", optimizer=optimizer)
    for i, batch in enumerate(_batches(24)):
        if i == 12:  # a checkpoint round trip replaces the optimizer's state: the graph must be captured again
            state = graphed.state_dict()
            graphed = _agent(True, "cuda", optimizer=optimizer)
            graphed.load_state_dict(state)
        a, b = eager.learn(batch).member(0), graphed.learn(batch).member(0)
        np.testing.assert_allclose(b.td_errors, a.td_errors, rtol=1e-2, atol=1e-3)
        assert b.loss == pytest.approx(a.loss, rel=1e-2, abs=1e-4)
        if i % 5 == 4:
            eager.sync_target()
            graphed.sync_target()
    assert graphed._graph.captured
    _assert_same_learning(_params(graphed), _params(eager))
    assert not np.allclose(_params(graphed), _params(_agent(True, "cuda", optimizer=optimizer)))  # it learned


@cuda
def test_graphed_update_refuses_a_batch_of_another_shape():
    agent = _agent(True, "cuda")
    for batch in _batches(5):
        agent.learn(batch)
    with pytest.raises(ValueError, match="agent.cuda_graph: false"):
        agent.learn(next(iter(_batches(1, size=16))))


@cuda
def test_graphed_update_from_device_stacks_read_one_update_late_equals_eager():
    """The fast Pong path (``replay.device_frames``, ``train.priority_lag: 1``): the batch's stacks already on the
    device, the results read after the next update was queued (the graph's static outputs are overwritten by
    then: the deferred copy must hold this update's values), equal the eager update from host batches."""
    eager, graphed = _agent(False, "cuda"), _agent(True, "cuda")
    held = None
    for batch in _batches(12):
        expected = eager.learn(batch).member(0)
        on_device = make_batch(batch.obs, batch.actions, batch.rewards, batch.next_obs, batch.terminated)
        on_device.device_stacks = DeviceStacks(*(torch.from_numpy(a).cuda() for a in (batch.obs, batch.next_obs)))
        deferred = graphed.learn(on_device, wait=False)
        if held is not None:  # the previous update's, read now
            got = held[0].wait().member(0)
            np.testing.assert_allclose(got.td_errors, held[1].td_errors, rtol=1e-2, atol=1e-3)
            assert got.loss == pytest.approx(held[1].loss, rel=1e-2, abs=1e-4)
        held = (deferred, expected)
    assert graphed._graph.captured
    _assert_same_learning(_params(graphed), _params(eager))


@pytest.mark.parametrize("optimizer", ["adam", "rmsprop"])
def test_a_capturable_optimizer_state_resumes_eagerly_on_the_cpu(optimizer):
    """A checkpoint saved by a graphed run (its optimizer groups say capturable) learns on a CPU exactly as the
    eager state it came from."""
    shape = (4,)
    plain = _agent(False, "cpu", obs_shape=shape, optimizer=optimizer, network="mlp", engine="torch")
    batches = list(_batches(6, obs_shape=shape))
    for batch in batches[:3]:
        plain.learn(batch)
    state = plain.state_dict()
    for group in state["optimizer"]["param_groups"]:
        group["capturable"] = True  # as a graphed run saves it
    resumed = _agent(False, "cpu", obs_shape=shape, optimizer=optimizer, network="mlp", engine="torch")
    resumed.load_state_dict(state)
    assert all(not g["capturable"] for g in resumed.optimizer.param_groups)
    for batch in batches[3:]:
        np.testing.assert_array_equal(resumed.learn(batch).td, plain.learn(batch).td)
    np.testing.assert_array_equal(_params(resumed), _params(plain))


def test_match_capturable_moves_steps_to_the_cpu_when_not_capturable():
    param = torch.nn.Parameter(torch.ones(3))
    optimizer = torch.optim.Adam([param])
    param.grad = torch.ones(3)
    optimizer.step()
    optimizer.param_groups[0]["capturable"] = True
    match_capturable(optimizer, False)
    assert optimizer.param_groups[0]["capturable"] is False
    assert optimizer.state[param]["step"].device.type == "cpu"
    optimizer.step()  # a non-capturable Adam steps with a CPU step count
    assert float(optimizer.state[param]["step"]) == 2.0
