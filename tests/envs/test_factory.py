import gymnasium as gym
import numpy as np
import pytest

from per_cli.config import ConfigError, EnvConfig
from per_cli.envs import ALIASES, check_env_id, env_label, make_env, resolve_env_id


@pytest.mark.parametrize(
    ("alias", "env_id"), [("cartpole", "CartPole-v1"), ("acrobot", "Acrobot-v1"), ("mountaincar", "MountainCar-v0")]
)
def test_aliases_make_the_registered_env(alias, env_id):
    assert ALIASES[alias] == env_id
    env = make_env(EnvConfig(id=alias), seed=0)
    assert env.spec.id == env_id
    assert isinstance(env.action_space, gym.spaces.Discrete)
    env.close()


def test_any_registered_id_and_kwargs_work():
    env = make_env(EnvConfig(id="CartPole-v1", max_episode_steps=7), seed=0)
    env.reset(seed=0)
    steps, truncated = 0, False
    while not truncated:
        _, _, terminated, truncated, _ = env.step(0 if steps % 2 else 1)
        steps += 1
        assert not terminated
    assert steps == 7


def test_same_seed_same_observations():
    a = make_env(EnvConfig(id="acrobot"), seed=3)
    b = make_env(EnvConfig(id="acrobot"), seed=3)
    np.testing.assert_array_equal(a.reset(seed=3)[0], b.reset(seed=3)[0])
    np.testing.assert_array_equal(a.step(1)[0], b.step(1)[0])


def test_unknown_env_is_a_config_error():
    with pytest.raises(ConfigError, match="env.id: unknown env 'cartpoel'; did you mean 'cartpole'"):
        check_env_id("cartpoel")


def test_labels_are_file_name_safe():
    assert env_label("cartpole") == "cartpole"
    assert env_label("ALE/Pong-v5") == "ALE-Pong-v5"
    assert resolve_env_id("pong") == "ALE/Pong-v5"
