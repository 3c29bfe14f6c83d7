"""What the per-update metrics cost a CartPole run.

Four builds of the same run (same seed, so the same episodes and updates), interleaved and repeated:

* ``full``           every metric: the correlation count and the i.i.d. measures included (the default);
* ``no-iid``         ``metrics.iid: false``: the metrics as they were before the i.i.d. measures ("before");
* ``no-correlation`` ``metrics.correlation: false``;
* ``no-window``      the update window replaced by one that keeps and computes nothing (no per-update
                     metrics at all: the baseline).

The overhead is the median time of a build over the baseline's, minus one, in CPU time of this process (the
run is single-threaded for an MLP, so CPU time is the work done and barely moves with other load on the
machine) and in wall time. The issue's budget is 10%. A second table times the update window alone per update
(each update measured as the loop measures it, ``measure_table`` over S = 1, and ``pop``) for CartPole-, Acrobot-
and Atari-shaped batches of a real memory, with and without the i.i.d. measures.

A third table times ``measure_table`` alone for one cohort step of S = 1, 8 and 32 members (CartPole-shaped
arrays, B = 64), as the loop measures a step. ``--base TREE`` (with ``--window-only``) times the second and third
tables in this tree and in TREE (a checkout of another commit), each in its own process, alternating, and prints
both (min over the rounds) and their ratio.

    python benchmarks/metrics_overhead.py [--steps 20000] [--repeats 3] [--config configs/cartpole_uniform.yaml]
    python benchmarks/metrics_overhead.py --window-only [--repeats 40]   # the second and third tables, min of 40
    python benchmarks/metrics_overhead.py --window-only --base /tmp/base [--rounds 3]   # this tree against another
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from per_cli.config import Config, ReplayConfig, load_config
from per_cli.replay import make_replay
from per_cli.train.loop.trainer import build_member, run_member
from per_cli.train.measures.update_measures import measure_table
from per_cli.train.measures.update_window import UpdateWindow

# (a --base tree from before 53d3b3b also hands each update's states to its window)
_WINDOW_TAKES_STATES = "obs" in inspect.signature(UpdateWindow.add_measured).parameters

ROOT = Path(__file__).resolve().parents[1]


class NullWindow:
    """An update window that keeps nothing: the loop without per-update metrics."""

    def add(self, batch, result, memory=None) -> None:
        pass

    def pop(self, memory=None) -> dict[str, np.ndarray]:
        return {}


def one_run(config: Path, steps: int, build: str, out: Path) -> tuple[float, float, int]:
    """(CPU seconds, wall seconds, gradient updates) of one run of ``build``."""
    overrides = [f"train.total_steps={steps}", "train.eval_episodes=0"]
    if build == "no-correlation":
        overrides.append("metrics.correlation=false")
    if build == "no-iid":
        overrides.append("metrics.iid=false")
    cfg = load_config(config, overrides, device="cpu")
    member = build_member(cfg)
    if build == "no-window":
        member.window = NullWindow()
    cpu, wall = time.process_time(), time.perf_counter()
    run_member(member, out / f"{build}-{time.monotonic_ns()}")
    return time.process_time() - cpu, time.perf_counter() - wall, member.agent.updates


def window_cost(obs_shape: tuple[int, ...], dtype, batch: int, updates: int, iid: bool, repeats: int = 3) -> float:
    """CPU microseconds per update that ``measure_table`` (each update measured when it comes, S = 1) and ``pop``
    spend on ``updates`` batches of this shape, drawn from a real memory of 2,000 random states (episodes of
    100); with ``iid``, a reference sample is drawn at every pop (as at a log point)."""
    rng = np.random.default_rng(0)
    memory = make_replay(Config(replay=ReplayConfig(capacity=2000, batch_size=batch)), obs_shape, np.dtype(dtype), 0)
    for t in range(2000):
        obs = (rng.random(obs_shape) * (255 if dtype == np.uint8 else 1)).astype(dtype)
        memory.add(obs, 0, 0.0, obs, (t + 1) % 100 == 0, False)
    batches = [memory.sample(batch) for _ in range(updates)]
    td = rng.standard_normal(batch).astype(np.float32)
    r = SimpleNamespace(td_errors=td, losses=np.abs(td), loss=0.1, q_mean=1.0)
    best = float("inf")
    for _ in range(repeats):
        window = UpdateWindow(0.8, iid=iid, refresh_every=updates)
        start = time.process_time()
        for b in batches:
            held = [memory.episodes_held()] if iid else None
            table, variances = measure_table(window, r.td_errors[None], r.losses[None], b.weights[None],
                                             b.ages[None], b.obs[None], b.episodes[None], held, [r.loss], [r.q_mean])
            window.add_measured(table[0], None if variances is None else variances[0],
                                *((b.obs,) if _WINDOW_TAKES_STATES else ()))  # fmt: skip
        window.pop(memory)
        best = min(best, time.process_time() - start)
    return best / updates * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "cartpole_uniform.yaml")
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--window-only", action="store_true", help="time the update window alone (no runs)")
    parser.add_argument("--base", type=Path, help="with --window-only: a tree to time the same tables in")
    parser.add_argument("--rounds", type=int, default=3, help="with --base: processes per tree, alternating")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # the tables as JSON (for --base)
    args = parser.parse_args()
    if args.json:
        print(json.dumps(cost_tables(args.repeats)))
        return
    if args.base is not None:
        compare_trees(args.base, args.repeats, args.rounds)
        return
    per_update = None if args.window_only else run_table(args)
    window_table(per_update, args.repeats)
    step_table(args.repeats)


def run_table(args: argparse.Namespace) -> float:
    """The four builds' runs, interleaved and repeated, as a table; returns the CPU µs per update of a run
    without metrics."""
    builds = ["no-window", "no-correlation", "no-iid", "full"]
    times: dict[str, list[tuple[float, float, int]]] = {b: [] for b in builds}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        one_run(args.config, 2_000, "full", Path(tmp))  # warm-up: imports, compilation, allocator, CPU clocks
        for r in range(args.repeats):
            order = builds if r % 2 == 0 else builds[::-1]  # alternate to cancel drift in machine load
            for build in order:
                times[build].append(one_run(args.config, args.steps, build, Path(tmp)))
    load_after = os.getloadavg()

    print(
        f"CartPole run: {args.config.name}, {args.steps} env steps, eval off, CPU, torch threads "
        f"{torch.get_num_threads()}, {os.cpu_count()} cores, {args.repeats} repeats; load average (1/5/15 min) "
        f"before {'/'.join(f'{x:.2f}' for x in load_before)}, after {'/'.join(f'{x:.2f}' for x in load_after)}"
    )
    print(f"{'build':<16}{'CPU s (median)':>16}{'overhead':>10}{'wall s (median)':>17}{'overhead':>10}{'steps/s':>9}")
    base = [statistics.median(t[i] for t in times["no-window"]) for i in (0, 1)]
    for build in builds:
        cpu, wall = (statistics.median(t[i] for t in times[build]) for i in (0, 1))
        print(
            f"{build:<16}{cpu:>16.2f}{(cpu / base[0] - 1) * 100:>9.1f}%{wall:>17.2f}{(wall / base[1] - 1) * 100:>9.1f}%"
            f"{args.steps / wall:>9.0f}"
        )
    print("all (CPU s, wall s):", {b: [(round(c, 2), round(w, 2)) for c, w, _ in t] for b, t in times.items()})
    updates = times["no-window"][0][2]
    per_update = base[0] / updates * 1e6
    print(
        f"{updates} updates a run; a run without metrics spends {per_update:.0f} CPU µs per update (env steps included)"
    )
    return per_update


def window_table(per_update: float | None, repeats: int) -> None:
    """An update measured alone (``measure_table``, S = 1) + ``pop`` per update for three state shapes, without and
    with the i.i.d. measures (min of ``repeats``), and for CartPole as a share of ``per_update`` (a run's CPU µs per
    update) if given."""
    print(
        f"\nmeasure_table (S = 1) + pop alone, CPU µs per update (100 updates a window; min of {repeats}), without and "
        f"with the i.i.d. measures{', and as a share of the above' if per_update else ''} (load average "
        f"{'/'.join(f'{x:.2f}' for x in os.getloadavg())}):"
    )
    for label, shape, dtype, batch in WINDOW_SHAPES:
        before, after = (window_cost(shape, dtype, batch, 100, iid, repeats) for iid in (False, True))
        share = (
            f"{before / per_update * 100:>7.1f}%{after / per_update * 100:>7.1f}%"
            if label.startswith("CartPole") and per_update
            else ""
        )
        print(f"  {label:<28}{before:>10.1f}{after:>10.1f}{share}")


STEP_SIZES = (1, 8, 32)


def step_cost(size: int, iid: bool, repeats: int, calls: int = 300) -> float:
    """CPU microseconds per call of ``measure_table`` for one cohort step of ``size`` members (B = 64, CartPole
    states; with ``iid`` the correlation count and the i.i.d. measures too), min of ``repeats``."""
    rng = np.random.default_rng(0)
    td = rng.standard_normal((size, 64)).astype(np.float32)
    arrays = (td, np.abs(td), rng.uniform(size=(size, 64)).astype(np.float32), rng.integers(0, 1000, (size, 64)),
              rng.standard_normal((size, 64, 4)).astype(np.float32), rng.integers(0, 50, (size, 64)),
              np.full(size, 40), rng.standard_normal(size), rng.standard_normal(size))  # fmt: skip
    window = UpdateWindow(0.8 if iid else None, iid=iid)
    measure_table(window, *arrays)  # (compilation, or the cache's load)
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        for _ in range(calls):
            measure_table(window, *arrays)
        best = min(best, time.process_time() - start)
    return best / calls * 1e6


def step_table(repeats: int) -> None:
    print(f"\nmeasure_table for one cohort step (B = 64, CartPole states), CPU µs per step (min of {repeats}), without "
          f"and with the i.i.d. measures (load average {'/'.join(f'{x:.2f}' for x in os.getloadavg())}):")  # fmt: skip
    for size in STEP_SIZES:
        print(f"  S = {size:<24}{step_cost(size, False, repeats):>10.1f}{step_cost(size, True, repeats):>10.1f}")


WINDOW_SHAPES = [
    ("CartPole 4 floats, B=64", (4,), np.float32, 64),
    ("Acrobot 6 floats, B=128", (6,), np.float32, 128),
    ("Atari 4x84x84 uint8, B=32", (4, 84, 84), np.uint8, 32),
]


def cost_tables(repeats: int) -> dict[str, float]:
    """The second and third tables' cells (µs) by name: the window per update, measure_table per step."""
    cells = {}
    for label, shape, dtype, batch in WINDOW_SHAPES:
        for iid in (False, True):
            cells[f"window {label}{', iid' if iid else ''}"] = window_cost(shape, dtype, batch, 100, iid, repeats)
    for size in STEP_SIZES:
        for iid in (False, True):
            cells[f"step S = {size}{', iid' if iid else ''}"] = step_cost(size, iid, repeats)
    return cells


