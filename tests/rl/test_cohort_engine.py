"""The cohort engine's batched acting and insertion TD errors: each member's value is bit for bit the one its
own engine computes (the cohort's equivalence with solo runs rests on it)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from per_cli.config import AgentConfig, Config, load_config
from per_cli.rl.agent import DQNAgent
from per_cli.rl.engines import make_agent
from per_cli.rl.engines.cohort import CohortEngine, stack
from per_cli.rl.engines.dense import c_array
from per_cli.rl.losses import TDLoss
from per_cli.train.loop.cohort import Cohort, cohort_configs

from ..conftest import CONFIGS
from ..train.checkpoints.test_checkpoint import CHECKPOINTED


def _agents(n: int, td_loss: TDLoss | None = None, **kw) -> list[DQNAgent]:
    agents = []
    for seed in range(n):
        torch.manual_seed(seed)
        cfg = AgentConfig(hidden_sizes=[32, 16], engine="numba", **kw)
        agents.append(make_agent(cfg, (5,), 3, torch.device("cpu"), td_loss))
    rng = np.random.default_rng(1)
    for agent in agents:  # distinct online and target weights
        engine = agent.numba_engine
        engine.target_params[:] = engine.params + rng.normal(scale=0.1, size=engine.params.shape).astype(np.float32)
    return agents


def _cohort_configs(*overrides: str) -> list[Config]:
    return cohort_configs(load_config(CONFIGS / "cartpole_uniform.yaml", list(overrides), device="cpu"), [1, 2])


@pytest.mark.parametrize("double_dqn", [False, True])
def test_batched_greedy_actions_and_td_errors_equal_each_members_own(double_dqn):
    agents = _agents(4, double_dqn=double_dqn, gamma=0.9)
    engine = CohortEngine([a.numba_engine for a in agents])
    rng = np.random.default_rng(0)
    which = [2, 0, 3]  # a subset, out of order
    for _ in range(20):
        obs = [rng.normal(size=5).astype(np.float32) for _ in which]
        expected = [agents[i].numba_engine.greedy_action(o) for i, o in zip(which, obs, strict=True)]
        assert engine.greedy(which, obs).tolist() == expected
        assert [engine.greedy_action(i, o) for i, o in zip(which, obs, strict=True)] == expected
        rows = [
            (rng.normal(size=(1, 5)), rng.integers(0, 3, size=1), rng.normal(size=1), rng.normal(size=(1, 5)),
             rng.integers(0, 2, size=1).astype(np.float32))
            for _ in which
        ]  # fmt: skip
        td = engine.td_errors(which, *zip(*rows, strict=True))
        for k, (i, row) in enumerate(zip(which, rows, strict=True)):
            own = agents[i].numba_engine.td_errors(*row)
            assert td[k].tobytes() == own.tobytes()


def test_nan_weights_give_a_nan_td_error_only_to_their_member():
    agents = _agents(2)
    agents[0].numba_engine.params[:] = np.nan
    engine = CohortEngine([a.numba_engine for a in agents])
    row = (np.ones((1, 5)), np.zeros(1, dtype=np.int64), np.ones(1), np.ones((1, 5)), np.zeros(1))
    td = engine.td_errors([0, 1], *zip(row, row, strict=True))
    assert np.isnan(td[0]) and np.isfinite(td[1])


@pytest.mark.parametrize("td_loss", [TDLoss("lap", 0.5, 0.6), TDLoss("pal", 0.5, 0.6)], ids=str)
def test_a_cohort_update_with_lap_or_pal_is_each_members_solo_update(td_loss):
    """κ and α travel in the cohort's ``UpdateSettings`` as in a solo engine's: a member's cohort update is its
    solo update bit for bit (PAL's λ its own batch's); members whose κ differ are refused."""
    agents, solos = _agents(3, td_loss), _agents(3, td_loss)
    engine = CohortEngine([a.numba_engine for a in agents])
    rng = np.random.default_rng(4)
    which, b = [1, 2, 0], 8
    for _ in range(3):
        arrays = (
            rng.normal(size=(3, b, 5)).astype(np.float32), rng.integers(0, 3, size=(3, b)),
            (rng.normal(size=(3, b)) * np.array([[0.1], [1.0], [10.0]])).astype(np.float32),
            rng.normal(size=(3, b, 5)).astype(np.float32), rng.integers(0, 2, size=(3, b)).astype(np.float32),
            rng.uniform(0.5, 1, size=(3, b)).astype(np.float32),
        )  # fmt: skip
        results = engine.update(which, *arrays)
        for k, i in enumerate(which):
            got, own = results.member(k), solos[i].numba_engine.update(*(a[k] for a in arrays)).member(0)
            assert got.td_errors.tobytes() == own.td_errors.tobytes() and got.losses.tobytes() == own.losses.tobytes()
            assert (got.loss, got.q_mean) == (own.loss, own.q_mean)
    for agent, solo in zip(agents, solos, strict=True):
        assert agent.numba_engine.params.tobytes() == solo.numba_engine.params.tobytes()
    other = _agents(1, TDLoss(td_loss.name, 0.25, td_loss.alpha))
    with pytest.raises(ValueError, match="update settings differ"):
        CohortEngine([agents[0].numba_engine, other[0].numba_engine])


def test_stack_is_np_stack():
    rng = np.random.default_rng(3)
    cases = [
        [rng.normal(size=5).astype(np.float32) for _ in range(4)],
        [rng.normal(size=(3, 2)) for _ in range(3)],
        [np.arange(4), np.arange(4.0)],  # dtypes promote as np.stack's
        [np.float32(1.0), np.float32(2.0)],  # 0-d: np.stack itself
    ]
    for arrays in cases:
        got, want = stack(arrays), np.stack(arrays)
        assert got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()
    for bad in ([np.zeros(3), np.zeros(4)], [np.zeros((2, 3)), np.zeros((2, 4))], [np.zeros(2), [0.0, 1.0, 2.0]]):
        with pytest.raises(ValueError):
            stack(bad)


def test_arrays_already_in_the_kernels_layout_pass_as_they_are_and_others_are_converted():
    """``c_array``: the loop's own C arrays of the kernels' dtype and shape are handed over uncopied; a list, another
    dtype, a strided view or the member axis left out is converted to that layout, values kept."""
    f32 = np.dtype(np.float32)
    ready = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    assert c_array(ready, f32, (2, 3, 4)) is ready
    wide = np.arange(48, dtype=np.float32).reshape(2, 3, 8)
    for other in (ready.tolist(), ready.astype(np.float64), wide[:, :, ::2], ready[0]):
        got = c_array(other, f32, (2, 3, 4) if len(np.shape(other)) == 3 else (1, 3, 4))
        assert got.dtype == f32 and got.flags.c_contiguous and got.base is not ready
        np.testing.assert_array_equal(got.reshape(-1, 4), np.asarray(other, dtype=np.float32).reshape(-1, 4))


def test_observations_of_another_width_than_the_networks_input_are_refused():
    """A batch whose states are not the networks' input width is a ValueError, not a kernel reading past them."""
    agents = _agents(1)
    engine = CohortEngine([a.numba_engine for a in agents])
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(1, 8, 6)).astype(np.float32)  # the networks take 5 numbers
    vectors = [np.zeros((1, 8), dtype=dtype) for dtype in (np.int64, np.float32, np.float32, np.float32)]
    actions, rewards, terminated, weights = vectors
    with pytest.raises(ValueError, match="reshape"):
        engine.update([0], obs, actions, rewards, obs, terminated, weights)
    with pytest.raises(ValueError, match="reshape"):
        engine.td_errors([0], obs, actions, rewards, obs, terminated)
    with pytest.raises(ValueError, match="reshape"):
        engine.greedy([0], obs[:, 0])


