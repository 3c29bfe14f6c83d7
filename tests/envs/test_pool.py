"""``env.backend: envpool`` against Gymnasium: the same dynamics, rewards, terminations, truncations and
episode boundaries; a seed's env the same alone and in a cohort; reseeding as Gymnasium reseeds; bad input.

EnvPool is an optional extra (``pip install envpool``, ~700 MB with its assets), so these tests run where it
is installed and are skipped elsewhere.
"""

from __future__ import annotations

import sys

import gymnasium as gym
import numpy as np
import pytest
from typer.testing import CliRunner

from per_cli.cli import app
from per_cli.config import EnvConfig, load_config
from per_cli.errors import ConfigError
from per_cli.train.loop.cohort import Cohort, cohort_configs
from per_cli.train.loop.trainer import build_member, run_member

from ..conftest import CONFIGS

envpool = pytest.importorskip("envpool")

from per_cli.envs import check_backend  # noqa: E402
from per_cli.envs.pool import make_pooled, reset_arrays, step_arrays  # noqa: E402

runner = CliRunner()


def _state_of(env_id: str, obs: np.ndarray) -> np.ndarray:
    """The Gymnasium env's internal state behind an observation (Acrobot observes cos and sin of its angles)."""
    o = obs.astype(np.float64)
    if env_id == "Acrobot-v1":
        return np.array([np.arctan2(o[1], o[0]), np.arctan2(o[3], o[2]), o[4], o[5]])
    return o


@pytest.mark.parametrize("env_id, limit", [("CartPole-v1", 20), ("Acrobot-v1", 40), ("MountainCar-v0", 50)])
def test_steps_episode_ends_and_truncation_match_gymnasium(env_id, limit):
    """Every episode: the pooled env's start state copied into Gymnasium's env (with its TimeLimit), then the
    same random actions; observations agree to float32 rounding, rewards and the terminated/truncated flags
    exactly, so the episodes end at the same steps, by the same cause."""
    pooled = make_pooled(env_id, [7], limit)[0]
    reference = gym.make(env_id, max_episode_steps=limit)
    rng = np.random.default_rng(0)
    obs, _ = pooled.reset(seed=7)
    ends = {"terminated": 0, "truncated": 0}
    for _ in range(12):  # episodes
        reference.reset(seed=0)
        reference.unwrapped.state = _state_of(env_id, obs)
        while True:
            action = int(rng.integers(0, reference.action_space.n))
            obs, reward, terminated, truncated, _ = pooled.step(action)
            expected, r, te, tr, _ = reference.step(action)
            np.testing.assert_allclose(obs, expected, rtol=0, atol=1e-5)
            assert (reward, terminated, truncated) == (r, te, tr)
            if terminated or truncated:
                ends["terminated" if terminated else "truncated"] += 1
                obs, _ = pooled.reset()
                break
    assert ends["truncated"] > 0  # the step limit was reached and reported as Gymnasium reports it
    assert ends["terminated"] > 0 or env_id != "CartPole-v1"


def _pooled_and_alone(order: list[int]) -> tuple[list, list]:
    """CartPole envs of seeds 3, 4, 9 in two pools (3-4 and 9), taken in ``order``, and each seed's env made
    alone, in the same order; all reset with their seeds."""
    seeds = [3, 4, 9]
    pooled = make_pooled("CartPole-v1", seeds)
    together = [pooled[k] for k in order]
    alone = [make_pooled("CartPole-v1", [seeds[k]])[0] for k in order]
    for env in together + alone:
        env.reset(seed=env.seed)
    return together, alone


def test_a_seeds_env_is_the_same_alone_and_in_a_pool_of_any_seeds():
    """Seeds 3, 4, 9 (two pools: 3-4 and 9) step and reset together; each equals the env made alone with its seed."""
    together, alone = _pooled_and_alone([0, 1, 2])
    rng = np.random.default_rng(1)
    for _ in range(300):
        actions = rng.integers(0, 2, size=3)
        obs, rewards, terminated, truncated = step_arrays(together, actions)
        ended = np.flatnonzero(terminated | truncated).tolist()
        for k, (own, action) in enumerate(zip(alone, actions, strict=True)):
            want = own.step(int(action))
            np.testing.assert_array_equal(obs[k], want[0])
            assert (float(rewards[k]), bool(terminated[k]), bool(truncated[k])) == want[1:4]
        if ended:
            firsts = reset_arrays([together[k] for k in ended])
            for row, k in enumerate(ended):
                np.testing.assert_array_equal(firsts[row], alone[k].reset()[0])


