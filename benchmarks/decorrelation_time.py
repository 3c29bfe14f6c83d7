"""How fast each env's state forgets itself: why consecutive states can be as spread as independent draws.

For a batch of B consecutive states, state diversity (per_cli/train/measures/iid.py) is the window's variance over the
memory's, per feature. It is small only when the state changes little within B steps. This measures, on long
random-policy rollouts of the real Gymnasium envs (the memory early in training), per feature:

* the decorrelation time: the first lag at which the autocorrelation falls below 1/e;
* the variance share of a window of B consecutive states: mean ddof-1 variance of B-step windows over the
  whole rollout's variance, i.e. the state diversity a `none` batch of B newest transitions would read.

    python benchmarks/decorrelation_time.py [--steps 20000] [--batch 64]
"""

from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np

ENVS = {"CartPole-v1": 200, "Acrobot-v1": 500, "MountainCar-v0": 200}


def rollout(env_id: str, limit: int, steps: int, seed: int) -> list[np.ndarray]:
    """Episodes of a uniformly random policy, as arrays (T, d), until ``steps`` states in all."""
    env = gym.make(env_id, max_episode_steps=limit)
    rng = np.random.default_rng(seed)
    episodes, total, episode = [], 0, 0
    while total < steps:
        obs, _ = env.reset(seed=seed + episode)
        states, done = [obs], False
        while not done:
            obs, _, terminated, truncated, _ = env.step(int(rng.integers(env.action_space.n)))
            states.append(obs)
            done = terminated or truncated
        episodes.append(np.asarray(states, dtype=np.float64))
        total += len(states)
        episode += 1
    return episodes


def decorrelation_time(episodes: list[np.ndarray], max_lag: int = 300) -> np.ndarray:
    """Per feature, the first lag whose within-episode autocorrelation is below 1/e (max_lag if none)."""
    x = np.concatenate(episodes)
    mean, var = x.mean(axis=0), x.var(axis=0)
    out = np.full(x.shape[1], max_lag)
    for k in range(x.shape[1]):
        for lag in range(1, max_lag):
            pairs = [(e[:-lag, k], e[lag:, k]) for e in episodes if len(e) > lag]
            if not pairs:
                break
            a, b = np.concatenate([p[0] for p in pairs]), np.concatenate([p[1] for p in pairs])
            if np.mean((a - mean[k]) * (b - mean[k])) / var[k] < 1 / np.e:
                out[k] = lag
                break
    return out


def window_share(episodes: list[np.ndarray], batch: int) -> np.ndarray:
    """Per feature: mean variance of B consecutive states (across episode ends, as a memory holds them)."""
    x = np.concatenate(episodes)
    windows = np.lib.stride_tricks.sliding_window_view(x, batch, axis=0)[::batch]  # (n, d, B)
    return windows.var(axis=2, ddof=1).mean(axis=0) / x.var(axis=0, ddof=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    print(f"random policy, {args.steps} states per env, windows of B = {args.batch} consecutive states")
    print("| env | decorrelation time per feature (steps) | window variance share per feature | mean share |")
    print("| --- | --- | --- | ---: |")
    for env_id, limit in ENVS.items():
        episodes = rollout(env_id, limit, args.steps, seed=1)
        tau, share = decorrelation_time(episodes), window_share(episodes, args.batch)
        print(f"| {env_id} (limit {limit}) | {', '.join(map(str, tau))} | "
              f"{', '.join(f'{s:.2f}' for s in share)} | {share.mean():.2f} |")  # fmt: skip


if __name__ == "__main__":
    main()