@pytest.mark.parametrize("built", ["before the load", "after the load"])
def test_a_resumed_members_buffers_are_its_row_of_the_cohorts_blocks(tmp_path, built):
    """A member's parameters, target parameters, Adam moments and step count are views of its row of the cohort
    engine's blocks, and a checkpoint load (``trainer_state.resume``) writes into them in place: a cohort engine
    built before the load holds what was loaded, as one built after does (a load that rebound a buffer would
    leave the cohort training a stale copy while the member's networks and checkpoints read another)."""
    cfgs = _cohort_configs(*CHECKPOINTED, "agent.engine=numba")
    dirs = [tmp_path / f"s{c.seed}" for c in cfgs]
    whole = Cohort(cfgs)
    whole.run(dirs)
    resumed = Cohort(_cohort_configs(*CHECKPOINTED, "agent.engine=numba", "train.total_steps=1200"))
    engines = [m.agent.numba_engine for m in resumed.members]
    cohort = CohortEngine(engines) if built == "before the load" else None
    resumed.resume(dirs)
    cohort = cohort or CohortEngine(engines)
    blocks = cohort.blocks
    for s, (engine, done) in enumerate(zip(engines, (m.agent.numba_engine for m in whole.members), strict=True)):
        n = done.params.size
        for block, own, want in (
            (blocks.params, engine.params, done.params), (blocks.target_params, engine.target_params,
            done.target_params), (blocks.m, engine.optimizer.m, done.optimizer.m),
            (blocks.v, engine.optimizer.v, done.optimizer.v),
        ):  # fmt: skip
            assert block[s, :n].tobytes() == own.tobytes() == want.tobytes() and np.shares_memory(block[s], own)
        assert blocks.steps[s] == engine.optimizer.step == done.optimizer.step > 0
        for p in engine.q_net.parameters():
            assert np.shares_memory(p.detach().numpy(), blocks.params[s])
