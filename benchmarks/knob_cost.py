"""What each causal-study knob costs per learning step, against the plain memories, in one invocation.

A learning step's replay work is: ``memory.sample(B, β)`` (the draw and the gathered batch), the IS-weight rule
(``rl/is_weights.apply_rule``, the one place the loop applies it) and ``memory.update_priorities`` with the
update's TD errors. This times that cycle on a full memory of N CartPole-sized transitions for each variant and
its plain baseline, in interleaved blocks (a rotating order, so a burst of load hits them alike), in this
thread's CPU time, and prints each variant's median per-cycle µs and its ratio to its baseline (the median of the
paired blocks' ratios). The knobs measured so far (issue 34's target: <= 1.2x):

* ``replay.chunk`` 8 on ``uniform``, ``prioritized`` and ``rank``: B / 8 run starts drawn by the kind's rule,
  then expanded to runs of 8 (``replay/sampler.draw_batches``);
* ``replay.is_weights`` ``batch_mean`` and ``off`` on ``prioritized`` (the paper's ``memory_max`` is the
  baseline, which applies nothing);
* ``replay.n_step`` 3 on ``uniform`` and ``prioritized`` (the returns summed at the draw; target <= 1.5x);
* kind ``lap`` against ``prioritized`` (``pal`` draws as ``uniform``: its replay cycle is uniform's).

The network update is not in that cycle: this is the knob's own cost, the strictest ratio (a whole learning step
of the seed001 protocol adds the ~15 µs update to every variant alike). LAP's and PAL's other half is their loss,
which is the update's: a second table times one update (the seed001 CartPole agent, a ReLU MLP of 128 under the
numba engine, batch B) with each loss against Huber and MSE, and a whole learning step (replay cycle + update) of
``lap`` against ``prioritized`` and of ``pal`` against ``uniform``, in the same interleaved blocks.

    python benchmarks/knob_cost.py [--size 10000] [--batch 64] [--rounds 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from replay import _clock, time_cell  # noqa: E402

from per_cli.config import load_config  # noqa: E402
from per_cli.replay import make_replay  # noqa: E402
from per_cli.rl.is_weights import apply_rule  # noqa: E402
from per_cli.rl.losses import TDLoss  # noqa: E402

LOSSES = [("huber", None), ("mse", None), ("lap", "huber"), ("pal", "mse")]  # (loss, the loss it is timed against)

VARIANTS = [  # (name, kind, extra settings, IS rule, its baseline)
    ("uniform", "uniform", [], "memory_max", None),
    ("uniform chunk 8", "uniform", ["replay.chunk=8"], "memory_max", "uniform"),
    ("uniform n_step 3", "uniform", ["replay.n_step=3"], "memory_max", "uniform"),
    ("prioritized", "prioritized", [], "memory_max", None),
    ("prioritized chunk 8", "prioritized", ["replay.chunk=8"], "memory_max", "prioritized"),
    ("prioritized n_step 3", "prioritized", ["replay.n_step=3"], "memory_max", "prioritized"),
    ("lap", "lap", [], "memory_max", "prioritized"),
    ("prioritized is_weights batch_mean", "prioritized", [], "batch_mean", "prioritized"),
    ("prioritized is_weights off", "prioritized", [], "off", "prioritized"),
    ("rank", "rank", [], "memory_max", None),
    ("rank chunk 8", "rank", ["replay.chunk=8"], "memory_max", "rank"),
]


def build(kind: str, sets: list[str], size: int, batch: int):
    """A memory of ``size`` transitions, full, with random priorities (what make_replay builds for a run)."""
    cfg = load_config(None, [f"replay.kind={kind}", f"replay.capacity={size}", f"replay.batch_size={batch}", *sets])
    memory = make_replay(cfg, (4,), np.float32, seed=1)
    rng = np.random.default_rng(0)
    for i in range(size):
        memory.add(rng.normal(size=4), int(rng.integers(2)), 1.0, rng.normal(size=4), i % 200 == 199, False)
    memory.update_priorities(np.arange(size), rng.exponential(size=size).astype(np.float32))
    return memory


def cycle(memory, batch: int, rule: str, tds: list[np.ndarray]):
    def run(i: int) -> None:
        drawn = memory.sample(batch, 0.5)
        apply_rule(drawn.weights, rule)
        memory.update_priorities(drawn.indices, tds[i % len(tds)])

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--block-s", type=float, default=0.2)
    args = parser.parse_args()
    rng = np.random.default_rng(2)
    tds = [rng.normal(size=args.batch).astype(np.float32) for _ in range(64)]
    cycles = {name: cycle(build(kind, sets, args.size, args.batch), args.batch, rule, tds)
              for name, kind, sets, rule, _ in VARIANTS}  # fmt: skip
    for run in cycles.values():  # warm-up: kernels loaded from numba's cache, pages touched (else the first
        for i in range(500):  # variant timed pays it: 94 µs a cycle in its first block against 21 after)
            run(i)
    samples = time_cell(cycles, args.rounds, args.block_s, _clock("cpu"))
    print(f"N = {args.size:,}, B = {args.batch}, {args.rounds} rounds, CPU time; load {os.getloadavg()[0]:.2f}")
    print(f"{'variant':<36} {'µs/cycle':>9} {'x baseline':>11}")
    for name, _, _, _, base in VARIANTS:
        us = statistics.median(samples[name]) * 1e6
        ratio = "" if base is None else f"{statistics.median(np.divide(samples[name], samples[base])):.2f}"
        print(f"{name:<36} {us:>9.1f} {ratio:>11}")
    loss_table(args, tds)


def agent_update(loss: str, batch: int):
    """One update of the seed001 CartPole agent with ``loss`` on a fixed batch, as a cycle."""
    from per_cli.rl.engines import make_agent

    base = "huber" if loss == "lap" else "mse" if loss == "pal" else loss  # (agent.loss; lap/pal are their kinds')
    seed001 = Path(__file__).resolve().parents[1] / "configs" / "seed001" / "cartpole_uniform.yaml"
    cfg = load_config(seed001, [f"agent.loss={base}"])
    agent = make_agent(cfg.agent, (4,), 2, torch.device("cpu"), td_loss=TDLoss(loss))
    memory = build("uniform", [], 1000, batch)
    batches = [memory.sample(batch, 0.5) for _ in range(16)]
    return lambda i: agent.learn(batches[i % len(batches)])


def learning_step(kind: str, loss: str, batch: int, size: int, tds: list[np.ndarray]):
    """A whole learning step: the kind's replay cycle, then the update with its loss."""
    replay, update = cycle(build(kind, [], size, batch), batch, "memory_max", tds), agent_update(loss, batch)

    def run(i: int) -> None:
        replay(i)
        update(i)

    return run


