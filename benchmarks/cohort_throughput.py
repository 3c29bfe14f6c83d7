"""Cohort throughput: aggregated env steps/s of S seeds in lockstep in one process vs one solo run.

The notebook's settings (configs/seed001/cartpole_uniform.yaml with ``agent.engine=numba``: one hidden layer of
128, batch 64, one update per env step, uniform replay; ``--config`` names another, e.g.
seed001/cartpole_per.yaml), each run for a fixed number of env steps per seed (``--steps``; no evaluation
episodes), as ``per train`` runs it: its loop, replay, metrics, TensorBoard and CSV
logging. A solo run and cohorts of S seeds (``--sizes``, default 10, 100, 1000) are timed in one invocation,
after a warm-up, in wall time and in this process's CPU time (steadier when other processes load the machine).
Ratios are aggregated env steps/s over the solo run's, in CPU time.

Where the time goes: every phase method is wrapped with a timer (env step, acting, replay add/sample/priority
update, the batched update, episode and update logging incl. the measures, and each run's start and end, which
a short benchmark run overweights), as CPU µs per env step per seed.
The Python part of a seed-step at S = 1, 10 and 100 (``--python-sizes``): the total less the time inside compiled
calls and the runs' start and end, as ``benchmarks/cohort_floor.py`` measures it (each size in a fresh process).
The update's FLOP rate: the batched update alone on fixed batches, against a single-thread large sgemm (torch)
as the ceiling.

    python benchmarks/cohort_throughput.py [--steps 2000] [--sizes 10,100,1000] [--config seed001/cartpole_per.yaml]
    python benchmarks/cohort_throughput.py --sizes 100 --python-sizes 1,10,100   # the Python part at S = 1, 10, 100
    python benchmarks/cohort_throughput.py --device cuda --sizes 100,1000   # the torch engine's stacked update on a GPU
    python benchmarks/cohort_throughput.py --cohort-backend envpool   # cohorts on EnvPool, the solo run on Gymnasium
    python benchmarks/cohort_throughput.py --equivalence 20 [--episodes 300]   # 20 seeds: one cohort vs 20 solo runs
    python benchmarks/cohort_throughput.py --equivalence 20 --against envpool  # Gymnasium's envs vs EnvPool's
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from per_cli.config import load_config  # noqa: E402
from per_cli.envs.batch import EachEnv, PooledBatch  # noqa: E402
from per_cli.replay.cohort import CohortSampling  # noqa: E402
from per_cli.replay.memory import ReplayMemory  # noqa: E402
from per_cli.rl import explore  # noqa: E402
from per_cli.rl.agent import DQNAgent  # noqa: E402
from per_cli.rl.engines import make_agent  # noqa: E402
from per_cli.rl.engines.cohort import CohortEngine  # noqa: E402
from per_cli.train.loop import reporting, run_record  # noqa: E402
from per_cli.train.loop.cohort import Cohort, cohort_configs  # noqa: E402
from per_cli.train.loop.steps import Steps  # noqa: E402
from per_cli.train.loop.trainer import build_member, run_member  # noqa: E402
from per_cli.train.loop.updates import CompiledUpdates, StackedUpdates, TorchUpdates  # noqa: E402
from per_cli.train.measures.cohort_rows import CohortRows  # noqa: E402
from per_cli.train.measures.update_window import UpdateWindow  # noqa: E402

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
CONFIG = CONFIGS / "seed001" / "cartpole_uniform.yaml"  # --config changes it (e.g. seed001/cartpole_per.yaml)

# (category, owner, method): each call's CPU time is charged to its category
PHASES = [
    ("acting", DQNAgent, "explore"),
    ("replay", ReplayMemory, "add"),
    ("replay", ReplayMemory, "sample"),
    ("replay", ReplayMemory, "update_priorities"),
    ("logging", reporting, "end_episode"),
    ("logging", reporting, "log_point"),
    ("logging", CohortRows, "add"),  # a cohort's: its step's update arrays kept over the seed axis
    ("logging", CohortRows, "_measure"),  # measured, every member's kept ones at once, when a window needs them
    ("logging", UpdateWindow, "add_block"),  # and taken by each member's window (at its pops)
    ("logging", Steps, "update_arrays"),  # an update's arrays as the measures read them
    # the loop's phases over the members (train/loop/steps.py): the envs' batch (EnvPool's one call per pool, or
    # each Gymnasium env's own), the store (the rings' compiled one, or each memory's add), ε's draws
    ("env", EachEnv, "step"),
    ("env", EachEnv, "reset"),
    ("env", PooledBatch, "step"),
    ("env", PooledBatch, "reset"),
    ("replay", CohortSampling, "store"),
    ("acting", explore, "explore_kernel"),
    # once per run, not per step: config.yaml, the running and the final summary.json (fsync-ed)
    ("run start/end", run_record, "begin"),
    ("run start/end", run_record, "finish"),
]


EXTRA_SETS: list[str] = []  # --set KEY=VALUE, e.g. env.backend=envpool
# --device: the runs' device. A top-level override, applied after --set: `--set device=cuda` alone would be
# overridden (the first GPU lease's "CUDA" CartPole numbers were CPU numbers for this reason)
DEVICE: list[str] = ["cpu"]
COHORT_SETS: list[str] = []  # --cohort-backend envpool: cohorts (S >= 2) only; the solo baseline keeps its envs


def _configs(seeds, steps: int, as_cohort: bool = False):
    cohort = COHORT_SETS if len(seeds) > 1 or as_cohort else []
    sets = ["agent.engine=numba", f"train.total_steps={steps}", "train.eval_episodes=0", *EXTRA_SETS, *cohort]
    cfg = load_config(CONFIG, sets, device=DEVICE[0])
    cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, total_episodes=None))  # steps only
    return cohort_configs(cfg, seeds)


class PhaseClock:
    """Charges the CPU time of wrapped calls to categories (nested calls: to the innermost)."""

    def __init__(self):
        self.totals: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)  # wrapped calls by (owner's) method name
        self._saved = []
        self._inner: list[float] = []  # per wrapped call in progress: the time of the wrapped calls inside it

    def wrap(self, category: str, owner, name: str) -> None:
        original = getattr(owner, name)
        totals, inner, calls = self.totals, self._inner, self.calls

        def timed(*args, **kwargs):
            calls[name] += 1
            t = time.process_time()
            inner.append(0.0)
            try:
                return original(*args, **kwargs)
            finally:
                elapsed = time.process_time() - t
                nested = inner.pop()
                totals[category] += elapsed - nested  # the time of wrapped calls inside went to theirs
                if inner:
                    inner[-1] += elapsed

        self._saved.append((owner, name, original))
        setattr(owner, name, timed)

    def restore(self) -> None:
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)
        self._saved.clear()


def run(size: int, steps: int, clock: PhaseClock | None = None, as_cohort: bool = False) -> dict[str, float]:
    """Train a cohort of ``size`` seeds (size 1: a solo run_member, or with ``as_cohort`` a cohort of one, on
    the cohorts' env backend) for ``steps`` env steps each."""
    cfgs = _configs(range(1, size + 1), steps, as_cohort)
    with tempfile.TemporaryDirectory() as tmp:
        wall, cpu = time.perf_counter(), time.process_time()
        if size == 1 and not as_cohort:
            trainer = build_member(cfgs[0])
            if clock:
                _wrap_env(clock, [trainer])
            run_member(trainer, Path(tmp) / "solo")
        else:
            cohort = Cohort(cfgs)
            if clock:
                _wrap_env(clock, cohort.members)
            cohort.run([Path(tmp) / f"s{c.seed}" for c in cfgs])
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"wall": wall, "cpu": cpu, "env_steps": size * steps}


