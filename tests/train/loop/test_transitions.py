"""What the learner stores of an env step (per_cli/train/loop/transitions.py): ``env.done_reward`` (with
``env.done_reward_except_return``) and ``env.truncation_terminates``, checked on real Gymnasium envs against the
seed notebook's own loop replayed step by step on the same env, seed and actions."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from per_cli.config import load_config
from per_cli.envs import make_env
from per_cli.replay.store import RingStore
from per_cli.train.loop.cohort import Cohort, cohort_configs
from per_cli.train.loop.member_data import MemberData
from per_cli.train.loop.trainer import build_member, run_member
from per_cli.train.loop.transitions import StoreRule

from ...conftest import CONFIGS

ASIS = CONFIGS / "seed001-asis"
SHORT = ["train.eval_episodes=0", "log.every=10", "agent.hidden_sizes=[16]"]


def _notebook_episodes(cfg, actions: np.ndarray) -> tuple[list, list, list]:
    """The seed notebook's loop (rlcode's ``run_episodes``) on a fresh env of ``cfg`` with the same seed, taking
    ``actions``: per step (stored reward, stored done), and per episode its printed score. Old gym's ``done`` is
    terminated or truncated."""
    env = make_env(cfg.env, cfg.seed)
    env.reset(seed=cfg.seed)
    rewards, dones, scores, score = [], [], [], 0.0
    for action in actions.tolist():
        _, reward, terminated, truncated, _ = env.step(action)
        done = terminated or truncated
        reward = reward if not done or score == 499 else -10  # the notebook's line, as written
        rewards.append(reward)
        dones.append(done)
        score += reward
        if done:
            scores.append(score if score == 500 else score + 10)
            score = 0.0
            env.reset()
    env.close()
    return rewards, dones, scores


def _stored(trainer: MemberData) -> tuple[np.ndarray, ...]:
    s = trainer.memory.storage
    assert s.added == s.size  # nothing dropped: slot k is transition k
    n = s.size
    return s.actions[:n].copy(), s.rewards[:n].copy(), s.terminated[:n].copy(), s.truncated[:n].copy()


def _returns(run_dir) -> list[float]:
    return [float(row["return"]) for row in csv.DictReader((run_dir / "metrics.csv").open())]


@pytest.mark.parametrize("kind", ["none", "uniform", "combined", "per", "rank"])
def test_on_short_cartpole_episodes_the_stored_rewards_and_flags_are_the_notebooks(tmp_path, kind):
    """The fidelity test: configs/seed001-asis on CartPole with a 12-step limit, so the few episodes end both ways
    (a fall and the time limit). Every stored reward and terminal flag is the notebook's; the logged return is
    the env's own, which is the notebook's printed score plus the done step's env reward (1)."""
    extra = ["env.max_episode_steps=12", "train.total_episodes=6", "replay.capacity=400", *SHORT]
    cfg = load_config(ASIS / f"cartpole_{kind}.yaml", extra, device="cpu")
    trainer = build_member(cfg)
    run_member(trainer, tmp_path / "run")
    actions, rewards, terminated, truncated = _stored(trainer)
    want_rewards, want_dones, scores = _notebook_episodes(cfg, actions)
    np.testing.assert_array_equal(rewards, np.array(want_rewards, dtype=np.float32))
    np.testing.assert_array_equal(terminated, np.array(want_dones, dtype=np.float32))
    assert truncated.any() and (terminated.astype(bool) & ~truncated).any()  # both endings happened
    assert set(rewards[terminated == 1].tolist()) == {-10.0} and set(rewards[terminated == 0].tolist()) == {1.0}
    returns = _returns(tmp_path / "run")
    assert len(returns) == 6 and returns == [s + 1 for s in scores]


def test_the_rules_are_off_by_default_and_the_env_reward_and_flags_are_stored(tmp_path):
    """configs/seed001 (no rule): the same short episodes keep the env's +1 and bootstrap from a time-limit end."""
    extra = ["env.max_episode_steps=12", "train.total_episodes=6", "replay.capacity=400", *SHORT]
    cfg = load_config(CONFIGS / "seed001" / "cartpole_uniform.yaml", extra, device="cpu")
    trainer = build_member(cfg)
    run_member(trainer, tmp_path / "run")
    _, rewards, terminated, truncated = _stored(trainer)
    assert set(rewards.tolist()) == {1.0}
    assert (truncated & (terminated == 0)).any()  # a time-limit end that bootstraps


