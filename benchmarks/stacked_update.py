"""The torch engine's cohort update: one stacked call over S members (per_cli/rl/engines/stacked.py) against S
sequential per-member torch updates (each agent's own ``learn``), measured in the same invocation.

    nice -n 10 python benchmarks/stacked_update.py                 # S = 1, 10, 100; the MLP and the MinAtar CNN
    nice -n 10 python benchmarks/stacked_update.py --sizes 10,100 --crossover
    nice -n 10 python benchmarks/stacked_update.py --acting        # the members' greedy actions instead

Networks: the seed notebook's MLP (4-128-2, batch 64, Adam, Huber, clipping at 10) and the MinAtar paper's CNN on
Breakout's (10, 10, 4) grids (3 actions, batch 32, centered RMSProp); ``--crossover`` adds 4-256-256-2 and
4-512-512-2 MLPs (where stacking stops paying on the CPU: ``CPU_MAX_PARAMS`` in per_cli/rl/engines/stacked.py).
Each case runs interleaved rounds of about ``--updates`` member updates per path, after a warm-up call, and prints
the median CPU µs (time.process_time) per member update and the median ratio sequential / stacked (> 1: stacked is
faster). The last column is a stacked call over all members but one (a member that left the cohort): its rows are
gathered and copied back, the cost of the subset path against the in-place one.
"""

from __future__ import annotations

import argparse
import copy
import time

import numpy as np
import torch

from per_cli.config import AgentConfig
from per_cli.replay import Batch
from per_cli.rl.engines import make_agent
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

CROSSOVER = {
    f"mlp 4-{h}-{h}-2 b64 adam": (AgentConfig(hidden_sizes=[h, h], engine="torch"), (4,), 2, 64) for h in (256, 512)
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


def cpu_time(fn) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def measure(name: str, size: int, updates: int, acting: bool = False) -> None:
    """Interleaved rounds (one sequential pass over the S members, then one stacked call, ...), so that the load of
    the machine hits both paths alike; medians over the rounds, per member update (``acting``: per member's greedy
    action, each agent's own ``greedy_action`` against the stacked engine's one ``greedy`` call)."""
    cfg, obs_shape, n_actions, batch_size = CASES[name]
    rng = np.random.default_rng(0)
    agents = []
    for seed in range(size):
        torch.manual_seed(seed)
        agents.append(make_agent(cfg, obs_shape, n_actions, torch.device("cpu")))
    solo = [copy.deepcopy(a) for a in agents]
    batches = [make_batch(rng, obs_shape, n_actions, batch_size) for _ in range(size)]
    engine = StackedEngine(agents)
    which = list(range(size))
    paths = {
        "sequential": (lambda: [a.learn(b) for a, b in zip(solo, batches, strict=True)], size),
        "stacked": (lambda: engine.learn(which, batches), size),
    }
    if acting:
        obs = np.stack([b.obs[0] for b in batches])  # (S, ...): each member's observation in hand
        paths = {
            "sequential": (lambda: [a.greedy_action(o) for a, o in zip(solo, obs, strict=True)], size),
            "stacked": (lambda: engine.greedy(which, obs), size),
        }
    elif size > 1:  # one member gone: the others' rows are gathered and copied back (index_select, index_copy_)
        paths["subset"] = (lambda: engine.learn(which[1:], batches[1:]), size - 1)
    for fn, _ in paths.values():
        fn()  # warm-up
    times: dict[str, list[float]] = {path: [] for path in paths}
    for _ in range(max(5, updates // size)):
        for path, (fn, members) in paths.items():
            times[path].append(cpu_time(fn) * 1e6 / members)
    med = {path: float(np.median(t)) for path, t in times.items()}
    ratio = float(np.median(np.divide(times["sequential"], times["stacked"])))
    line = (
        f"{('greedy ' if acting else '') + name:24s} S={size:4d}  "
        f"sequential {med['sequential']:6.0f} µs | stacked {med['stacked']:6.0f} µs | "
        f"sequential/stacked {ratio:5.2f}x"
    )
    if "subset" in med:
        line += f" | stacked, {size - 1} of {size}: {med['subset']:6.0f} µs"
    print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,10,100", help="cohort sizes S, comma separated")
    parser.add_argument("--updates", type=int, default=400, help="member updates timed per path and case")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: one core, as a grid worker)")
    parser.add_argument("--crossover", action="store_true", help="also larger MLPs (where stacking stops paying)")
    parser.add_argument("--acting", action="store_true", help="the members' greedy actions, not their updates")
    args = parser.parse_args()
    if args.crossover:
        CASES.update(CROSSOVER)
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)  # as the training loop does
    what = "greedy action" if args.acting else "update"
    print(f"torch {torch.__version__}, {args.threads} thread(s), CPU; CPU µs per member {what} (medians)")
    for name in CASES:
        for size in (int(s) for s in args.sizes.split(",")):
            measure(name, size, args.updates, args.acting)


if __name__ == "__main__":
    main()