def _wrap_env(clock: PhaseClock, members) -> None:
    for member in members:  # each env instance: its step method
        env, step = member.env, member.env.step

        def timed(action, _step=step):
            t = time.process_time()
            try:
                return _step(action)
            finally:
                clock.totals["env"] += time.process_time() - t

        env.step = timed


def phases(size: int, steps: int) -> dict[str, float]:
    """CPU µs per env step per seed by phase; 'loop, other' is the remainder (counters, schedules, the loop)."""
    clock = PhaseClock()
    for category, owner, name in PHASES:
        clock.wrap(category, owner, name)
    # the members' networks (train/loop/updates.py: numba's one compiled call, torch's stacked or own updates)
    for cls in (CompiledUpdates, StackedUpdates, TorchUpdates):
        clock.wrap("update", cls, "learn")
        clock.wrap("acting", cls, "greedy")
        clock.wrap("replay", cls, "insertion_td")  # the TD errors of new transitions (initial_priority: td_error)
    for name in ("sample", "insert_priorities", "update_priorities"):  # (a member's own memory calls inside)
        clock.wrap("replay", Steps, name)
    try:
        result = run(size, steps, clock)
    finally:
        clock.restore()
    per = 1e6 / result["env_steps"]
    out = {k: v * per for k, v in clock.totals.items()}
    out["loop, other"] = result["cpu"] * per - sum(out.values())
    return out


