import numpy as np
import pytest

from per_cli.config import EnvConfig
from per_cli.envs import make_env
from per_cli.envs.cliffwalk import BlindCliffwalk


def test_true_q_by_hand():
    # n = 2: gamma = 1/2; state 0: right is action 0, state 1: right is action 1 and pays 1
    np.testing.assert_allclose(BlindCliffwalk(2).true_q(), [[0.5, 0.0], [0.0, 1.0]])
    # n = 3: gamma = 2/3
    np.testing.assert_allclose(BlindCliffwalk(3).true_q(), [[4 / 9, 0.0], [0.0, 2 / 3], [1.0, 0.0]])


def test_dynamics():
    mdp = BlindCliffwalk(3)
    assert mdp.step(0, 0) == (1, 0.0, False)  # right: on
    assert mdp.step(0, 1) == (0, 0.0, True)  # wrong: the end, nothing
    assert mdp.step(1, 1) == (2, 0.0, False)
    assert mdp.step(2, 0) == (2, 1.0, True)  # right at the end of the chain: the reward


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8])
def test_memory_has_every_sequence_and_one_reward(n):
    mdp = BlindCliffwalk(n)
    t = mdp.all_sequences()
    assert len(t) == 2 ** (n + 1) - 2 == mdp.memory_size()
    rewarded = np.flatnonzero(t.rewards)
    assert rewarded.size == 1
    i = rewarded[0]
    assert t.states[i] == n - 1 and t.actions[i] == mdp.right_action(n - 1) and t.terminated[i]
    # the true Q-values are a fixed point of the Q-learning update on every stored transition
    q = mdp.true_q()
    target = t.rewards + mdp.gamma * (~t.terminated) * q[t.next_states].max(axis=1)
    np.testing.assert_allclose(q[t.states, t.actions], target, atol=1e-12)


@pytest.mark.parametrize("n", [2, 4, 6])
def test_memory_matches_running_each_sequence(n):
    mdp = BlindCliffwalk(n)
    expected = []
    for code in range(2**n):
        state = 0
        for step in range(n):
            next_state, reward, done = mdp.step(state, (code >> step) & 1)
            expected.append((state, (code >> step) & 1, reward, next_state, done))
            if done:
                break
            state = next_state
    t = mdp.all_sequences()
    got = list(zip(t.states.tolist(), t.actions.tolist(), t.rewards.tolist(), t.next_states.tolist(),
                   t.terminated.tolist(), strict=True))
    assert got == expected


def test_gymnasium_env():
    env = make_env(EnvConfig(id="cliffwalk", kwargs={"n_states": 3}), seed=0)
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(obs, [1, 0, 0])
    for action in (0, 1):
        obs, reward, terminated, truncated, info = env.step(action)
        assert reward == 0.0 and not terminated and not info["is_success"]
    obs, reward, terminated, truncated, info = env.step(0)
    assert reward == 1.0 and terminated and info["is_success"]
    env.reset()
    _, reward, terminated, _, info = env.step(1)  # wrong in state 0
    assert reward == 0.0 and terminated and not info["is_success"]
