"""The numba engine's kernels (per_cli/rl/engines) in this tree against another copy of the package, measured in
one invocation: alternating child processes, each importing one copy, in CPU time (time.process_time).

    git archive 7fbaec4 per_cli | tar -x -C /tmp/kbase        # the base to compare with
    nice -n 10 python benchmarks/update_kernel.py --base /tmp/kbase [--rounds 5] [--size 100]

The network and settings are the seed notebook's (configs/seed001/cartpole_uniform.yaml: MLP 4-128-2, batch 64,
MSE, Adam, no clipping). Each child measures, after a warm-up call:

* ``update solo``: one ``MLPEngine.update`` (agent.numba_engine, S = 1), µs per call;
* ``update S``: one ``CohortEngine.update`` over S members, µs per member update;
* ``greedy solo`` / ``greedy S``: a greedy action (``MLPEngine.greedy_action``; ``CohortEngine.greedy`` per member);
* ``td solo`` / ``td S``: the TD error of one new transition (``MLPEngine.td_errors``; ``CohortEngine.td_errors``
  per member), which ``replay.initial_priority: td_error`` computes at every insertion.

The parent prints the median over rounds per copy, base / this tree (> 1: this tree is faster), and the updates'
GFLOP/s (the count of benchmarks/cohort_throughput.py's ``update_flops``). A copy is a directory holding
``per_cli``; each child asserts that it imported the copy it was given.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "seed001" / "cartpole_uniform.yaml"
BATCH, DIMS = 64, (4, 128, 2)


def _per_call(fn, calls: int, repeats: int) -> float:
    """Best-of-``repeats`` CPU µs per call of ``fn()`` (``calls`` calls per repeat)."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        t = time.process_time()
        for _ in range(calls):
            fn()
        best = min(best, (time.process_time() - t) / calls * 1e6)
    return best


def child(size: int) -> dict[str, float]:
    """The timings of the copy of per_cli on sys.path (see the module docstring)."""
    import numpy as np
    import torch

    import per_cli
    from per_cli.config import load_config
    from per_cli.rl.engines import make_agent
    from per_cli.rl.engines.cohort import CohortEngine
    from per_cli.train.loop.cohort import cohort_configs

    print(f"# {per_cli.__file__}", file=sys.stderr)
    cfg = load_config(CONFIG, ["agent.engine=numba"], device="cpu")
    cfgs = cohort_configs(cfg, range(1, size + 1))
    agents = [make_agent(c.agent, (DIMS[0],), DIMS[-1], torch.device("cpu")) for c in cfgs]
    solo, cohort = agents[0].numba_engine, CohortEngine([a.numba_engine for a in agents])
    rng = np.random.default_rng(0)

    def arrays(n):
        shape = (n, BATCH)
        return (
            rng.normal(size=(*shape, DIMS[0])).astype(np.float32), rng.integers(0, DIMS[-1], size=shape),
            rng.normal(size=shape).astype(np.float32), rng.normal(size=(*shape, DIMS[0])).astype(np.float32),
            (rng.random(shape) < 0.05).astype(np.float32), np.ones(shape, np.float32),
        )  # fmt: skip

    # updates cycle through a few batches (one batch over and over would drive its gradients towards zero)
    solo_batches = itertools.cycle([[a[0] for a in arrays(1)] for _ in range(8)])
    cohort_batches = itertools.cycle([arrays(size) for _ in range(4)])
    many, which = next(cohort_batches), list(range(size))
    first = next(solo_batches)
    rows = [[a[k, :1] for k in range(size)] for a in many[:5]]
    obs1 = [o[0] for o in rows[0]]
    out = {
        "update solo": _per_call(lambda: solo.update(*next(solo_batches)), 200, 5),
        f"update S={size}": _per_call(lambda: cohort.update(which, *next(cohort_batches)), 5, 5) / size,
        "greedy solo": _per_call(lambda: solo.greedy_action(first[0][0]), 2000, 5),
        f"greedy S={size}": _per_call(lambda: cohort.greedy(which, obs1), 50, 5) / size,
        "td solo": _per_call(lambda: solo.td_errors(*(a[:1] for a in first[:5])), 2000, 5),
        f"td S={size}": _per_call(lambda: cohort.td_errors(which, *rows), 50, 5) / size,
    }
    return out


def update_flops() -> int:
    """FLOPs of one update of the notebook's network (as benchmarks/cohort_throughput.py counts them)."""
    macs = sum(i * o for i, o in zip(DIMS[:-1], DIMS[1:], strict=True))
    return 2 * BATCH * (3 * macs + DIMS[1] * DIMS[2]) + 10 * (macs + sum(DIMS[1:]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=Path, help="directory holding the per_cli to compare with")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        sys.path.insert(0, str(args.child))
        print(json.dumps(child(args.size)))
        return
    copies = {"base": args.base.resolve(), "this": ROOT} if args.base else {"this": ROOT}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in copies}
    for _ in range(args.rounds):
        for name, path in copies.items():
            cmd = [sys.executable, __file__, "--child", str(path), "--size", str(args.size)]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
            assert str(path) in proc.stderr, proc.stderr  # the child imported the copy it was given
            runs[name].append(json.loads(proc.stdout.strip().splitlines()[-1]))
    flops = update_flops()
    header = f"{'CPU µs per member call':24s}" + "".join(f"{name:>10s}" for name in copies)
    print(header + ("  base/this" if "base" in copies else ""))
    for key in runs["this"][0]:
        med = {name: statistics.median(r[key] for r in runs[name]) for name in copies}
        line = f"{key:24s}" + "".join(f"{med[name]:10.2f}" for name in copies)
        if "base" in copies:
            ratios = [b[key] / t[key] for b, t in zip(runs["base"], runs["this"], strict=True)]
            line += f"  {statistics.median(ratios):8.2f}x"
        if key.startswith("update"):
            line += "   " + " ".join(f"{name} {flops / med[name] / 1e3:.1f} GFLOP/s" for name in copies)
        print(line)


if __name__ == "__main__":
    main()