def test_reseeding_restarts_a_stream_as_gymnasium_does():
    env = make_pooled("Acrobot-v1", [5])[0]
    first = env.reset(seed=5)[0]
    np.testing.assert_array_equal(env.reset(seed=5)[0], first)  # before any step: the same first episode
    env.step(0)
    np.testing.assert_array_equal(env.reset(seed=5)[0], first)  # after steps: the stream starts over
    other = make_pooled("Acrobot-v1", [11])[0].reset(seed=11)[0]
    np.testing.assert_array_equal(env.reset(seed=11)[0], other)


def test_a_cohort_on_envpool_is_its_solo_runs(tmp_path):
    sets = ["env.backend=envpool", "train.total_episodes=12", "train.eval_episodes=2"]
    cfg = load_config(CONFIGS / "seed001" / "cartpole_uniform.yaml", sets, device="cpu")
    cfgs = cohort_configs(cfg, [1, 2])
    together = Cohort(cfgs).run([tmp_path / f"c{c.seed}" for c in cfgs])
    alone = [run_member(build_member(c), tmp_path / f"s{c.seed}") for c in cfgs]
    for c in cfgs:
        rows_c = [r.split(",") for r in (tmp_path / f"c{c.seed}" / "metrics.csv").read_text().splitlines()]
        rows_s = [r.split(",") for r in (tmp_path / f"s{c.seed}" / "metrics.csv").read_text().splitlines()]
        wall = rows_c[0].index("wall_time")
        assert len(rows_c) > 12  # a header and a row per episode
        assert [r[:wall] + r[wall + 1 :] for r in rows_c] == [r[:wall] + r[wall + 1 :] for r in rows_s]
    for a, b in zip(together, alone, strict=True):
        assert (a["status"], a["total_steps"], a["final_return_mean"], a["eval_return_mean"]) == (
            b["status"], b["total_steps"], b["final_return_mean"], b["eval_return_mean"])  # fmt: skip


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["env.id=breakout-minatar"], "is not one of CartPole-v0"),
        (["env.kwargs={sutton_barto_reward: true}"], "env.kwargs"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, overrides, message):
    sets = [arg for kv in ["env.backend=envpool", *overrides] for arg in ("--set", kv)]
    result = runner.invoke(
        app, ["train", "--config", str(CONFIGS / "cartpole_uniform.yaml"), *sets, "--runs-dir", str(tmp_path)]
    )
    assert result.exit_code == 2, result.output
    assert message in result.output and result.output.count("error:") == 1
    assert not any(tmp_path.iterdir())


def test_without_envpool_installed_the_backend_names_the_fix(monkeypatch):
    monkeypatch.setitem(sys.modules, "envpool", None)  # `import envpool` then raises ImportError
    with pytest.raises(ConfigError, match="pip install envpool"):
        check_backend(EnvConfig(id="cartpole", backend="envpool"))


def test_stepped_as_arrays_each_env_is_its_own_step():
    """step_arrays over envs of two pools (seeds 3-4 and 9, in another order) gives each env's own step results
    as rows, in the order of the envs; a reset env's episode goes on from its reset."""
    together, alone = _pooled_and_alone([2, 0, 1])
    rng = np.random.default_rng(2)
    for _ in range(200):
        actions = rng.integers(0, 2, size=3)
        obs, rewards, terminated, truncated = step_arrays(together, actions)
        for k, (env, own) in enumerate(zip(together, alone, strict=True)):
            want = own.step(int(actions[k]))
            np.testing.assert_array_equal(obs[k], want[0])
            assert (float(rewards[k]), bool(terminated[k]), bool(truncated[k])) == want[1:4]
            if terminated[k] or truncated[k]:
                np.testing.assert_array_equal(env.reset()[0], own.reset()[0])
    with pytest.raises(RuntimeError, match="before reset"):
        step_arrays(make_pooled("CartPole-v1", [5]), np.zeros(1, dtype=np.int64))


def test_reset_as_arrays_each_env_gets_its_own_next_episode():
    """Envs of two pools whose episodes ended in the same step, reset in one call per pool (reset_arrays): each
    env's row is the observation its own reset gives, and its episode goes on as its own."""
    together, alone = _pooled_and_alone([2, 0, 1])
    rng = np.random.default_rng(5)
    batched_resets = 0
    for _ in range(400):
        actions = rng.integers(0, 2, size=3)
        obs, _, terminated, truncated = step_arrays(together, actions)
        ended = np.flatnonzero(terminated | truncated).tolist()
        for k, own in enumerate(alone):
            np.testing.assert_array_equal(obs[k], own.step(int(actions[k]))[0])
        if ended:
            firsts = reset_arrays([together[k] for k in ended])
            batched_resets += len(ended) > 1
            for row, k in enumerate(ended):
                np.testing.assert_array_equal(firsts[row], alone[k].reset()[0])
    assert batched_resets >= 3  # (the case under test happened)
