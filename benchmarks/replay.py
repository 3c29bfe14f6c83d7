"""What one prioritized replay cycle costs, against the best replay libraries, in the same run.

A cycle is ``sample(B)`` (indices, IS weights and the gathered batch arrays) followed by
``update_priorities(B)`` on a *full* memory of N transitions with 4-float states, for N in {1e4, 1e5, 1e6}
and B in {32, 256}. Implementations, all in this process:

* ``prioritized``: per's ``ReplayMemory`` + ``PrioritizedSampler`` (K-ary numba sum tree), the whole
  memory face the training loop uses (``memory.sample(B, beta)`` + ``memory.update_priorities``);
* ``rank``: the same with ``RankSampler`` (binary heap + exact re-sort; see the re-sort table);
* ``cpprb``: cpprb's ``PrioritizedReplayBuffer`` (C++/Cython), ``sample(B, beta)`` + ``update_priorities``;
* ``tianshou``: Tianshou's ``PrioritizedReplayBuffer`` (numba segment tree), ``sample(B)`` + ``update_weight``;
* ``python``: the seed notebook's recursive pure-Python sum tree (``_propagate``/``_retrieve`` recursion,
  a Python loop over the batch), reimplemented below as the baseline.

The competitors come from the ``bench`` extra (``pip install -e ".[bench]"``); a missing one is reported and
skipped. Timing: the implementations run in interleaved blocks of cycles (a rotating order, so a burst of
load on a shared machine hits them alike); each block gives a per-cycle mean, and the table shows the
median over blocks. ``--clock cpu`` (default) measures this thread's CPU time, which a busy machine
inflates far less than wall time; ``--clock wall`` measures wall time. Ratios are medians of the per-round
ratios of paired blocks. The load average is printed with every row.

    python benchmarks/replay.py [--sizes 1e4 1e5 1e6] [--batches 32 256] [--rounds 15] [--clock cpu|wall]
                                [--train-steps 10000]

Also printed: numba compile time of the replay kernels (cold cache, in a fresh process with an empty
``NUMBA_CACHE_DIR``, then warm from that cache), the cost of the rank sampler's exact re-sort, and with
``--train-steps`` the env steps per second of one CartPole run per kind (uniform, prioritized, rank).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np

from per_cli.replay.memory import ReplayMemory
from per_cli.replay.samplers import PrioritizedSampler, RankSampler
from per_cli.replay.storage.ring import TransitionStorage

ALPHA, BETA, EPS = 0.6, 0.4, 1e-6
OBS_DIM = 4
TD_POOL = 64  # distinct TD-error arrays cycled through, the same for every implementation


# ----------------------------------------------------------------------------------------------------------
# the seed notebook's sum tree, reimplemented as the baseline


class RecursiveSumTree:
    """A binary sum tree in one array (children of i at 2i+1, 2i+2), recursive propagate and retrieve."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.tree = np.zeros(2 * capacity - 1)
        self.data = np.zeros(capacity, dtype=object)
        self.write = 0
        self.n_entries = 0

    def _propagate(self, idx: int, change: float) -> None:
        parent = (idx - 1) // 2
        self.tree[parent] += change
        if parent != 0:
            self._propagate(parent, change)

    def _retrieve(self, idx: int, s: float) -> int:
        left = 2 * idx + 1
        right = left + 1
        if left >= len(self.tree):
            return idx
        if s <= self.tree[left]:
            return self._retrieve(left, s)
        return self._retrieve(right, s - self.tree[left])

    def total(self) -> float:
        return self.tree[0]

    def update(self, idx: int, p: float) -> None:
        change = p - self.tree[idx]
        self.tree[idx] = p
        self._propagate(idx, change)

    def get(self, s: float):
        idx = self._retrieve(0, s)
        return idx, self.tree[idx], self.data[idx - self.capacity + 1]


