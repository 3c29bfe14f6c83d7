"""What one env step costs, per env: the env as a run makes it, against batched alternatives (issue 15).

A cohort steps each member's own Gymnasium env, made as a solo run makes it (`per_cli.envs.make_env`: the
registered env with its wrappers), so every seed keeps its solo run's env and RNG stream. This prints, in CPU
µs per env step (random actions, episodes reset as they end), for CartPole-v1, Acrobot-v1 and MountainCar-v0:

* ``per (make_env)``: the env a run steps;
* ``unwrapped``: the bare env class, without Gymnasium's wrappers (their share of the cost);
* ``vector entry point``: Gymnasium's own batched env (`gym.make_vec(..., vectorization_mode="vector_entry_point")`,
  numpy over S sub-envs) where the env has one; it takes ONE seed for all sub-envs;
* ``envpool``: EnvPool's batched C++ env (`envpool.make(..., env_type="gymnasium")`) when it is installed
  (`pip install envpool`, not a dependency of per); env i is seeded with seed + i;

each at S = 1 and S = 100 envs, per env step, and the ratio to ``per (make_env)``.

    python benchmarks/env_step.py [--steps 3000] [--sizes 1,100]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from per_cli.config import EnvConfig  # noqa: E402
from per_cli.envs import make_env  # noqa: E402

ENVS = {"cartpole": "CartPole-v1", "acrobot": "Acrobot-v1", "mountaincar": "MountainCar-v0"}


def _looped(envs: list, steps: int) -> float:
    """CPU µs per env step of ``envs`` stepped one after another (a cohort's way)."""
    rng = np.random.default_rng(0)
    n_actions = int(envs[0].action_space.n)
    for i, env in enumerate(envs):
        env.reset(seed=i + 1)
    start = time.process_time()
    for _ in range(steps):
        actions = rng.integers(0, n_actions, size=len(envs))
        for env, action in zip(envs, actions, strict=True):
            _, _, terminated, truncated, _ = env.step(int(action))
            if terminated or truncated:
                env.reset()
    return (time.process_time() - start) / (steps * len(envs)) * 1e6


def _batched(env, size: int, steps: int) -> float:
    """CPU µs per env step of a batched env of ``size`` sub-envs that resets them itself."""
    rng = np.random.default_rng(0)
    n_actions = int(env.single_action_space.n) if hasattr(env, "single_action_space") else int(env.action_space.n)
    env.reset(seed=1)
    start = time.process_time()
    for _ in range(steps):
        env.step(rng.integers(0, n_actions, size=size).astype(np.int32))
    return (time.process_time() - start) / (steps * size) * 1e6


def measure(label: str, env_id: str, size: int, steps: int) -> dict[str, float | None]:
    rows: dict[str, float | None] = {}
    rows["per (make_env)"] = _looped([make_env(EnvConfig(id=label), seed=i + 1) for i in range(size)], steps)
    rows["unwrapped"] = _looped([gym.make(env_id).unwrapped for _ in range(size)], steps)
    try:
        vec = gym.make_vec(env_id, num_envs=size, vectorization_mode="vector_entry_point")
    except (gym.error.Error, ValueError, TypeError):  # no vector entry point for this env
        rows["vector entry point"] = None
    else:
        rows["vector entry point"] = _batched(vec, size, steps)
    try:
        import envpool
    except ImportError:
        rows["envpool"] = None
    else:
        rows["envpool"] = _batched(envpool.make(env_id, env_type="gymnasium", num_envs=size, seed=1), size, steps)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=3000, help="steps of every env")
    parser.add_argument("--sizes", default="1,100", help="numbers of envs stepped together")
    args = parser.parse_args()
    print("CPU µs per env step (ratio: per (make_env) / this); - : not available")
    for label, env_id in ENVS.items():
        for size in (int(s) for s in args.sizes.split(",")):
            rows = measure(label, env_id, size, max(args.steps // size, 50) if size > 1 else args.steps)
            base = rows["per (make_env)"]
            cells = [f"{name} {us:7.2f} ({base / us:5.1f}x)" if us else f"{name} -" for name, us in rows.items()]
            print(f"{env_id:15s} S={size:<4d} " + " | ".join(cells))


if __name__ == "__main__":
    main()