def loss_table(args, tds: list[np.ndarray]) -> None:
    cycles = {f"update, {loss} loss": agent_update(loss, args.batch) for loss, _ in LOSSES}
    steps = [("step: prioritized + huber", "prioritized", "huber", None),
             ("step: lap + lap loss", "lap", "lap", "step: prioritized + huber"),
             ("step: uniform + mse", "uniform", "mse", None),
             ("step: pal + pal loss", "uniform", "pal", "step: uniform + mse")]  # fmt: skip
    for name, kind, loss, _ in steps:
        cycles[name] = learning_step(kind, loss, args.batch, args.size, tds)
    for run in cycles.values():
        for i in range(300):
            run(i)
    samples = time_cell(cycles, args.rounds, args.block_s, _clock("cpu"))
    print(f"\n{'update / learning step':<36} {'µs':>9} {'x baseline':>11}")
    rows = [(f"update, {loss} loss", None if base is None else f"update, {base} loss") for loss, base in LOSSES]
    rows += [(name, base) for name, _, _, base in steps]
    for name, base in rows:
        us = statistics.median(samples[name]) * 1e6
        ratio = "" if base is None else f"{statistics.median(np.divide(samples[name], samples[base])):.2f}"
        print(f"{name:<36} {us:>9.1f} {ratio:>11}")


if __name__ == "__main__":
    main()