class RecursiveMemory:
    """The notebook's PER memory around it: stratified sampling, batch-max-normalised IS weights."""

    def __init__(self, capacity: int, obs: np.ndarray, priorities: np.ndarray):
        self.tree = RecursiveSumTree(capacity)
        for i in range(capacity):
            self.tree.data[i] = (obs[i], 0, 0.0, obs[i], False)
        self.tree.n_entries = capacity
        t = self.tree.tree
        t[capacity - 1 :] = priorities**ALPHA
        for i in range(capacity - 2, -1, -1):  # bulk build (the notebook added one at a time)
            t[i] = t[2 * i + 1] + t[2 * i + 2]

    def sample(self, n: int, beta: float):
        batch, idxs, priorities = [], [], []
        segment = self.tree.total() / n
        for i in range(n):
            s = random.uniform(segment * i, segment * (i + 1))
            idx, p, data = self.tree.get(s)
            priorities.append(p)
            batch.append(data)
            idxs.append(idx)
        probs = np.array(priorities) / self.tree.total()
        is_weight = np.power(self.tree.n_entries * probs, -beta)
        is_weight /= is_weight.max()
        return batch, idxs, is_weight

    def update(self, idxs, errors) -> None:
        for idx, error in zip(idxs, errors, strict=True):
            self.tree.update(idx, (abs(error) + EPS) ** ALPHA)


# ----------------------------------------------------------------------------------------------------------
# building full memories


