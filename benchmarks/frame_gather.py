"""The Atari frame gather: µs per draw of S members' batches, and the resident memory of moving frame rings into a
cohort's blocks.

    python benchmarks/frame_gather.py [--sizes 1 4 16] [--n-steps 1 3] [--capacity 5000] [--rounds 15]
    python benchmarks/frame_gather.py --memory [--capacity 100000] [--members 4] [--transitions 1000]

Draws: S frame storages of (4, 84, 84) uint8 stacks (synthetic episodes, the rings wrapped), batches of 32
sampleable slots per member, gathered by the compiled :class:`~per_cli.replay.gather.FrameGather` ("new") and by
each member's own ``storage.gather`` (+ ``nstep``) stacked over the members with ``np.stack`` ("old", written out
below as the per-member gather did it: views with a member axis of one at S = 1). Both run in interleaved blocks
in one process; the table shows each's median over blocks of the per-draw mean (CPU time of this thread), and the
load average.

``--memory``: ``--members`` rings of ``--capacity`` transitions with ``--transitions`` added each, then the
process's resident memory (VmRSS) before and after building their cohort gather (each ring's frames moved into one
lazily zeroed block: only the frames written are copied).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import time
from pathlib import Path

import numpy as np

from per_cli.replay.gather import FrameGather
from per_cli.replay.storage.frames import FrameStackStorage
from per_cli.replay.store import add_transition

STACK, SIZE, BATCH, GAMMA = 4, 84, 32, 0.99


def _rss_mb() -> float:
    text = Path("/proc/self/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+) kB", text).group(1)) / 1024


def filled(capacity: int, transitions: int, seed: int) -> FrameStackStorage:
    """A frame ring given ``transitions`` transitions of distinct non-zero frames, episodes of 20..400 steps."""
    storage = FrameStackStorage(capacity, (STACK, SIZE, SIZE), check_memory=False)
    rng = np.random.default_rng(seed)
    pool = rng.integers(1, 256, size=(61, SIZE, SIZE), dtype=np.uint8)
    t, length = 0, 0
    obs = np.zeros((STACK, SIZE, SIZE), dtype=np.uint8)
    for i in range(transitions):
        if t == 0:  # a new episode: zero padding, then its first frame
            obs = np.zeros_like(obs)
            obs[-1] = pool[i % 61]
            length = int(rng.integers(20, 400))
        next_obs = np.concatenate([obs[1:], pool[(i * 7 + 3) % 61][None]])
        t += 1
        done = t >= length
        add_transition(storage, obs, i % 6, float(rng.normal()), next_obs, done, False)
        obs, t = (obs, 0) if done else (next_obs, t)
    return storage


def old_gather(storages, which: np.ndarray, slots: np.ndarray, n_step: int) -> dict:
    """The per-member gather the compiled one replaced: each storage's own gather, stacked over the members."""
    rows = []
    for k, i in enumerate(which.tolist()):
        storage = storages[i]
        ids = storage.ids[slots[k]]
        if n_step > 1:
            rewards, terminated, last = storage.nstep(slots[k], n_step, GAMMA)
            fields = {**storage.gather(slots[k], last), "rewards": rewards, "terminated": terminated}
        else:
            fields = storage.gather(slots[k])
        fields.update(indices=ids, ages=storage.added - 1 - ids, episodes=storage.episode_ids[slots[k]])
        rows.append(fields)
    if len(rows) == 1:
        return {name: array[None] for name, array in rows[0].items()}
    return {name: np.stack([row[name] for row in rows]) for name in rows[0]}


def draws(args: argparse.Namespace) -> None:
    storages = [filled(args.capacity, int(args.capacity * 1.3), seed) for seed in range(max(args.sizes))]
    held = [np.flatnonzero(s.sampleable(np.arange(s.size))) for s in storages]
    rng = np.random.default_rng(0)
    print(f"(4, 84, 84) uint8 stacks, batch {BATCH}, capacity {args.capacity:,}; µs per draw (CPU time), median of "
          f"{args.rounds} blocks; load {os.getloadavg()[0]:.2f}")  # fmt: skip
    print(f"{'S':>4} {'n-step':>6} {'old':>10} {'new':>10} {'old/new':>8}")
    for size in args.sizes:
        members = storages[:size]
        which = np.arange(size, dtype=np.int64)
        pool = [np.stack([rng.choice(held[i], BATCH) for i in range(size)]) for _ in range(64)]
        weights = np.ones((size, BATCH), dtype=np.float32)
        for n_step in args.n_steps:
            gather = FrameGather(members, n_step, GAMMA)  # (moves the members' columns into blocks: both read them)
            got, want = gather(which, pool[0], weights).arrays, old_gather(members, which, pool[0], n_step)
            assert all(getattr(got, name).tobytes() == want[name].tobytes() for name in want)
            times = {"old": [], "new": []}
            for _ in range(args.rounds):
                started = time.thread_time()
                for s in pool:
                    old_gather(members, which, s, n_step)
                times["old"].append((time.thread_time() - started) / len(pool) * 1e6)
                started = time.thread_time()
                for s in pool:
                    gather(which, s, weights)
                times["new"].append((time.thread_time() - started) / len(pool) * 1e6)
            old, new = statistics.median(times["old"]), statistics.median(times["new"])
            print(f"{size:>4} {n_step:>6} {old:>10.1f} {new:>10.1f} {old / new:>8.2f}", flush=True)
    print(f"load {os.getloadavg()[0]:.2f}")


def memory(args: argparse.Namespace) -> None:
    storages = [filled(args.capacity, args.transitions, seed) for seed in range(args.members)]
    ring_mb = storages[0].frames.nbytes / 2**20
    before = _rss_mb()
    gather = FrameGather(storages, 1, GAMMA)
    after = _rss_mb()
    written = min(storages[0].frames_written, storages[0].n_frames) * SIZE * SIZE / 2**20
    print(f"{args.members} frame rings of {args.capacity:,} transitions ({ring_mb:,.0f} MiB of frames each), "
          f"{args.transitions:,} added each ({written:.1f} MiB of frames written)")  # fmt: skip
    print(f"resident before the cohort's blocks {before:,.0f} MiB, after {after:,.0f} MiB (+{after - before:,.0f}); "
          f"a whole copy would touch {args.members * ring_mb:,.0f} MiB")  # fmt: skip
    assert gather.columns.frames.shape[0] == args.members


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--n-steps", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--capacity", type=int, default=None, help="transitions per ring")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--memory", action="store_true", help="the resident memory of moving rings into blocks")
    parser.add_argument("--members", type=int, default=4)
    parser.add_argument("--transitions", type=int, default=1000, help="added per ring (--memory)")
    args = parser.parse_args()
    if args.memory:
        args.capacity = args.capacity or 100_000
        memory(args)
    else:
        args.capacity = args.capacity or 5_000
        draws(args)


if __name__ == "__main__":
    main()