def update_flops(size: int, repeats: int = 200) -> tuple[float, float]:
    """(µs per member update, GFLOP/s) of the batched update alone, on fixed random batches."""
    cfgs = _configs(range(1, size + 1), 100)
    agents = [make_agent(c.agent, (4,), 2, torch.device("cpu")) for c in cfgs]
    engine = CohortEngine([a.numba_engine for a in agents])
    rng = np.random.default_rng(0)
    b = 64
    obs = rng.normal(size=(size, b, 4)).astype(np.float32)
    acts = rng.integers(0, 2, size=(size, b))
    rew = np.ones((size, b), np.float32)
    term = np.zeros((size, b), np.float32)
    weights = np.ones((size, b), np.float32)
    which = list(range(size))
    torch.set_flush_denormal(True)  # as the training loop runs it (repeated batches drive Adam's moments denormal)
    try:
        engine.update(which, obs, acts, rew, obs, term, weights)
        t = time.process_time()
        for _ in range(repeats):
            engine.update(which, obs, acts, rew, obs, term, weights)
        us = (time.process_time() - t) / (repeats * size) * 1e6
    finally:
        torch.set_flush_denormal(False)
    dims = [4, 128, 2]
    macs = sum(i * o for i, o in zip(dims[:-1], dims[1:], strict=True))
    # online and target forwards, weight gradients, input gradients below the top layer: 2 FLOPs per MAC
    flops = 2 * b * (3 * macs + dims[1] * dims[2]) + 10 * (macs + sum(dims[1:]))  # + Adam, ~10 per parameter
    return us, flops / (us * 1e-6) / 1e9


def sgemm_rate(n: int = 1024) -> float:
    torch.set_num_threads(1)
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    t = time.perf_counter()
    for _ in range(5):
        a @ b
    return 5 * 2 * n**3 / (time.perf_counter() - t) / 1e9


def equivalence(n_seeds: int, episodes: int, against: str = "solo") -> None:
    """``n_seeds`` seeds as one cohort vs the same seeds as solo runs (``against="solo"``), or vs one cohort
    whose envs are EnvPool's (``against="envpool"``, ``env.backend: envpool``: the same dynamics, other initial
    states), the notebook's protocol (300 episodes; fewer with ``--episodes`` for a quicker check)."""
    from scipy.stats import ks_2samp

    from per_cli.analysis.stats import stratified_bootstrap_ci

    cfg = load_config(CONFIG, ["agent.engine=numba", f"train.total_episodes={episodes}"], device="cpu")
    cfgs = cohort_configs(cfg, range(1, n_seeds + 1))
    pooled = dataclasses.replace(cfg, env=dataclasses.replace(cfg.env, backend="envpool"))
    other = cohort_configs(pooled, range(1, n_seeds + 1))
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        cohort = Cohort(cfgs).run([Path(tmp) / f"c{c.seed}" for c in cfgs])
        t_cohort = time.perf_counter() - t
        t = time.perf_counter()
        if against == "solo":
            rest = [run_member(build_member(c), Path(tmp) / f"s{c.seed}") for c in cfgs]
        else:
            rest = Cohort(other).run([Path(tmp) / f"e{c.seed}" for c in other])
        t_rest = time.perf_counter() - t
    a = np.array([s["final_return_mean"] for s in cohort])
    b = np.array([s["final_return_mean"] for s in rest])
    (pa, la, ha), (pb, lb, hb) = stratified_bootstrap_ci([a]), stratified_bootstrap_ci([b])
    print(f"equivalence, {n_seeds} seeds, final_return_mean (last 20 training episodes of {episodes}):")
    overlap = la <= hb and lb <= ha
    name = "solo:   " if against == "solo" else "envpool:"
    print(f"  cohort: IQM {pa:.2f}, 95% CI [{la:.2f}, {ha:.2f}]   ({t_cohort:.0f} s wall)")
    print(f"  {name} IQM {pb:.2f}, 95% CI [{lb:.2f}, {hb:.2f}]   ({t_rest:.0f} s wall)")
    print(f"  CIs overlap: {overlap}; KS p = {ks_2samp(a, b).pvalue:.3f}; identical per seed: {np.array_equal(a, b)}")


