"""The envs as one batch (per_cli/envs/batch.py): each env's rows are its own step and reset, whatever the batch;
an env that raises fails only its own row."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from per_cli.envs.batch import EachEnv, PooledBatch, env_batch


def _no_interrupt(exc: BaseException) -> None:
    return None


def _envs(seeds: list[int]) -> list:
    envs = [gym.make("CartPole-v1") for _ in seeds]
    for env, seed in zip(envs, seeds, strict=True):
        env.reset(seed=seed)
    return envs


def test_gymnasium_envs_step_and_reset_as_rows_each_its_own():
    """Envs 2, 0 of three CartPoles step as rows; each equals the same env stepped alone (its info too), and the
    envs whose episode ended reset as rows of their own resets."""
    seeds = [1, 2, 3]
    batch, alone = env_batch(_envs(seeds), np.zeros(4, np.float32), _no_interrupt), _envs(seeds)
    assert type(batch) is EachEnv
    rng, which, resets = np.random.default_rng(0), [2, 0], 0
    for _ in range(200):
        actions = rng.integers(0, 2, size=2)
        step = batch.step(which, actions)
        assert not step.errors and step.obs.dtype == np.float32 and step.obs.shape == (2, 4)
        for k, i in enumerate(which):
            obs, reward, terminated, truncated, info = alone[i].step(int(actions[k]))
            np.testing.assert_array_equal(step.obs[k], obs)
            assert (step.rewards[k], step.terminated[k], step.truncated[k], step.infos[k]) == (
                reward, terminated, truncated, info)  # fmt: skip
        ended = [i for k, i in enumerate(which) if step.terminated[k] or step.truncated[k]]
        if ended:
            reset = batch.reset(ended)
            resets += 1
            assert not reset.errors
            for k, i in enumerate(ended):
                np.testing.assert_array_equal(reset.obs[k], alone[i].reset()[0])
    assert resets > 3


def test_an_env_that_raises_fails_only_its_row():
    """An env stepped before its reset (Gymnasium's order enforcing raises) and an env whose observations change
    shape fail their own rows; the other steps as it would alone."""
    envs, alone = _envs([1, 2, 3]), _envs([1, 2, 3])
    envs[0] = gym.make("CartPole-v1")  # (never reset)
    space = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
    envs[2] = gym.wrappers.TransformObservation(envs[2], lambda obs: obs[:3], space)
    batch = EachEnv(envs, np.zeros(4, np.float32))
    step = batch.step([0, 1, 2], np.zeros(3, dtype=np.int64))
    assert sorted(step.errors) == [0, 2] and "shape (3,)" in str(step.errors[2])
    np.testing.assert_array_equal(step.obs[1], alone[1].step(0)[0])
    kept = step.take([1])
    assert kept.obs.shape == (1, 4) and not kept.errors
    with pytest.raises(TypeError):  # (the mapping every error-free step shares: read-only)
        kept.errors[0] = RuntimeError("a caller's own note")


def test_envpool_envs_step_as_rows_in_one_call_and_alone_where_it_raises():
    """EnvPool's envs make a PooledBatch; where its one call raises (an env not reset yet), each env steps
    alone and only the env that raises fails, unless a signal is behind the error: then that is raised."""
    pytest.importorskip("envpool")
    from per_cli.envs.pool import make_pooled

    envs, alone = make_pooled("CartPole-v1", [3, 4, 5]), make_pooled("CartPole-v1", [3, 4, 5])
    for env in [*envs[:2], *alone]:
        env.reset(seed=env.seed)
    batch = env_batch(envs, np.zeros(4, np.float32), _no_interrupt)
    assert isinstance(batch, PooledBatch)
    step = batch.step([0, 1, 2], np.ones(3, dtype=np.int64))  # env 2 was never reset
    assert list(step.errors) == [2] and "before reset" in str(step.errors[2])
    for k in (0, 1):
        np.testing.assert_array_equal(step.obs[k], alone[k].step(1)[0])
    step = batch.step([1, 0], np.zeros(2, dtype=np.int64))
    assert not step.errors
    np.testing.assert_array_equal(step.obs, [alone[1].step(0)[0], alone[0].step(0)[0]])
    stopped = env_batch(make_pooled("CartPole-v1", [6]), np.zeros(4, np.float32), lambda exc: KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):  # (a signal behind the batched call's error: raised, no env stepped alone)
        stopped.step([0], np.zeros(1, dtype=np.int64))


def test_a_batched_envpool_call_that_fails_where_no_env_fails_alone_fails_every_row(monkeypatch):
    """A batched call that raises while each env's own call does not is broken itself (EnvPool 0.8.4 under NumPy 2
    gave every env id 0): every row fails with why, for steps and resets, instead of going on at one call per
    env."""
    pytest.importorskip("envpool")
    from per_cli.envs import batch as batch_module
    from per_cli.envs.pool import make_pooled

    envs = make_pooled("CartPole-v1", [3, 4])
    for env in envs:
        env.reset(seed=env.seed)
    batch = env_batch(envs, np.zeros(4, np.float32), _no_interrupt)

    def broken(*_):
        raise IndexError("index 2 is out of bounds for axis 0 with size 2")

    monkeypatch.setattr(batch_module, "step_arrays", broken)
    monkeypatch.setattr(batch_module, "reset_arrays", broken)
    for outcome in (batch.step([0, 1], np.zeros(2, dtype=np.int64)), batch.reset([1, 0])):
        assert sorted(outcome.errors) == [0, 1]
        message = str(outcome.errors[0])
        assert "EnvPool's batched call raised IndexError: index 2 is out of bounds" in message
        assert "each env's own call did not" in message and "EnvPool 1.2 or newer" in message
