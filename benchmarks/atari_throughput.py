"""Agent steps per second of a Pong training run on this machine, with prioritized and with uniform replay.

    python benchmarks/atari_throughput.py [--steps 3000] [--learning-starts 1000] [--device cpu]
                                          [--kinds prioritized,uniform] [--threads N] [--repeats 3]
                                          [--config pong_per] [--set KEY=VALUE ...]
                                          [--variant NAME:KEY=VALUE,KEY=VALUE ...] [--eps E] [--profile NAME]

Runs ``per``'s own training loop on ``configs/pong_per.yaml`` (``--config``: another shipped config, e.g.
``pong_fast_per``: one update per agent step; ``--set``: overrides) and the same with ``replay.kind=uniform``:
the real ALE pipeline, the frame storage, the Nature CNN, double DQN, no evaluation. It prints, per kind, the
steps/s of the learning phase (after ``learning_starts``, which is what a long run spends its time in), of the
collection phase before it (env + acting only), and the run's overall steps/s (medians over ``--repeats`` runs,
the kinds interleaved so that a change of the machine's load hits both alike); then the ratio prioritized /
uniform. One agent step = 4 ALE frames. Each ``--variant`` (e.g. ``fast:replay.device_frames=true,
train.priority_lag=1``) runs too, interleaved with the config as given (``base``): a change against its baseline
in one invocation.

``--eps E``: ε fixed at E for the whole run (``train.eps_start`` = ``train.eps_end`` = E). By default ε follows
the config's schedule, which is still near 1 in a short run: nearly every action is random and the greedy action
(a forward pass, and on a GPU the host waiting for the update queued before it) is hardly measured; a long run
spends most of its steps near ``eps_end``, which ``--eps 0.01`` measures.

``--profile NAME``: after the timed runs, one more run of variant NAME (the first kind) whose learning phase runs
under cProfile (not timed: the profiler slows it); its 25 functions of most own time are printed before the table.
On a GPU the host's waits show as their own time in the calls that wait (an action's ``item``, a result's
``synchronize``).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]


class Marks:
    """A progress sink that records (step, time) at each update the loop reports (every 1000 steps); with a
    profiler, it profiles from step ``profile_from`` on."""

    def __init__(self, profiler: cProfile.Profile | None = None, profile_from: int = 0) -> None:
        self.marks: list[tuple[int, float]] = [(0, time.perf_counter())]
        self.profiler, self.profile_from = profiler, profile_from

    def update(self, step: int, info: dict) -> None:
        self.marks.append((step, time.perf_counter()))
        if self.profiler is not None and step >= self.profile_from:
            self.profiler.enable()
            self.profiler = None  # (on until the run ends)

    def rate(self, lo: int, hi: int) -> float:
        inside = [(s, t) for s, t in self.marks if lo <= s <= hi]
        (s0, t0), (s1, t1) = inside[0], inside[-1]
        return (s1 - s0) / (t1 - t0)


def measure(
    kind: str, variant: tuple[str, list[str]], args, run_dir: Path, profiler: cProfile.Profile | None = None
) -> dict:
    from per_cli.config import load_config
    from per_cli.config.shipped import resolve_config
    from per_cli.train.loop.trainer import build_member, run_member

    overrides = [
        *args.set,
        *variant[1],
        f"replay.kind={kind}",
        f"train.total_steps={args.steps}",
        f"train.learning_starts={args.learning_starts}",
        "train.eval_episodes=0",
        "train.checkpoint_every=0",
        f"replay.capacity={args.capacity}",
        *([] if args.eps is None else [f"train.eps_start={args.eps}", f"train.eps_end={args.eps}"]),
    ]
    cfg = load_config(resolve_config(args.config).path, overrides, device=args.device, seed=1)
    marks = Marks(profiler, args.learning_starts)
    member = build_member(cfg, progress=marks)
    if args.threads:
        torch.set_num_threads(args.threads)
    marks.marks = [(0, time.perf_counter())]
    summary = run_member(member, run_dir)
    if profiler is not None:
        profiler.disable()
    return {
        "kind": kind,
        "variant": variant[0],
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
    parser.add_argument("--config", default="pong_per", help="a shipped config (or a path)")
    parser.add_argument("--capacity", type=int, default=100_000, help="replay.capacity")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="an override of every run")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME:KEY=VALUE,...",
                        help="also runs with these overrides, interleaved with the config as given")  # fmt: skip
    parser.add_argument("--eps", type=float, default=None, help="ε fixed at this value (default: the config's)")
    parser.add_argument("--profile", metavar="NAME", help="one more run of this variant, its learning under cProfile")
    args = parser.parse_args()
    if args.eps is not None and not 0.0 <= args.eps <= 1.0:
        parser.error(f"--eps {args.eps}: ε is a probability, between 0 and 1")
    variants = [("base", [])] + [(v.split(":", 1)[0], v.split(":", 1)[1].split(",")) for v in args.variant]
    profiled = [v for v in variants if v[0] == args.profile]
    if args.profile is not None and not profiled:
        parser.error(f"--profile {args.profile}: no such variant ({', '.join(v[0] for v in variants)})")

    import os
    import shutil

    shutil.rmtree(args.runs_dir, ignore_errors=True)
    load_before = " ".join(f"{x:.1f}" for x in os.getloadavg())
    kinds = args.kinds.split(",")
    runs = [
        measure(kind, variant, args, args.runs_dir / f"{kind}-{variant[0]}-{r}")
        for r in range(args.repeats)
        for variant in variants
        for kind in kinds
    ]
    if profiled:
        profiler = cProfile.Profile()
        measure(kinds[0], profiled[0], args, args.runs_dir / "profiled", profiler)
        print(f"profile: variant {args.profile}, {kinds[0]}, the learning phase")
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    results = []
    for name, _ in variants:
        for kind in kinds:
            mine = [r for r in runs if r["kind"] == kind and r["variant"] == name]
            results.append(
                {"kind": kind, "variant": name, "updates": mine[0]["updates"]}
                | {key: float(np.median([r[key] for r in mine])) for key in ("collect", "learn", "overall")}
            )
    print(f"Pong ({args.config}{' ' + ' '.join(args.set) if args.set else ''}), {args.device}, torch threads "
          f"{args.threads or torch.get_num_threads()}, {args.steps} agent steps, learning from step "
          f"{args.learning_starts}, ε {'schedule' if args.eps is None else args.eps}, median of {args.repeats}; "
          f"load average before: {load_before}")  # fmt: skip
    for name, overrides in variants[1:]:
        print(f"variant {name}: {' '.join(overrides)}")
    print(f"{'variant':<10} {'replay':<12} {'collect steps/s':>16} {'learn steps/s':>14} {'overall':>9} {'updates':>8}")
    for r in results:
        print(f"{r['variant']:<10} {r['kind']:<12} {r['collect']:>16.1f} {r['learn']:>14.1f} {r['overall']:>9.1f} "
              f"{r['updates']:>8}")  # fmt: skip
    for name, _ in variants:
        by_kind = {r["kind"]: r for r in results if r["variant"] == name}
        if {"prioritized", "uniform"} <= set(by_kind):
            ratio = by_kind["prioritized"]["learn"] / by_kind["uniform"]["learn"]
            print(f"{name}: prioritized / uniform (learning phase): {ratio:.2f}")


if __name__ == "__main__":
    main()
