"""The cohort's floor: how fast a cohort could run if the loop's Python cost nothing.

A cohort step is compiled calls (the numba kernels: update, draw, store, measures, greedy actions; EnvPool's
C step and reset) ordered by Python (the lockstep loop, each member's counters, windows and logs). This runs
cohorts of S seeds (``--size``) of each config for ``--steps`` env steps per seed, as
``benchmarks/cohort_throughput.py`` runs them, each config in a fresh process: once plainly (the measured CPU µs
per env step per seed), then once under cProfile, which times each call into compiled code as a whole (numba
dispatchers, matched by their Python function's file and name; EnvPool's C entry points; the BLAS product of the
correlation count, ``metrics.gram``). Their sum per
seed-step is the floor: ``1e6 / floor`` env steps/s is the most the cohort could reach on this core with the
same kernels if the Python around them cost nothing. The update kernel's share is printed apart, since it is
the one part whose rate could still change much (by changing its float summation order, and so the results).

The members' run start and end (``run_record.begin``/``finish``: config.yaml, the summaries, the TensorBoard files,
the final checkpoint) happen once per run, however long it is; their CPU time is printed apart ("start/end", per
seed-step of this short run). The Python part of a seed-step is ``measured - floor - start/end``: the loop's
cost, the one the seed-axis issue's target (≤ 5 µs per seed-step at S = 100) is about. ``--size 1,10,100``
measures each cohort size in turn (a cohort of one is a solo run: the same loop).

That Python part is split in two. "events" is the Python of each member's own events, which the issue's design
keeps per member: an episode's end (``reporting.end_episode``: the window's measures flushed, the episode's
metrics.csv row and TensorBoard scalars), a log point (``reporting.log_point``: the window's scalars logged) and
a periodic task (``tasks.end_step`` where one falls): their CPU time in the plain run, less the compiled calls
made from the window's ``pop`` (``measures/update_window.py``, ``measures/reference.py``, counted in the floor).
"steps" is the rest, the Python every step pays whatever happens: ``python = events + steps``.

``--solo`` times solo runs of each config as well (the median of five, before the cohorts; the floor's ratio to
it bounds the cohort's speed-up); ``--grid`` weights each (env, replay) cell's floor by the env steps that
cell's runs took in a finished grid (their summary.json ``total_steps``), which bounds that study's wall time on
``--cores`` cores.

    python benchmarks/cohort_floor.py --configs seed001/cartpole_uniform.yaml --size 100 --solo
    python benchmarks/cohort_floor.py --configs seed001/cartpole_uniform.yaml --size 1,10,100   # the Python part
    python benchmarks/cohort_floor.py --configs 'seed001/*.yaml' --size 50 --grid runs/notebook100 --cores 2
    python benchmarks/cohort_floor.py --size 1,10,100 --steps 10000 --base /tmp/base   # against another commit

``--base DIR`` names a checkout of another commit (``git worktree add --detach /tmp/base COMMIT``): each
measurement runs there too, with that tree's own copy of this script and its package first on ``PYTHONPATH``,
alternating with this tree's, and a ratio line follows each pair (this tree over the base: above 1 is slower).

The floor is a lower bound: profiling slows the Python, not the compiled calls, and the first ``--steps`` of a
run gather from memories still filling, which is cheaper than from full ones later.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import numba.core.dispatcher

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cohort_throughput as bench  # noqa: E402

from per_cli.rl.engines import cohort as engine  # noqa: E402
from per_cli.train.loop import reporting, run_record, tasks  # noqa: E402
from per_cli.train.measures import metrics  # noqa: E402

_ENVPOOL_C = ("_recv", "_send", "_reset")  # EnvPool's C entry points (its Python wrapper around them is loop)
_CODE = engine.cohort_update_kernel.py_func.__code__
_UPDATE = (_CODE.co_filename, _CODE.co_name)  # the networks' update (replay's priority update has the same name)


def compiled_functions() -> set[tuple[str, str]]:
    """(file, name) of every numba dispatcher in the loaded per_cli modules (their calls are compiled code)."""
    found = set()
    for name, module in list(sys.modules.items()):
        if not name.startswith("per_cli") or module is None:
            continue
        for value in vars(module).values():
            if isinstance(value, numba.core.dispatcher.Dispatcher):
                code = value.py_func.__code__
                found.add((code.co_filename, code.co_name))
    return found


# numpy calls that are BLAS work, not the loop's Python: the correlation count's Gram matrices (a matmul per step)
_BLAS = {(metrics.gram.__code__.co_filename, "gram")}
_AT_EVENTS = ("update_window.py", "reference.py")  # compiled calls made from these run only at a window's pop
# the members' own events (their CPU time in the plain run: "events")
_EVENTS = (("end_episode", "reporting"), ("log_point", "reporting"), ("end_step", "tasks"))


def compiled_time(stats: pstats.Stats) -> tuple[dict[str, float], dict[str, float]]:
    """Seconds spent inside compiled calls in ``stats``: (by part: the update kernel, EnvPool, the other
    kernels, and of those the ones called at a window's pop, "at events"; by kernel: each numba kernel's)."""
    compiled = compiled_functions()
    parts: dict[str, float] = defaultdict(float)
    kernels: dict[str, float] = defaultdict(float)
    for (filename, _, name), (_, _, tottime, _, callers) in stats.stats.items():  # type: ignore[attr-defined]
        if (filename, name) in compiled or (filename, name) in _BLAS:
            parts["update" if (filename, name) == _UPDATE else "other kernels"] += tottime
            kernels[f"{Path(filename).stem}.{name}"] += tottime
            for (caller_file, _, _), (_, _, caller_tottime, _) in callers.items():
                if caller_file.endswith(_AT_EVENTS):
                    parts["at events"] += caller_tottime
        elif filename == "~" and "envpool" in name and name.rstrip(">").endswith(_ENVPOOL_C):
            parts["envpool"] += tottime
    return parts, kernels


def floor(size: int, steps: int) -> tuple[dict[str, float], dict[str, float]]:
    """CPU µs per env step per seed of a cohort of ``bench.CONFIG``: (measured, inside compiled calls by part,
    and in the members' run start and end (``run_record.begin``/``finish``: once per run, not per step, so apart
    from the steps' Python part); inside each numba kernel)."""
    clock = bench.PhaseClock()  # the members' run start and end (config.yaml, summaries, TensorBoard files)
    clock.wrap("start/end", run_record, "begin")
    clock.wrap("start/end", run_record, "finish")
    owners = {"reporting": reporting, "tasks": tasks}
    for name, owner in _EVENTS:  # the members' own events
        clock.wrap("events", owners[owner], name)
    try:
        plain = bench.run(size, steps, as_cohort=True)  # (S = 1: a cohort of one, the same loop as the others)
    finally:
        clock.restore()
    profile = cProfile.Profile(time.process_time)  # CPU time, the unit of every column (EnvPool: its threads too)
    profile.enable()
    bench.run(size, steps, as_cohort=True)
    profile.disable()
    per = 1e6 / (size * steps)
    parts, kernels = compiled_time(pstats.Stats(profile))
    parts = {k: v * per for k, v in parts.items()}
    at_events = parts.pop("at events", 0.0)  # (within "other kernels")
    start_end, events = clock.totals["start/end"] * per, clock.totals["events"] * per - at_events
    measured, floor_ = plain["cpu"] * per, sum(parts.values())
    python = measured - floor_ - start_end
    summary = {"measured": measured, **parts, "floor": floor_, "start/end": start_end, "python": python}
    count = clock.calls["end_episode"] + clock.calls["log_point"]  # episode ends and log points
    per_event = events * size * steps / count if count else 0.0  # Python µs of one member's event
    summary |= {"events": events, "steps": python - events, "per event": per_event}
    summary["event rate"] = count / (size * steps)
    return summary, {k: v * per for k, v in kernels.items()}


def grid_steps(grid: Path) -> dict[tuple[str, str], int]:
    """Env steps per (env, replay) cell of a finished grid: the sum of its runs' ``total_steps``."""
    steps: dict[tuple[str, str], int] = defaultdict(int)
    for path in grid.glob("*/summary.json"):
        summary = json.loads(path.read_text())
        steps[(summary["env"], summary["replay"])] += int(summary["total_steps"])
    if not steps:
        raise SystemExit(f"--grid: no run summaries under {grid}; name a finished grid's directory")
    return steps


def _cell(config: str) -> tuple[str, str]:
    """(env, replay kind) of a config under configs/, as its runs' summary.json names them."""
    cfg = bench.load_config(bench.CONFIGS / config, [], device="cpu")
    return cfg.env.id, cfg.replay.kind


def measure_one(config: str, size: int, steps: int, solo: bool) -> dict:
    """:func:`floor` of one config (and its solo run's env steps/s with ``solo``), as one JSON-able dict."""
    bench.CONFIG = bench.CONFIGS / config
    bench.run(2, 200)  # warm-up: the kernels loaded or compiled
    rates = []
    if solo:  # first, as benchmarks/cohort_throughput.py times it; a short run, so the median of five
        rates = sorted(r["env_steps"] / r["cpu"] for r in (bench.run(1, steps) for _ in range(5)))
    r, kernels = floor(size, steps)
    if not r.get("update"):
        raise SystemExit(f"{config}: no time found in {_UPDATE[1]}; this script no longer matches the engine")
    if rates:
        r["solo"] = rates[len(rates) // 2]  # the median
    return {"parts": r, "kernels": kernels}


def in_subprocess(config: str, size: int, args: argparse.Namespace, tree: Path | None = None) -> dict:
    """:func:`measure_one` in a fresh process, so that no config runs after another one's memory churn; with
    ``tree``, that checkout's own script and package (``--base``)."""
    script = Path(__file__) if tree is None else tree / "benchmarks" / Path(__file__).name
    command = [sys.executable, str(script), "--configs", config, "--size", str(size), "--steps", str(args.steps),
               "--backend", args.backend, "--json"] + (["--solo"] if args.solo else [])  # fmt: skip
    command += [arg for kv in args.set for arg in ("--set", kv)]
    env = None
    if tree is not None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tree), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        raise SystemExit(f"{config}: the measurement failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _row(label: str, size: int, r: dict, seconds: float) -> str:
    solo = f"{r['solo']:,.0f}" if "solo" in r else ""
    return (f"{label:<33} {size:>4} {r['measured']:>8.1f} {r['update']:>7.1f} {r.get('other kernels', 0):>8.1f} "
            f"{r.get('envpool', 0):>8.1f} {r['floor']:>6.1f} {r['start/end']:>9.1f} "
            f"{r['python']:>7.1f} {r['events']:>7.1f} {r['steps']:>6.1f} "
            f"{1e6 / r['floor']:>10,.0f} {solo:>7}   ({seconds:.0f} s)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", default="seed001/cartpole_uniform.yaml", help="configs under configs/ (a glob)")
    parser.add_argument("--size", default="50", help="seeds per cohort (a comma list: each size in turn)")
    parser.add_argument("--steps", type=int, default=3000, help="env steps per seed")
    parser.add_argument("--backend", default="envpool", help="the cohorts' env.backend")
    parser.add_argument("--solo", action="store_true", help="time a solo run of each config too")
    parser.add_argument("--grid", type=Path, help="a finished grid: weight each cell's floor by its env steps")
    parser.add_argument("--cores", type=int, default=2, help="cores the grid's study runs on")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config key")
    parser.add_argument("--base", type=Path, help="a checkout of another commit, measured alternately with this one")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # one config, here: its JSON
    args = parser.parse_args()
    if args.base is not None and not (args.base / "benchmarks" / Path(__file__).name).is_file():
        raise SystemExit(f"--base {args.base}: no benchmarks/{Path(__file__).name} there; give a checkout of per")
    bench.EXTRA_SETS.extend(args.set)
    bench.COHORT_SETS.append(f"env.backend={args.backend}")
    sizes = [int(v) for v in str(args.size).split(",")]
    if args.json:
        print(json.dumps(measure_one(args.configs, sizes[0], args.steps, args.solo)))
        return
    configs = sorted(str(p.relative_to(bench.CONFIGS)) for p in bench.CONFIGS.glob(args.configs))
    if not configs:
        raise SystemExit(f"--configs: nothing under configs/ matches {args.configs!r}")
    cells = grid_steps(args.grid) if args.grid else {}
    cell_of = {config: _cell(config) for config in configs} if cells else {}
    print(f"cohorts of {args.size} seeds, {args.steps} env steps each, env.backend={args.backend}, each config in "
          "a fresh process; CPU µs per env step per seed")
    print("(python = measured - floor - start/end = events + steps)")
    print(f"{'config':<33} {'S':>4} {'measured':>8} {'update':>7} {'kernels':>8} {'envpool':>8} {'floor':>6} "
          f"{'start/end':>9} {'python':>7} {'events':>7} {'steps':>6} {'ceiling/s':>10} {'solo/s':>7}")  # fmt: skip
    totals = {"measured": 0.0, "floor": 0.0, "without update": 0.0}
    for config, size in ((c, s) for c in configs for s in sizes):
        if args.base is not None:  # the base first, then this tree: a pair per row, read as a ratio
            started = time.perf_counter()
            base = in_subprocess(config, size, args, args.base)["parts"]
            print(_row(f"{config} (base)", size, base, time.perf_counter() - started), flush=True)
        started = time.perf_counter()
        measured = in_subprocess(config, size, args)
        r = measured["parts"]
        print(_row(config, size, r, time.perf_counter() - started))
        if args.base is not None:
            print(f"    this / base: measured {r['measured'] / base['measured']:.3f}, "
                  f"python {r['python'] / base['python']:.3f}, floor {r['floor'] / base['floor']:.3f}")
        top = sorted(measured["kernels"].items(), key=lambda kv: -kv[1])[:6]
        print("    kernels: " + ", ".join(f"{name} {us:.1f}" for name, us in top))
        print(f"    events: {1000 * r['event rate']:.1f} per 1,000 seed-steps (episode ends and log points), "
              f"{r['per event']:.0f} µs of Python each", flush=True)  # fmt: skip
        steps = cells.get(cell_of.get(config), 0)
        totals["measured"] += steps * r["measured"]
        totals["floor"] += steps * r["floor"]
        totals["without update"] += steps * (r["floor"] - r["update"])
    if cells:
        covered = set(cell_of.values()) & set(cells)
        counted = sum(cells[c] for c in covered)
        minutes = {k: v * 1e-6 / args.cores / 60 for k, v in totals.items()}
        print(f"\n{args.grid}: the {counted:,} env steps of {len(covered)} of its {len(cells)} cells "
              f"({sum(cells.values()):,} in all) on {args.cores} cores, at these rates: measured "
              f"{minutes['measured']:.1f} min, floor {minutes['floor']:.1f} min, floor without the update kernel "
              f"{minutes['without update']:.1f} min")  # fmt: skip


if __name__ == "__main__":
    main()