def python_part(args: argparse.Namespace, sizes: list[int]) -> None:
    """The Python part of a seed-step (measured - inside compiled calls - run start/end) at each cohort size, as
    ``benchmarks/cohort_floor.py`` measures it (each size in a fresh process, on the cohorts' env backend)."""
    import cohort_floor  # (here: it imports this module)

    backend = args.cohort_backend or load_config(CONFIG, list(args.set), device="cpu").env.backend
    floor_args = argparse.Namespace(steps=args.steps, backend=backend, solo=False, set=list(args.set))
    print(f"\nthe Python part (CPU µs per env step per seed: measured - floor - start/end = events + steps; "
          f"benchmarks/cohort_floor.py, env.backend={backend}):")  # fmt: skip
    for size in sizes:
        r = cohort_floor.in_subprocess(str(CONFIG.relative_to(CONFIGS)), size, floor_args)["parts"]
        print(f"  S={size}: python {r['python']:.1f} (events {r['events']:.1f}, steps {r['steps']:.1f}); "
              f"measured {r['measured']:.1f}, floor {r['floor']:.1f}, start/end {r['start/end']:.1f}")  # fmt: skip


def main() -> None:
    global CONFIG  # --config: what _configs and equivalence load (with --set's overrides)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=2000, help="env steps per seed")
    parser.add_argument("--config", default=str(CONFIG.relative_to(CONFIGS)), help="a config under configs/")
    parser.add_argument("--sizes", default="10,100,1000", help="cohort sizes")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="the runs' device (cuda: the torch engine's stacked update)")
    parser.add_argument("--equivalence", type=int, default=0, metavar="N", help="only the N-seed equivalence check")
    parser.add_argument("--episodes", type=int, default=300, help="episodes per run in the equivalence check")
    parser.add_argument("--against", choices=("solo", "envpool"), default="solo",
                        help="the equivalence check's reference: solo runs, or a cohort on EnvPool's envs")  # fmt: skip
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config key in the throughput runs, e.g. env.backend=envpool")  # fmt: skip
    parser.add_argument("--python-sizes", default="1,10,100",
                        help="cohort sizes whose Python part is measured (cohort_floor.py); empty: none")  # fmt: skip
    parser.add_argument("--cohort-backend", choices=("gymnasium", "envpool"), default=None,
                        help="env.backend of the cohorts only; the solo baseline keeps the config's")  # fmt: skip
    args = parser.parse_args()
    CONFIG = CONFIGS / args.config
    EXTRA_SETS.extend(args.set)
    if args.cohort_backend:
        COHORT_SETS.append(f"env.backend={args.cohort_backend}")
    print(f"config: {CONFIG.relative_to(CONFIGS.parent)}" + "".join(f" --set {kv}" for kv in args.set)
          + (f"; cohorts on env.backend={args.cohort_backend}, the solo run on the config's" if args.cohort_backend
             else ""))  # fmt: skip
    if args.equivalence:
        equivalence(args.equivalence, args.episodes, args.against)
        return
    DEVICE[0] = args.device
    if args.device == "cuda" and "agent.engine=torch" not in args.set:
        EXTRA_SETS.append("agent.engine=torch")  # the numba engine runs on the CPU only
    sizes = [int(s) for s in args.sizes.split(",")]
    run(2, 200)  # warm-up: numba's kernels loaded or compiled, gymnasium imported
    solo = run(1, args.steps)
    print(f"{'S':>6} {'env steps/s (CPU)':>18} {'(wall)':>10} {'x solo (CPU)':>13} {'x solo (wall)':>14}")
    base_cpu, base_wall = solo["env_steps"] / solo["cpu"], solo["env_steps"] / solo["wall"]
    print(f"{'solo':>6} {base_cpu:>18,.0f} {base_wall:>10,.0f} {1:>13.2f} {1:>14.2f}")
    for size in sizes:
        r = run(size, args.steps)
        cpu, wall = r["env_steps"] / r["cpu"], r["env_steps"] / r["wall"]
        print(f"{size:>6} {cpu:>18,.0f} {wall:>10,.0f} {cpu / base_cpu:>13.2f} {wall / base_wall:>14.2f}")
    print("\nwhere the time goes (CPU µs per env step per seed):")
    for size in (1, min(sizes, key=lambda s: abs(s - 100))):  # the solo run and the size nearest 100
        split = phases(size, args.steps)
        print(f"  S={size}: " + ", ".join(f"{k} {v:.1f}" for k, v in sorted(split.items(), key=lambda kv: -kv[1])))
    if any("agent.engine=torch" in kv for kv in EXTRA_SETS):
        return  # the Python part and the FLOP rate below are the numba engine's
    if args.python_sizes:
        python_part(args, [int(s) for s in args.python_sizes.split(",")])
    us, rate = update_flops(100)
    ceiling = sgemm_rate()
    print(f"\nbatched update (S=100, 4-128-2, batch 64): {us:.1f} µs per member update, {rate:.2f} GFLOP/s "
          f"= {rate / ceiling:.1%} of a single-thread 1024² sgemm ({ceiling:.0f} GFLOP/s)")  # fmt: skip


if __name__ == "__main__":
    main()