@pytest.mark.parametrize(("except_return", "last"), [(-4.0, -1.0), (-3.0, -10.0), (None, -10.0), ("off", -1.0)])
def test_the_done_reward_spares_a_done_step_whose_return_before_it_is_the_exception(tmp_path, except_return, last):
    """MountainCar (-1 a step) with a 5-step limit: the return before each done step is -4. The exception at -4
    keeps the env's -1 (the notebook's ``score == 499``); any other (or none) stores -10. Every other step keeps
    -1, and the logged return is the env's own, -5."""
    extra = [
        "env.max_episode_steps=5", "train.total_episodes=3", "replay.capacity=100", "replay.batch_size=8", *SHORT,
        f"env.done_reward_except_return={'null' if except_return is None else except_return}",
    ]  # fmt: skip
    if except_return == "off":  # no done reward: the exception idles, the env's -1 is stored
        extra[-1:] = ["env.done_reward=null", "env.done_reward_except_return=-3"]
    cfg = load_config(ASIS / "mountaincar_uniform.yaml", extra, device="cpu")
    trainer = build_member(cfg)
    run_member(trainer, tmp_path / "run")
    _, rewards, terminated, _ = _stored(trainer)
    assert rewards.tolist() == [-1.0, -1.0, -1.0, -1.0, last] * 3
    assert terminated.tolist() == [0.0, 0.0, 0.0, 0.0, 1.0] * 3  # truncation_terminates
    assert _returns(tmp_path / "run") == [-5.0, -5.0, -5.0]


def _one(rule: StoreRule, reward: float, terminated: bool, truncated: bool, return_before: float) -> tuple:
    """The rule for one step, as its docstring states it: the reference ``many`` is checked against."""
    if rule.done_reward is not None and (terminated or truncated) and return_before != rule.except_return:
        reward = rule.done_reward
    return reward, bool(terminated or (truncated and rule.truncation_terminates))


@pytest.mark.parametrize(
    "rule", [StoreRule(-10.0, 499.0, True), StoreRule(-10.0, None, False), StoreRule(None, None, True),
             StoreRule(5.0, -3.0, False)],
)  # fmt: skip
def test_many_is_one_row_by_row(rule):
    """The vector form gives each row what the rule gives one step."""
    rng = np.random.default_rng(0)
    n = 400
    rewards = rng.choice([-1.0, 0.0, 1.0], size=n).astype(np.float32)
    terminated, truncated = rng.random(n) < 0.3, rng.random(n) < 0.3
    returns = rng.choice([-3.0, 0.0, 499.0, 12.0], size=n)
    got_rewards, got_ends = rule.many(rewards, terminated, truncated, returns)
    rows = zip(rewards.tolist(), terminated.tolist(), truncated.tolist(), returns.tolist(), strict=True)
    want = [_one(rule, *row) for row in rows]
    assert got_rewards.tolist() == [w[0] for w in want] and got_ends.tolist() == [w[1] for w in want]
    assert got_rewards.dtype == rewards.dtype and got_ends.dtype == terminated.dtype


@pytest.mark.parametrize("backend", ["gymnasium", "envpool"])
def test_a_cohort_stores_what_each_member_stores_alone(tmp_path, backend):
    """The rule in a cohort: every member's memory is its solo run's. The rule is applied to the step's rows at
    once (steps.Steps.step_envs, StoreRule.many, checked row by row against the rule for one step above), whether the
    rings store them in one compiled call (asserted for EnvPool's) or each memory its own. EnvPool is an optional
    extra: that case is skipped without it."""
    extra = ["env.max_episode_steps=12", "train.total_episodes=5", "replay.capacity=400", *SHORT]
    if backend == "envpool":
        pytest.importorskip("envpool")
        extra += ["env.backend=envpool", "agent.engine=numba"]
    cfgs = cohort_configs(load_config(ASIS / "cartpole_uniform.yaml", extra, device="cpu"), [1, 2])
    cohort = Cohort(cfgs)
    if backend == "envpool":
        assert type(cohort.steps().sampling.storer) is RingStore  # the rings' one compiled store
    cohort.run([tmp_path / f"c{c.seed}" for c in cfgs])
    for cfg, member in zip(cfgs, cohort.members, strict=True):
        solo = build_member(cfg)
        run_member(solo, tmp_path / f"s{cfg.seed}")
        for a, b in zip(_stored(member), _stored(solo), strict=True):
            np.testing.assert_array_equal(a, b)
        assert (_stored(member)[1] == -10.0).any()
