from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from per_cli.config import ConfigError, load_config
from per_cli.envs.bitflip import BitFlipEnv
from per_cli.envs.goals import GoalLayout
from per_cli.replay import make_replay, replay_label
from per_cli.replay.memory import ReplayMemory
from per_cli.replay.samplers import PrioritizedSampler, RankSampler, UniformSampler
from per_cli.replay.storage.ring import TransitionStorage
from per_cli.replay.writers.hindsight import HindsightWriter

REPO_CONFIGS = Path(__file__).resolve().parents[2] / "configs"

# observation = [achieved, desired]; after step t (0-based) the agent has achieved goal t + 1, so a stored
# goal names the step that reached it
COUNTER = GoalLayout(
    achieved=slice(0, 1),
    desired=slice(1, 2),
    compute_reward=lambda a, d: -np.any(a != d, axis=-1).astype(np.float32),
)
GOAL = 99.0  # the episode's real goal, never reached


def memory(strategy: str, k: int = 4, capacity: int = 10_000, seed: int = 0, layout=COUNTER, obs_dim=2):
    storage = TransitionStorage(capacity, (obs_dim,), np.float32)
    rng = np.random.default_rng(seed)
    writer = HindsightWriter(layout, strategy, k, np.random.default_rng(seed + 1), storage)
    return ReplayMemory(storage, UniformSampler(storage, rng), writer)


def run_episode(mem: ReplayMemory, length: int, truncate: bool = True) -> None:
    for t in range(length):
        last = t == length - 1
        obs, next_obs = np.array([t, GOAL], np.float32), np.array([t + 1, GOAL], np.float32)
        mem.add(obs, t % 3, -1.0, next_obs, False, last and truncate)


def stored(mem: ReplayMemory):
    s = mem.storage
    n = len(mem)
    return s.obs[:n], s.actions[:n], s.rewards[:n], s.next_obs[:n], s.terminated[:n].astype(bool)


def copies_of(mem):
    """(step t, relabelled goal) of every relabelled copy."""
    obs, _, _, next_obs, _ = stored(mem)
    relabelled = obs[:, 1] != GOAL
    return obs[relabelled, 0].astype(int), obs[relabelled, 1].astype(int)


def test_episode_is_stored_at_its_end_with_k_copies_each():
    mem = memory("future", k=4)
    run_episode(mem, 5, truncate=False)
    assert len(mem) == 0 and mem.writer.pending == 5  # not sampleable until the episode ends
    mem.add(np.array([5, GOAL], np.float32), 0, -1.0, np.array([6, GOAL], np.float32), False, True)
    assert len(mem) == 6 * (1 + 4) and mem.writer.pending == 0
    obs, actions, rewards, next_obs, terminated = stored(mem)
    originals = obs[:, 1] == GOAL
    assert originals.sum() == 6
    np.testing.assert_array_equal(obs[originals, 0], np.arange(6))  # stored as they happened, in order


@pytest.mark.parametrize("strategy", ["final", "future", "episode", "random"])
def test_relabelled_rewards_and_terminals_match_the_new_goal(strategy):
    mem = memory(strategy, k=3)
    for length in (4, 7, 2):
        run_episode(mem, length)
    obs, actions, rewards, next_obs, terminated = stored(mem)
    np.testing.assert_array_equal(obs[:, 1], next_obs[:, 1])  # the same goal on both sides of a transition
    np.testing.assert_array_equal(obs[:, 0] + 1, next_obs[:, 0])  # the transition itself is untouched
    expected = COUNTER.compute_reward(next_obs[:, :1], next_obs[:, 1:])
    np.testing.assert_array_equal(rewards, expected)
    np.testing.assert_array_equal(terminated, rewards == 0.0)
    assert (rewards == 0).any()  # some copy reaches its new goal


def test_final_uses_the_last_state_once_per_transition():
    mem = memory("final", k=4)
    run_episode(mem, 5)
    steps, goals = copies_of(mem)
    np.testing.assert_array_equal(steps, np.arange(5))  # one copy each, whatever k says
    assert (goals == 5).all()  # s_T of a 5-step episode


def test_future_uses_states_reached_at_or_after_the_step():
    mem = memory("future", k=8)
    run_episode(mem, 6)
    steps, goals = copies_of(mem)
    assert len(steps) == 6 * 8
    assert ((goals >= steps + 1) & (goals <= 6)).all()
    assert set(goals[steps == 0]) > {1, 6} or len(set(goals[steps == 0])) > 2  # not stuck on one state
    assert (goals[steps == 5] == 6).all()  # the last step has one future state


def test_episode_uses_any_state_of_the_episode():
    mem = memory("episode", k=16)
    run_episode(mem, 5)
    steps, goals = copies_of(mem)
    assert ((goals >= 1) & (goals <= 5)).all()
    assert (goals[steps == 4] < 5).any()  # past states too, unlike future


def test_random_draws_achieved_goals_from_the_memory_too():
    mem = memory("random", k=4)
    run_episode(mem, 3)
    run_episode(mem, 3)
    run_episode(mem, 3)
    steps, goals = copies_of(mem)
    assert ((goals >= 1) & (goals <= 3)).all()  # every achieved goal so far is one of 1..3


