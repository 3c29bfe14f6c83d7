"""Agent steps per second of a Pong training run on this machine, with prioritized and with uniform replay.

    python benchmarks/atari_throughput.py [--steps 3000] [--learning-starts 1000] [--device cpu]
                                          [--kinds prioritized,uniform] [--threads N] [--repeats 3]

Runs ``per``'s own ``Trainer`` on ``configs/pong_per.yaml`` (and the same with ``replay.kind=uniform``):
the real ALE pipeline, the frame storage, the Nature CNN, double DQN, one update of batch 32 per 4 agent
steps, no evaluation. It prints, per kind, the steps/s of the learning phase (after ``learning_starts``,
which is what a long run spends its time in), of the collection phase before it (env + acting only), and
the run's overall steps/s (medians over ``--repeats`` runs, the kinds interleaved so that a change of
the machine's load hits both alike); then the ratio prioritized / uniform. One agent step = 4 ALE frames.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]


class Marks:
    """A progress sink that records (step, time) at each update the loop reports (every 1000 steps)."""

    def __init__(self) -> None:
        self.marks: list[tuple[int, float]] = [(0, time.perf_counter())]

    def update(self, step: int, info: dict) -> None:
        self.marks.append((step, time.perf_counter()))

    def rate(self, lo: int, hi: int) -> float:
        inside = [(s, t) for s, t in self.marks if lo <= s <= hi]
        (s0, t0), (s1, t1) = inside[0], inside[-1]
        return (s1 - s0) / (t1 - t0)


def measure(kind: str, args, run_dir: Path) -> dict:
    from per_cli.config import load_config
    from per_cli.train.loop.trainer import Trainer

    overrides = [
        f"replay.kind={kind}",
        f"train.total_steps={args.steps}",
        f"train.learning_starts={args.learning_starts}",
        "train.eval_episodes=0",
        "train.checkpoint_every=0",
        "replay.capacity=100000",
    ]
    cfg = load_config(REPO / "configs" / "pong_per.yaml", overrides, device=args.device, seed=1)
    marks = Marks()
    trainer = Trainer(cfg, progress=marks)
    if args.threads:
        torch.set_num_threads(args.threads)
    marks.marks = [(0, time.perf_counter())]
    summary = trainer.run(run_dir)
    return {
        "kind": kind,
        "collect": marks.rate(0, args.learning_starts),
        "learn": marks.rate(args.learning_starts, args.steps),
        "overall": summary["steps_per_second"],
        "updates": summary["updates"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--learning-starts", type=int, default=1000, help="a multiple of 1000")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--kinds", default="prioritized,uniform")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--runs-dir", type=Path, default=Path("/tmp/per-atari-throughput"))
    args = parser.parse_args()

    import os
    import shutil

    shutil.rmtree(args.runs_dir, ignore_errors=True)
    load_before = " ".join(f"{x:.1f}" for x in os.getloadavg())
    kinds = args.kinds.split(",")
    runs = [measure(kind, args, args.runs_dir / f"{kind}-{r}") for r in range(args.repeats) for kind in kinds]
    results = []
    for kind in kinds:
        mine = [r for r in runs if r["kind"] == kind]
        results.append(
            {"kind": kind, "updates": mine[0]["updates"]}
            | {key: float(np.median([r[key] for r in mine])) for key in ("collect", "learn", "overall")}
        )
    print(f"Pong, {args.device}, torch threads {args.threads or torch.get_num_threads()}, {args.steps} agent steps, "
          f"learning from step {args.learning_starts} (1 update of batch 32 per 4 steps), "
          f"median of {args.repeats}; load average before: {load_before}")  # fmt: skip
    print(f"{'replay':<12} {'collect steps/s':>16} {'learn steps/s':>14} {'overall':>9} {'updates':>8}")
    for r in results:
        print(f"{r['kind']:<12} {r['collect']:>16.1f} {r['learn']:>14.1f} {r['overall']:>9.1f} {r['updates']:>8}")
    by_kind = {r["kind"]: r for r in results}
    if {"prioritized", "uniform"} <= set(by_kind):
        ratio = by_kind["prioritized"]["learn"] / by_kind["uniform"]["learn"]
        print(f"prioritized / uniform (learning phase): {ratio:.2f}")


if __name__ == "__main__":
    main()