def _data(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    obs = rng.standard_normal((n, OBS_DIM)).astype(np.float32)
    td = np.abs(rng.standard_normal(n)) + 1e-3
    return obs, td


def build_per(kind: str, n: int) -> ReplayMemory:
    obs, td = _data(n)
    storage = TransitionStorage(n, (OBS_DIM,), np.float32)
    storage.obs[:] = obs
    storage.next_obs[:] = obs
    storage.ids[:] = np.arange(n)
    storage.size = storage.added = n
    storage.cursor = 0
    rng = np.random.default_rng(1)
    sampler = PrioritizedSampler(storage, rng, ALPHA, EPS) if kind == "prioritized" else RankSampler(storage, rng)
    memory = ReplayMemory(storage, sampler)
    slots = np.arange(n)  # every slot enters, in order (the kind's add_members over this member alone)
    type(sampler).add_members(memory.lists, np.zeros(n, dtype=np.int64), slots, np.ones(n, dtype=np.bool_))
    for start in range(0, n, 65536):
        ids = np.arange(start, min(n, start + 65536))
        memory.update_priorities(ids, td[ids])
    if kind == "rank":
        sampler.resort()
    return memory


def per_cycle(memory: ReplayMemory, batch_size: int, tds: list[np.ndarray]) -> Callable[[int], None]:
    def run(i: int) -> None:
        batch = memory.sample(batch_size, BETA)
        memory.update_priorities(batch.indices, tds[i % TD_POOL])

    return run


def build_cpprb(n: int):
    from cpprb import PrioritizedReplayBuffer

    obs, td = _data(n)
    env_dict = {
        "obs": {"shape": OBS_DIM},
        "act": {"dtype": np.int64},
        "rew": {},
        "next_obs": {"shape": OBS_DIM},
        "done": {},
    }
    buf = PrioritizedReplayBuffer(n, env_dict, alpha=ALPHA, eps=EPS)
    buf.add(obs=obs, act=np.zeros(n, np.int64), rew=np.zeros(n), next_obs=obs, done=np.zeros(n))
    buf.update_priorities(np.arange(n), td)
    return buf


def cpprb_cycle(buf, batch_size: int, tds: list[np.ndarray]) -> Callable[[int], None]:
    def run(i: int) -> None:
        sample = buf.sample(batch_size, beta=BETA)
        # cpprb takes priorities, not TD errors: abs(δ) is the caller's job (a negative one would be NaN)
        buf.update_priorities(sample["indexes"], np.abs(tds[i % TD_POOL]))

    return run


def build_tianshou(n: int):
    from tianshou.data import Batch, PrioritizedReplayBuffer

    obs, td = _data(n)
    buf = PrioritizedReplayBuffer(n, alpha=ALPHA, beta=BETA)
    zeros = np.zeros(n, dtype=bool)
    buf.set_batch(
        Batch(
            obs=obs,
            act=np.zeros(n, np.int64),
            rew=np.zeros(n, np.float32),
            terminated=zeros,
            truncated=zeros,
            done=zeros,
            obs_next=obs,
        )
    )
    buf._size = n
    buf.init_weight(np.arange(n))
    buf.update_weight(np.arange(n), td)
    return buf


def tianshou_cycle(buf, batch_size: int, tds: list[np.ndarray]) -> Callable[[int], None]:
    def run(i: int) -> None:
        batch, indices = buf.sample(batch_size)
        buf.update_weight(indices, tds[i % TD_POOL])

    return run


def build_python(n: int) -> RecursiveMemory:
    obs, td = _data(n)
    return RecursiveMemory(n, obs, td)


def python_cycle(memory: RecursiveMemory, batch_size: int, tds: list[np.ndarray]) -> Callable[[int], None]:
    def run(i: int) -> None:
        _, idxs, _ = memory.sample(batch_size, BETA)
        memory.update(idxs, tds[i % TD_POOL])

    return run


BUILDERS = {
    "prioritized": (lambda n: build_per("prioritized", n), per_cycle),
    "rank": (lambda n: build_per("rank", n), per_cycle),
    "cpprb": (build_cpprb, cpprb_cycle),
    "tianshou": (build_tianshou, tianshou_cycle),
    "python": (build_python, python_cycle),
}
PEERS = ("cpprb", "tianshou")


# ----------------------------------------------------------------------------------------------------------
# timing


def _clock(name: str) -> Callable[[], float]:
    return time.thread_time if name == "cpu" else time.perf_counter


def time_cell(cycles: dict[str, Callable[[int], None]], rounds: int, block_s: float, clock) -> dict[str, list[float]]:
    """Per-cycle seconds of each implementation, one value per round; blocks interleaved, order rotating."""
    # calibrate the cycles per block (and warm up)
    per_block = {}
    for name, run in cycles.items():
        start = clock()
        count = 0
        while clock() - start < block_s / 4 or count < 3:
            run(count)
            count += 1
        per_block[name] = max(3, int(count * 4 * 1.0))  # ~block_s per block
    names = list(cycles)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            run, n = cycles[name], per_block[name]
            start = clock()
            for i in range(n):
                run(i)
            samples[name].append((clock() - start) / n)
    return samples


def rank_resort_cost(n: int, repeats: int = 5) -> float:
    memory = build_per("rank", n)
    sampler = memory.sampler
    times = []
    rng = np.random.default_rng(0)
    sampler.resort_period = 10**12  # no automatic sort while scrambling
    for _ in range(repeats):
        memory.update_priorities(np.arange(n), rng.random(n))  # a heap as it is between sorts (ids = slots)
        start = time.perf_counter()
        sampler.resort()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


COMPILE_SNIPPET = """
import time
t0 = time.perf_counter()
import numpy as np
from per_cli.replay.memory import ReplayMemory
from per_cli.replay.samplers import PrioritizedSampler, RankSampler
from per_cli.replay.storage.ring import TransitionStorage
t1 = time.perf_counter()
for cls in (PrioritizedSampler, RankSampler):
    st = TransitionStorage(1000, (4,), np.float32)
    m = ReplayMemory(st, cls(st, np.random.default_rng(0)))
    o = np.zeros(4, np.float32)
    for _ in range(100):
        m.add(o, 0, 0.0, o, False, False)
    b = m.sample(32, 0.4)
    m.update_priorities(b.indices, np.ones(32))
    m.sampler.stats()
t2 = time.perf_counter()
print(f"{t1 - t0:.3f} {t2 - t1:.3f}")
"""


def compile_times() -> tuple[tuple[float, float], tuple[float, float]]:
    """(import, first use) seconds with a cold numba cache, then with the cache that run wrote."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        out = []
        for _ in range(2):
            cmd = [sys.executable, "-c", COMPILE_SNIPPET]
            res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
            imp, use = map(float, res.stdout.split())
            out.append((imp, use))
    return out[0], out[1]


# ----------------------------------------------------------------------------------------------------------


def train_throughput(steps: int, repeats: int) -> None:
    """Env steps per second (CPU time of this process) of the same CartPole run with each kind: one
    gradient step per env step, so the replay's share of a step is as large as DQN makes it."""
    import pathlib

    from per_cli.config import load_config
    from per_cli.train.loop.trainer import build_member, run_member

    root = pathlib.Path(__file__).resolve().parents[1]
    overrides = [
        f"train.total_steps={steps}",
        "train.train_freq=1",
        "train.gradient_steps=1",
        "train.eval_episodes=0",
        "log.tensorboard=false",
        "agent.hidden_sizes=[128]",
        "agent.target_update_period=500",
    ]
    kinds = ("uniform", "prioritized", "rank")
    rates: dict[str, list[float]] = {kind: [] for kind in kinds}
    for _ in range(repeats):
        for kind in kinds:
            cfg = load_config(root / "configs/cartpole_uniform.yaml", [*overrides, f"replay.kind={kind}"], seed=1)
            member = build_member(cfg, device="cpu")
            with tempfile.TemporaryDirectory() as run_dir:
                start = time.process_time()
                run_member(member, pathlib.Path(run_dir))
                rates[kind].append(steps / (time.process_time() - start))
    uniform = statistics.median(rates["uniform"])
    print(f"# training throughput: CartPole, {steps} steps, one update per step, median of {repeats} (CPU time)")
    for kind in kinds:
        rate = statistics.median(rates[kind])
        print(f"#   {kind:12s} {rate:8.0f} steps/s  {rate / uniform:.2f}x uniform")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[1e4, 1e5, 1e6])
    parser.add_argument("--batches", type=int, nargs="+", default=[32, 256])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--block-ms", type=float, default=20.0, help="target length of one timed block")
    parser.add_argument("--clock", choices=["cpu", "wall"], default="cpu")
    parser.add_argument("--impls", nargs="+", default=list(BUILDERS), choices=list(BUILDERS))
    parser.add_argument("--no-compile-time", action="store_true")
    parser.add_argument("--train-steps", type=int, default=0, help="also time CartPole training per kind")
    parser.add_argument("--train-repeats", type=int, default=3)
    args = parser.parse_args(argv)
    clock = _clock(args.clock)

    impls = []
    for name in args.impls:
        if name in PEERS:
            try:
                __import__("cpprb" if name == "cpprb" else "tianshou.data")
            except ImportError as exc:
                print(f"# {name}: not installed ({exc}); install the bench extra: pip install -e '.[bench]'")
                continue
        impls.append(name)

    if not args.no_compile_time:
        (imp0, use0), (imp1, use1) = compile_times()
        print(
            f"# numba compile: cold cache import {imp0:.2f} s + first use {use0:.2f} s; "
            f"warm cache import {imp1:.2f} s + first use {use1:.2f} s"
        )
    print(
        f"# clock: {args.clock}; median µs per sample(B)+update_priorities(B) cycle over {args.rounds} "
        f"interleaved blocks; ratios: median of paired per-round ratios; cpus {os.cpu_count()}"
    )
    peers = [p for p in PEERS if p in impls]
    header = ["N", "B", *impls]
    if "prioritized" in impls and peers:
        header.append("per/best peer")
    if "rank" in impls and "prioritized" in impls:
        header.append("rank/per")
    header.append("load")
    print(" | ".join(f"{h:>13}" for h in header))
    resort: dict[int, float] = {}
    for size in args.sizes:
        n = int(size)
        built = {name: BUILDERS[name][0](n) for name in impls}
        for batch_size in args.batches:
            tds = [np.random.default_rng(100 + i).standard_normal(batch_size) for i in range(TD_POOL)]
            cycles = {name: BUILDERS[name][1](built[name], batch_size, tds) for name in impls}
            block_s = args.block_ms / 1000
            rounds = args.rounds
            samples = time_cell(cycles, rounds, block_s, clock)
            med = {name: statistics.median(v) * 1e6 for name, v in samples.items()}
            row = [f"{n:.0e}", str(batch_size), *(f"{med[name]:.1f}" for name in impls)]
            if "prioritized" in impls and peers:
                ratios = [samples["prioritized"][r] / min(samples[p][r] for p in peers) for r in range(rounds)]
                row.append(f"{statistics.median(ratios):.2f}")
            if "rank" in impls and "prioritized" in impls:
                ratios = [samples["rank"][r] / samples["prioritized"][r] for r in range(rounds)]
                row.append(f"{statistics.median(ratios):.2f}")
            row.append(f"{os.getloadavg()[0]:.1f}")
            print(" | ".join(f"{c:>13}" for c in row), flush=True)
        if "rank" in impls:
            resort[n] = rank_resort_cost(n)
        del built
    if resort:
        print("# rank re-sort (np.sort of the heap's uint64 keys, then the slot -> position map), wall time; with")
        print("# the default resort_period (once per `capacity` updated priorities) it costs sort·B/N per cycle:")
        for n, t in resort.items():
            amortised = ", ".join(f"B={b}: {t * b / n * 1e6:.1f} µs/cycle" for b in args.batches)
            print(f"#   N={n:.0e}: {t * 1e3:.1f} ms per sort; {amortised}")
    if args.train_steps:
        train_throughput(args.train_steps, args.train_repeats)


if __name__ == "__main__":
    main()
