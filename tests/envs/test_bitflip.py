import gymnasium as gym
import numpy as np
import pytest

from per_cli.config import ConfigError, EnvConfig, load_config
from per_cli.envs import ALIASES, accepts_n_bits, make_env
from per_cli.envs.bitflip import BitFlipEnv


def test_alias_and_n_bits_reach_the_env():
    assert ALIASES["bitflip"] == "BitFlip-v0"
    env = make_env(EnvConfig(id="bitflip", n_bits=6), seed=0)
    assert env.unwrapped.n_bits == 6
    assert env.observation_space.shape == (12,)
    assert env.action_space == gym.spaces.Discrete(6)
    env.close()


def test_n_bits_belongs_to_bitflip_only():
    assert accepts_n_bits("bitflip") and not accepts_n_bits("cartpole")
    assert load_config(None, ["env.id=bitflip", "env.n_bits=5"]).env.n_bits == 5
    # preflight rejects n_bits elsewhere (naming env.n_bits); an env built anyway refuses the argument
    with pytest.raises(ConfigError, match="env.kwargs: CartPole-v1 rejected"):
        make_env(EnvConfig(id="cartpole", n_bits=5), seed=0)


def test_reset_gives_state_and_a_different_goal():
    env = BitFlipEnv(3)
    for seed in range(20):
        obs, info = env.reset(seed=seed)
        assert obs.dtype == np.float32 and obs.shape == (6,)
        assert not np.array_equal(obs[:3], obs[3:])
        assert info["is_success"] is False


def test_action_flips_one_bit_and_reward_is_minus_one_until_the_goal():
    env = BitFlipEnv(4)
    obs, _ = env.reset(seed=1)
    state, goal = obs[:4].copy(), obs[4:].copy()
    differing = np.flatnonzero(state != goal)
    for i, bit in enumerate(differing):
        obs, reward, terminated, truncated, info = env.step(int(bit))
        state[bit] = 1 - state[bit]
        np.testing.assert_array_equal(obs[:4], state)
        np.testing.assert_array_equal(obs[4:], goal)  # the goal never moves
        last = i == len(differing) - 1
        assert reward == (0.0 if last else -1.0)
        assert terminated is last and info["is_success"] is last
        assert not truncated


def test_time_limit_truncates_after_n_steps_without_terminating():
    env = BitFlipEnv(3)
    obs, _ = env.reset(seed=0)
    # flipping one bit back and forth never reaches a goal that differs from the start in another bit
    same = np.flatnonzero(obs[:3] == obs[3:])
    bit = int(same[0]) if same.size else 0
    outcomes = [env.step(bit) for _ in range(3)]
    for _, reward, terminated, _, info in outcomes:
        assert reward == -1.0 and not terminated and not info["is_success"]
    assert [o[3] for o in outcomes] == [False, False, True]


def test_compute_reward_is_vectorised():
    achieved = np.array([[0, 1, 1], [1, 1, 1]], dtype=np.float32)
    desired = np.array([[0, 1, 1], [1, 0, 1]], dtype=np.float32)
    np.testing.assert_array_equal(BitFlipEnv.compute_reward(achieved, desired), [0.0, -1.0])
    layout = BitFlipEnv(3).goal_layout()
    obs = np.arange(6)
    np.testing.assert_array_equal(obs[layout.achieved], [0, 1, 2])
    np.testing.assert_array_equal(obs[layout.desired], [3, 4, 5])
