"""Stable-Baselines3's own DQN on a shipped zoo config, seed for seed beside per's runs of it.

rl-baselines3-zoo's DQN scores (CartPole-v1 500, Acrobot-v1 -76.6, MountainCar-v0 -100.9) are each ONE trained
agent's final model, evaluated for ~150,000 steps ("not a quantitative benchmark as it corresponds to only one
run", its benchmark.md). per's zoo check (docs/results/) compares an IQM over 10 seeds with them. Where per falls
short, this tells "the zoo's own algorithm and hyperparameters, over seeds, do the same" from "per does worse":
it trains N seeds of SB3's DQN with the hyperparameters of ``configs/<env>_uniform.yaml`` (the zoo's dqn.yml),
evaluates each final model as per does (``train.eval_episodes`` greedy episodes), and prints both sets of final
evaluations with their IQM, a 95% bootstrap CI, the number of seeds within 5% of the zoo's score, and
Mann-Whitney and KS p. Needs the ``bench`` extra (``pip install -e '.[bench]'``).

    python benchmarks/zoo_reference.py --env cartpole --seeds 10 --per-runs runs/zoo [--workers 2]

A config that SB3's DQN cannot express (double DQN, a loss other than Huber, a replay other than uniform) is
refused: the reference must be the same algorithm.
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

ZOO_SCORES = {"CartPole-v1": 500.0, "Acrobot-v1": -76.6, "MountainCar-v0": -100.9}


def sb3_kwargs(cfg) -> dict:
    """SB3 ``DQN`` keyword arguments for a per config; ValueError where SB3's DQN is another algorithm."""
    if cfg.agent.double_dqn or cfg.agent.loss != "huber" or cfg.replay.kind != "uniform":
        raise ValueError("SB3's DQN is Huber loss, no double DQN, uniform replay: this config is not that")
    return dict(
        learning_rate=cfg.agent.lr,
        buffer_size=cfg.replay.capacity,
        learning_starts=cfg.train.learning_starts,
        batch_size=cfg.replay.batch_size,
        tau=1.0,
        gamma=cfg.agent.gamma,
        train_freq=cfg.train.train_freq,
        gradient_steps=cfg.train.gradient_steps,
        target_update_interval=cfg.agent.target_update_period,
        exploration_fraction=cfg.train.eps_fraction,
        exploration_initial_eps=cfg.train.eps_start,
        exploration_final_eps=cfg.train.eps_end,
        max_grad_norm=cfg.agent.max_grad_norm,
        policy_kwargs={"net_arch": list(cfg.agent.hidden_sizes)},
    )


def train_one(job: tuple[str, int]) -> tuple[int, float, float]:
    """(seed, mean return of the final model's greedy evaluation, training wall seconds) for one SB3 run."""
    import gymnasium as gym
    import torch
    from stable_baselines3 import DQN
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor

    from per_cli.config import load_config
    from per_cli.envs import resolve_env_id

    config, seed = job
    torch.set_num_threads(1)
    cfg = load_config(config)
    env_id = resolve_env_id(cfg.env.id)
    t0 = time.perf_counter()
    model = DQN("MlpPolicy", gym.make(env_id), seed=seed, device="cpu", verbose=0, **sb3_kwargs(cfg))
    model.learn(total_timesteps=cfg.train.total_steps)
    wall = time.perf_counter() - t0
    eval_env = Monitor(gym.make(env_id))  # SB3 reads the episodes' returns from it
    eval_env.reset(seed=10_000 + seed)
    mean, _ = evaluate_policy(model, eval_env, n_eval_episodes=cfg.train.eval_episodes, deterministic=True)
    return seed, float(mean), wall


def per_evaluations(runs: Path, env_id: str) -> list[float]:
    """Final greedy evaluations (summary.json ``eval_return_mean``) of per's completed uniform runs of env_id."""
    from per_cli.envs import resolve_env_id

    values = []
    for path in sorted(runs.glob("*/summary.json")):
        summary = json.loads(path.read_text())
        if (
            summary.get("status") == "completed"
            and summary.get("replay") == "uniform"
            and resolve_env_id(str(summary.get("env"))) == env_id
            and summary.get("eval_return_mean") is not None
        ):
            values.append(float(summary["eval_return_mean"]))
    return values


def describe(name: str, values: list[float], zoo: float) -> str:
    from per_cli.analysis.stats import stratified_bootstrap_ci

    point, lo, hi = stratified_bootstrap_ci([np.asarray(values)])
    near = sum(v >= zoo - 0.05 * abs(zoo) for v in values)
    return (
        f"{name:>5}: n {len(values):3d}  IQM {point:8.1f} [{lo:8.1f}, {hi:8.1f}]  within 5% of the zoo's {zoo}: "
        f"{near}/{len(values)}  per seed: {', '.join(f'{v:.1f}' for v in values)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", required=True, help="cartpole, acrobot or mountaincar")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--per-runs", type=Path, help="a grid directory holding per's runs of the same config")
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()

    from scipy.stats import ks_2samp, mannwhitneyu

    from per_cli.config import load_config
    from per_cli.config.shipped import shipped_root
    from per_cli.envs import resolve_env_id

    config = str(shipped_root() / f"{args.env}_uniform.yaml")
    env_id = resolve_env_id(load_config(config).env.id)
    zoo = ZOO_SCORES[env_id]
    jobs = [(config, seed) for seed in range(1, args.seeds + 1)]
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        results = sorted(pool.map(train_one, jobs))
    sb3 = [mean for _, mean, _ in results]
    print(f"{args.env}_uniform.yaml on {env_id}; SB3 training wall s per run: "
          f"{', '.join(f'{w:.0f}' for _, _, w in results)}")  # fmt: skip
    print(describe("SB3", sb3, zoo))
    if args.per_runs:
        ours = per_evaluations(args.per_runs, env_id)
        print(describe("per", ours, zoo))
        if ours:
            mw, ks = mannwhitneyu(ours, sb3).pvalue, ks_2samp(ours, sb3).pvalue
            print(f"per vs SB3: Mann-Whitney p {mw:.3f}, KS p {ks:.3f}")


if __name__ == "__main__":
    main()