def test_bitflip_relabelling_uses_the_envs_reward():
    env = BitFlipEnv(5)
    mem = memory("future", k=4, layout=env.goal_layout(), obs_dim=10)
    rng = np.random.default_rng(0)
    for episode in range(3):
        obs, _ = env.reset(seed=episode)
        done = False
        while not done:
            action = int(rng.integers(5))
            next_obs, reward, terminated, truncated, _ = env.step(action)
            mem.add(obs, action, reward, next_obs, terminated, truncated)
            obs, done = next_obs, terminated or truncated
    o, a, r, n, term = stored(mem)
    np.testing.assert_array_equal(r, env.compute_reward(n[:, :5], n[:, 5:]))
    np.testing.assert_array_equal(term, r == 0)
    np.testing.assert_array_equal(o[:, 5:], n[:, 5:])
    flipped = np.flatnonzero(o[:, :5] != n[:, :5])  # exactly the action's bit changed in each transition
    assert len(flipped) == len(o)


@pytest.mark.parametrize(("kind", "sampler_cls"), [("prioritized", PrioritizedSampler), ("rank", RankSampler)])
def test_hindsight_over_prioritized_replay(kind, sampler_cls):
    cfg = load_config(
        None,
        ["env.id=bitflip", "env.n_bits=4", f"replay.kind={kind}", "replay.her_strategy=future", "replay.capacity=1000"],
    )
    assert replay_label(cfg.replay) == f"{kind}+her"
    env = BitFlipEnv(4)
    mem = make_replay(cfg, (8,), np.float32, seed=0, env=env)
    assert isinstance(mem.writer, HindsightWriter) and isinstance(mem.sampler, sampler_cls)
    obs, _ = env.reset(seed=0)
    for t in range(4):
        next_obs, reward, terminated, truncated, _ = env.step(t)
        mem.add(obs, t, reward, next_obs, terminated, truncated)
        obs = next_obs
        if terminated or truncated:
            break
    assert len(mem) > 0
    batch = mem.sample(4, beta=0.5)
    mem.update_priorities(batch.indices, np.full(4, 3.0))
    assert mem.stats()["priority_max"] > 1.0 and mem.stats()["her_relabelled"] > 0


def test_copies_count_in_the_episode_they_were_made_from():
    mem = memory("future", k=3)
    for length in (4, 2, 5):
        run_episode(mem, length)
    episodes = mem.storage.episode_ids[: len(mem)]
    np.testing.assert_array_equal(episodes, np.repeat([0, 1, 2], [4 * 4, 2 * 4, 5 * 4]))
    assert mem.episodes_held() == 3


def test_relabelling_state_round_trips_with_the_memory():
    a = memory("future", k=2)
    run_episode(a, 3)
    run_episode(a, 4, truncate=False)  # an episode still open
    b = memory("future", k=2)
    b.load_state_dict(a.state_dict())
    for mem in (a, b):
        mem.add(np.array([9, GOAL], np.float32), 0, -1.0, np.array([10, GOAL], np.float32), False, True)
    np.testing.assert_array_equal(a.storage.obs, b.storage.obs)
    assert a.stats() == b.stats() and b.writer.episodes == 2


def test_priority_defaults_follow_the_sampler():
    from per_cli.replay import resolve_config

    rank = resolve_config(load_config(None, ["env.id=bitflip", "replay.kind=rank", "replay.her_strategy=final"])).replay
    prop = resolve_config(load_config(None, ["env.id=bitflip", "replay.kind=prioritized", "replay.her_strategy=final"]))
    prop = prop.replay
    assert (rank.alpha, rank.beta0) == (0.7, 0.5) and (prop.alpha, prop.beta0) == (0.6, 0.4)


def test_replay_label_is_the_kind_without_relabelling():
    assert replay_label(load_config(None, ["replay.kind=combined"]).replay) == "combined"


def test_config_errors():
    with pytest.raises(ConfigError, match=r"replay.kind: hindsight .*replay.her_strategy: future"):
        load_config(None, ["env.id=bitflip", "replay.kind=hindsight"])
    with pytest.raises(ConfigError, match="replay.her_sampler"):
        load_config(None, ["env.id=bitflip", "replay.her_sampler=uniform"])  # gone: an unknown key
    with pytest.raises(ConfigError, match="replay.her_strategy"):
        load_config(None, ["env.id=bitflip", "replay.her_strategy=past"])
    with pytest.raises(ConfigError, match="initial_priority"):
        load_config(None, ["env.id=bitflip", "replay.her_strategy=future", "replay.initial_priority=td_error"])
    cfg = load_config(None, ["env.id=cartpole", "replay.her_strategy=future"])
    with pytest.raises(ConfigError, match="goal-conditioned"):
        make_replay(cfg, (4,), np.float32, seed=0, env=gym.make("CartPole-v1"))


def test_short_bitflip_run_with_hindsight_learns(tmp_path):
    from per_cli.train.loop.trainer import build_member, run_member

    cfg = load_config(
        REPO_CONFIGS / "bitflip_her.yaml",
        [
            "env.n_bits=6",
            "train.total_steps=2000",
            "train.learning_starts=200",
            "train.eval_every=100000",
            "train.eval_episodes=50",
            "replay.capacity=20000",
            "replay.batch_size=32",
            "agent.hidden_sizes=[64]",
            "log.tensorboard=false",
            "metrics.correlation=false",
        ],
    )

    summary = run_member(build_member(cfg, device="cpu"), tmp_path / "run")
    # uniform replay with the same budget: about 0.1 (random goals are rarely hit)
    assert summary["eval_success_rate"] >= 0.8
    assert summary["replay"] == "uniform+her"  # replay_label: the sampler's kind, relabelling on
    assert "success" in (tmp_path / "run" / "metrics.csv").read_text().splitlines()[0]
