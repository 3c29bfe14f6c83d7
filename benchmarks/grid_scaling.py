"""Wall time of one CartPole grid under several executors: local --workers 1 and 2, and Ray.

    python benchmarks/grid_scaling.py                       # 2 kinds x 6 seeds x 5000 steps, all modes
    python benchmarks/grid_scaling.py --modes local:1,local:2 --steps 2000

Each mode runs the same 12-run grid with `per grid` in a fresh directory (a real subprocess, as a user would
run it). Columns:
  wall_s    the whole command, Python start to exit
  runs_s    sum of the runs' own wall times (summary.json: training only)
  ideal_s   runs_s / workers: the wall time with perfect packing and no overhead
  overhead  wall_s - ideal_s: process/Ray start-up, imports in the workers, scheduling, file transfer
  speedup   local:1's wall_s / this mode's wall_s
The load average before and after each mode is printed: on a shared machine it decides the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_mode(mode: str, args: argparse.Namespace, root: Path) -> dict:
    backend, _, workers = mode.partition(":")
    runs = root / mode.replace(":", "-")
    cmd = [sys.executable, "-m", "per_cli", "grid", "--envs", "cartpole", "--replays", args.replays]
    cmd += ["--seeds", f"1-{args.seeds}", "--runs-dir", str(runs), "--name", "g", "--backend", backend]
    cmd += ["--workers", workers, "--set", f"train.total_steps={args.steps}", "--set", "log.tensorboard=true"]
    cmd += ["--configs-dir", str(REPO / "configs")]
    load_before = os.getloadavg()
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{mode}: per grid exited {done.returncode}\n{done.stderr[-3000:]}")
    summaries = [json.loads(p.read_text()) for p in (runs / "g").glob("*/summary.json")]
    runs_s = sum(s["wall_time_s"] for s in summaries)
    return {
        "mode": mode,
        "runs": len(summaries),
        "wall_s": wall,
        "runs_s": runs_s,
        "ideal_s": runs_s / int(workers),
        "load": (load_before[0], os.getloadavg()[0]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="local:1,local:2,ray:1,ray:2", help="backend:workers, comma-separated")
    parser.add_argument("--replays", default="uniform,prioritized")
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--steps", type=int, default=5000)
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores; load average at start {os.getloadavg()}", flush=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="grid-bench-") as tmp:
        for mode in args.modes.split(","):
            results.append(run_mode(mode, args, Path(tmp)))
            r = results[-1]
            print(f"  {mode}: {r['wall_s']:.1f} s (load {r['load'][0]:.1f} -> {r['load'][1]:.1f})", flush=True)
    base = next((r["wall_s"] for r in results if r["mode"] == "local:1"), None)
    print(f"\n{'mode':9s} {'runs':>4s} {'wall_s':>7s} {'runs_s':>7s} {'ideal_s':>7s} {'overhead':>8s} "
          f"{'speedup':>7s}  load before -> after")  # fmt: skip
    for r in results:
        speedup = f"{base / r['wall_s']:.2f}x" if base else "-"
        print(
            f"{r['mode']:9s} {r['runs']:4d} {r['wall_s']:7.1f} {r['runs_s']:7.1f} {r['ideal_s']:7.1f} "
            f"{r['wall_s'] - r['ideal_s']:8.1f} {speedup:>7s}  {r['load'][0]:.1f} -> {r['load'][1]:.1f}"
        )


if __name__ == "__main__":
    main()
