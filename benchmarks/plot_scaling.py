"""Wall time and peak memory of `per plot` on N synthetic run directories (issue 12: a 1,500-run directory).

    python benchmarks/plot_scaling.py                      # N = 1500: 3 envs x 5 kinds x 100 seeds
    python benchmarks/plot_scaling.py --runs 150 --workers 2

The runs look like the notebook's study (`per grid --configs-dir configs/seed001 --seeds 1-100`): per run,
`config.yaml`, `summary.json`, `metrics.csv` and a real TensorBoard event file (torch's SummaryWriter, via
tests/runfactory.py) with 300 episodes (return, length) and 300 logged points of 10 update tags. Writing 1,500
event files one by one takes minutes, so `--templates` distinct runs are written and the others copy one
(the files are real either way; only their values repeat). `per plot` then runs as a user runs it, in a fresh
subprocess. Printed: wall time, CPU time (user + system of `per plot` and its loader workers: on a shared
machine the wall time depends on the load, the CPU time much less), peak RSS of the largest process
(RUSAGE_CHILDREN), and the number of files written.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.runfactory import write_run  # noqa: E402

ENVS = ("cartpole", "acrobot", "mountaincar")
ENV_IDS = {"cartpole": "CartPole-v1", "acrobot": "Acrobot-v1", "mountaincar": "MountainCar-v0"}
KINDS = ("none", "uniform", "combined", "prioritized", "rank")
UPDATE_TAGS = ("td_error/mean", "td_error/max", "td_error/median", "td_error/std", "losses/td_loss",
               "losses/q_values", "replay/sample_age", "replay/is_weight_mean", "iid/state_diversity",
               "iid/episode_diversity")  # fmt: skip
EPISODES, POINTS, STEPS = 300, 300, 30_000


def template(path: Path, env: str, kind: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    steps = np.sort(rng.choice(np.arange(1, STEPS), EPISODES, replace=False))
    returns = [(int(s), float(v)) for s, v in zip(steps, np.cumsum(rng.normal(0.5, 5, EPISODES)), strict=True)]
    points = np.linspace(100, STEPS, POINTS).astype(int)
    updates = {tag: [(int(s), float(v)) for s, v in zip(points, rng.gamma(2.0, 1.0, POINTS), strict=True)]
               for tag in UPDATE_TAGS}  # fmt: skip
    write_run(path, env=env, replay=kind, seed=seed, returns=returns, updates=updates, total_steps=STEPS,
              overrides={"train.total_steps": STEPS})  # fmt: skip


def make_runs(root: Path, n: int, templates: int) -> None:
    combos = [(e, k) for e in ENVS for k in KINDS]
    seeds = -(-n // len(combos))
    made: list[Path] = []
    count = 0
    for seed in range(1, seeds + 1):
        for env, kind in combos:
            if count == n:
                return
            path = root / f"{env}__{kind}__s{seed}"
            if len(made) < templates:
                template(path, env, kind, seed)
                made.append(path)
            else:
                shutil.copytree(made[count % templates], path)
                summary = json.loads((path / "summary.json").read_text())
                summary.update(env=ENV_IDS.get(env, env), replay=kind, seed=seed, final_return_mean=float(seed % 17))
                (path / "summary.json").write_text(json.dumps(summary))  # config.yaml: the template's (same kind)
            count += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1500)
    parser.add_argument("--templates", type=int, default=30, help="a multiple of 15 (3 envs x 5 kinds)")
    parser.add_argument("--workers", type=int, default=None, help="per plot --workers (default: its own)")
    parser.add_argument("--keep", type=Path, default=None, help="write the runs here and keep them")
    args = parser.parse_args()
    tmp = None
    if args.keep is None:
        tmp = tempfile.TemporaryDirectory(prefix="plot-bench-")
        root = Path(tmp.name)
    else:
        root = args.keep
        root.mkdir(parents=True, exist_ok=True)
    try:
        started = time.perf_counter()
        if not any(root.iterdir()):
            make_runs(root, args.runs, args.templates)
        made = time.perf_counter() - started
        n = sum(1 for _ in root.glob("*/summary.json"))
        size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) / 2**20
        print(f"{n} runs ({size:.0f} MiB) ready in {made:.1f} s; {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
        shutil.rmtree(root / "plots", ignore_errors=True)
        cmd = [sys.executable, "-m", "per_cli", "plot", str(root)]
        if args.workers:
            cmd += ["--workers", str(args.workers)]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu_before = before.ru_utime + before.ru_stime
        started = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(f"per plot exited {done.returncode}:\n{done.stderr[-3000:]}")
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = usage.ru_utime + usage.ru_stime - cpu_before
        files = len(list((root / "plots").iterdir()))
        print(f"per plot: {wall:.1f} s wall, {cpu:.1f} s CPU (itself and its loader workers), peak RSS "
              f"{usage.ru_maxrss / 1024:.0f} MiB (largest process), {files} files written; "
              f"load after {os.getloadavg()[0]:.1f}")  # fmt: skip
    finally:
        if tmp is not None:
            tmp.cleanup()


if __name__ == "__main__":
    main()