def compare_trees(base: Path, repeats: int, rounds: int) -> None:
    """The tables in this tree and in ``base``, each in ``rounds`` processes alternating with the other's; the min
    of each cell over its rounds, and this / base."""
    trees = {"this": ROOT, "base": base.resolve()}
    cells: dict[str, dict[str, float]] = {name: {} for name in trees}
    load_before = os.getloadavg()
    for _ in range(rounds):
        for name, tree in trees.items():
            env = {**os.environ, "PYTHONPATH": str(tree)}
            out = subprocess.run([sys.executable, __file__, "--json", "--repeats", str(repeats)], env=env, cwd=tree,
                                 capture_output=True, text=True, check=True).stdout  # fmt: skip
            for key, value in json.loads(out.splitlines()[-1]).items():
                cells[name][key] = min(cells[name].get(key, float("inf")), value)
    load_after = os.getloadavg()
    print(f"CPU µs (the window: per update; measure_table: per step), min of {rounds} processes x {repeats} repeats "
          f"per tree; base {trees['base']}; load average (1/5/15 min) before "
          f"{'/'.join(f'{x:.2f}' for x in load_before)}, after {'/'.join(f'{x:.2f}' for x in load_after)}")  # fmt: skip
    print(f"  {'cell':<40}{'this':>10}{'base':>10}{'this/base':>11}")
    for key, value in cells["this"].items():
        print(f"  {key:<40}{value:>10.1f}{cells['base'][key]:>10.1f}{value / cells['base'][key]:>11.2f}")


if __name__ == "__main__":
    main()
