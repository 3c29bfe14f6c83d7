"""The torch engine's cohort update: one stacked call over S members (per_cli/rl/engines/stacked.py) against S
sequential per-member torch updates (each agent's own ``learn``), measured in the same invocation.

    nice -n 10 python benchmarks/stacked_update.py                 # S = 1, 10, 100; the MLP and the MinAtar CNN
    nice -n 10 python benchmarks/stacked_update.py --sizes 10 --updates 200

Networks: the seed notebook's MLP (4-128-2, batch 64, Adam, Huber, clipping at 10) and the MinAtar paper's CNN on
Breakout's (10, 10, 4) grids (3 actions, batch 32, centered RMSProp). Each case times about ``--updates`` member
updates per path (at least one call), after one warm-up call, and prints µs per member update in CPU time
(time.process_time) and wall time, and the ratio sequential / stacked (> 1: stacked is faster).
"""

from __future__ import annotations

import argparse
import copy
import time

import numpy as np
import torch

from per_cli.config import AgentConfig
from per_cli.replay import Batch
from per_cli.rl.agent import DQNAgent
from per_cli.rl.engines.stacked import StackedEngine

CASES = {
    "mlp 4-128-2 b64 adam": (AgentConfig(hidden_sizes=[128], engine="torch"), (4,), 2, 64),
    "minatar cnn b32 rmsprop": (
        AgentConfig(network="minatar", optimizer="rmsprop", lr=2.5e-4, engine="torch"),
        (10, 10, 4),
        3,
        32,
    ),
}


def make_batch(rng: np.random.Generator, obs_shape: tuple[int, ...], n_actions: int, size: int) -> Batch:
    grid = len(obs_shape) == 3  # MinAtar: 0/1 bool channels, as replay stores them

    def obs():
        return rng.random((size, *obs_shape)) < 0.1 if grid else rng.normal(size=(size, *obs_shape)).astype(np.float32)

    zeros = np.zeros(size, np.int64)
    return Batch(
        obs=obs(), actions=rng.integers(n_actions, size=size), rewards=rng.normal(size=size).astype(np.float32),
        next_obs=obs(), terminated=(rng.random(size) < 0.05).astype(np.float32),
        weights=np.ones(size, np.float32), indices=np.arange(size), **{
            f: zeros for f in Batch.__dataclass_fields__ if f not in
            ("obs", "actions", "rewards", "next_obs", "terminated", "weights", "indices")
        },
    )  # fmt: skip


def timed(fn, calls: int) -> tuple[float, float]:
    fn()  # warm-up (the optimizer state is created on the first step)
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(calls):
        fn()
    return time.process_time() - cpu, time.perf_counter() - wall


def measure(name: str, size: int, updates: int) -> None:
    cfg, obs_shape, n_actions, batch_size = CASES[name]
    rng = np.random.default_rng(0)
    agents = []
    for seed in range(size):
        torch.manual_seed(seed)
        agents.append(DQNAgent(cfg, obs_shape, n_actions, torch.device("cpu")))
    solo = [copy.deepcopy(a) for a in agents]
    batches = [make_batch(rng, obs_shape, n_actions, batch_size) for _ in range(size)]
    engine = StackedEngine(agents)
    which = list(range(size))
    calls = max(1, updates // size)
    seq_cpu, seq_wall = timed(lambda: [a.learn(b) for a, b in zip(solo, batches, strict=True)], calls)
    stk_cpu, stk_wall = timed(lambda: engine.learn(which, batches), calls)
    per = 1e6 / (calls * size)
    print(
        f"{name:24s} S={size:4d}  sequential {seq_cpu * per:8.0f} µs cpu {seq_wall * per:8.0f} µs wall | "
        f"stacked {stk_cpu * per:8.0f} µs cpu {stk_wall * per:8.0f} µs wall | "
        f"sequential/stacked {seq_cpu / stk_cpu:5.2f}x cpu {seq_wall / stk_wall:5.2f}x wall"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,10,100", help="cohort sizes S, comma separated")
    parser.add_argument("--updates", type=int, default=400, help="member updates timed per path and case")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: one core, as a grid worker)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)  # as the training loop does
    print(f"torch {torch.__version__}, {args.threads} thread(s), CPU; µs per member update")
    for name in CASES:
        for size in (int(s) for s in args.sizes.split(",")):
            measure(name, size, args.updates)


if __name__ == "__main__":
    main()
