"""The Atari frame store: µs per store call of S members' rows (one row each, as a cohort's step stores them).

    python benchmarks/frame_store.py [--sizes 1 4 16] [--capacity 1000] [--rounds 15] [--calls 64]

S frame storages of (4, 84, 84) uint8 stacks, synthetic episodes of 20..400 steps (zero padding at each start),
200 steps of rows replayed in a cycle (each pass starts new episodes), the rings wrapping around. "new": the
compiled :class:`~per_cli.replay.storage.frame_store.FrameStore` over the members, one call a step; "old": the
per-member Python ``add`` it replaced, written out below (:class:`OldFrames`, its logic over plain arrays, with the
events ``ReplayMemory._store`` built from it), a loop over the members. Both store the same rows (checked byte for
byte once) in interleaved blocks in one process; the table shows each's median over blocks of the per-call mean
(CPU time of this thread), and the load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from per_cli.replay.storage.frame_store import FrameStore
from per_cli.replay.storage.frames import FrameStackStorage, ring_frames
from per_cli.replay.storage.rows import Rows, rows_of
from per_cli.replay.store import add_transition

STACK, SIZE = 4, 84


class OldFrames:
    """The frame storage's store before the compiled one: its Python ``add`` over plain arrays and counters."""

    def __init__(self, capacity: int):
        self.capacity, self.stack, self.n_frames = capacity, STACK, ring_frames(capacity, STACK, None)
        self.obs_shape = (STACK, SIZE, SIZE)
        self.frames = np.zeros((self.n_frames, SIZE, SIZE), dtype=np.uint8)
        self.frame_gid = np.zeros(capacity, dtype=np.int64)
        self.hist = np.zeros(capacity, dtype=np.uint8)
        self.actions = np.zeros(capacity, dtype=np.uint8)
        self.rewards = np.zeros(capacity, dtype=np.float32)
        self.terminated = np.zeros(capacity, dtype=bool)
        self.truncated = np.zeros(capacity, dtype=bool)
        self.ids = np.full(capacity, -1, dtype=np.int64)
        self.episode_ids = np.full(capacity, -1, dtype=np.int64)
        self.cursor = self.size = self.added = self.episodes_ended = 0
        self.frames_written = self.first_sampleable_id = 0
        self.newly_unsampleable = np.zeros(0, dtype=np.int64)
        self._episode_open = False
        self._last_next = np.zeros(self.obs_shape, dtype=np.uint8)

    def _write_frame(self, frame: np.ndarray) -> None:
        self.frames[self.frames_written % self.n_frames] = frame
        self.frames_written += 1

    def add(self, obs, action, reward, next_obs, terminated, truncated) -> int:
        obs, next_obs = np.asarray(obs), np.asarray(next_obs)
        if obs.shape != self.obs_shape or next_obs.shape != self.obs_shape:
            raise ValueError(f"expected observations of shape {self.obs_shape}, got {obs.shape} and {next_obs.shape}")
        s = self.stack
        if not np.array_equal(next_obs[:-1], obs[1:]):
            raise ValueError("FrameStackStorage needs next_obs to be obs shifted by one frame (a frame stack)")
        if self._episode_open and np.array_equal(obs, self._last_next):
            hist = min(int(self.hist[(self.cursor - 1) % self.capacity]) + 1, s - 1)
        else:
            pad = 0
            while pad < s - 1 and not obs[pad].any():
                pad += 1
            for frame in obs[pad:]:
                self._write_frame(frame)
            hist = s - 1 - pad
        slot = self.cursor
        self.frame_gid[slot] = self.frames_written - 1
        self.hist[slot] = hist
        self._write_frame(next_obs[-1])
        if not 0 <= action < 256:
            raise ValueError(f"FrameStackStorage keeps actions as uint8 (Atari has <= 18), got {action}")
        self.actions[slot], self.rewards[slot] = action, reward
        self.terminated[slot], self.truncated[slot] = terminated, truncated
        self.ids[slot], self.episode_ids[slot] = self.added, self.episodes_ended
        if terminated or truncated:
            self.episodes_ended += 1
        self.added += 1
        self.cursor = (slot + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)
        self._episode_open = not (terminated or truncated)
        self._last_next[...] = next_obs
        oldest_kept = self.frames_written - self.n_frames
        start = first = max(self.first_sampleable_id, self.added - self.size)
        while first < self.added:
            if self.frame_gid[first % self.capacity] - int(self.hist[first % self.capacity]) >= oldest_kept:
                break
            first += 1
        self.first_sampleable_id = first
        self.newly_unsampleable = np.arange(start, first, dtype=np.int64) % self.capacity
        return slot


def old_store(olds: list[OldFrames], rows: Rows) -> list[tuple]:
    """Each member's ``add`` in turn, and the events ``ReplayMemory._store`` made of it."""
    events = []
    for k, i in enumerate(rows.which.tolist()):
        st = olds[i]
        slot = add_transition(st, rows.obs[k], rows.actions[k], rows.rewards[k], rows.next_obs[k], rows.terminated[k],
                      rows.truncated[k])  # fmt: skip
        dropped = st.newly_unsampleable
        if not dropped.size:
            events.append((i, slot))
        else:
            slots = np.concatenate((np.array([slot]), dropped))
            entering = np.zeros(slots.shape[0], dtype=np.bool_)
            entering[0] = st.ids[slot] >= st.first_sampleable_id
            events.append((i, slots, entering))
    return events


def streams(members: int, steps: int) -> list[Rows]:
    """``steps`` calls of one row per member: synthetic episodes of 20..400 steps, padded at their start."""
    rng = np.random.default_rng(0)
    pool = rng.integers(1, 256, size=(61, SIZE, SIZE), dtype=np.uint8)
    obs = np.zeros((members, STACK, SIZE, SIZE), dtype=np.uint8)
    t, length = np.zeros(members, dtype=np.int64), np.zeros(members, dtype=np.int64)
    calls = []
    for step in range(steps):
        start = t == 0
        obs[start] = 0
        obs[start, -1] = pool[step % 61]
        length[start] = rng.integers(20, 400, size=int(start.sum()))
        newest = np.stack([pool[(step * 7 + 3 + i) % 61] for i in range(members)])
        next_obs = np.concatenate([obs[:, 1:], newest[:, None]], axis=1)
        t += 1
        done = t >= length
        calls.append(rows_of(np.arange(members), obs.copy(), np.full(members, step % 6), rng.normal(size=members),
                             next_obs, done, np.zeros(members, dtype=bool)))  # fmt: skip
        obs = np.where(done[:, None, None, None], obs, next_obs)
        t[done] = 0
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--capacity", type=int, default=1000, help="transitions per ring")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=64, help="store calls per timed block")
    args = parser.parse_args()
    print(f"(4, 84, 84) uint8 stacks, capacity {args.capacity:,}, one row per member a call; µs per store call (CPU "
          f"time), median of {args.rounds} blocks of {args.calls}; load {os.getloadavg()[0]:.2f}")  # fmt: skip
    print(f"{'S':>4} {'old':>10} {'new':>10} {'old/new':>8}")
    steps = 200  # (replayed in a cycle: each pass starts new episodes)
    for size in args.sizes:
        calls = streams(size, steps)
        news = [FrameStackStorage(args.capacity, (STACK, SIZE, SIZE), check_memory=False) for _ in range(size)]
        olds = [OldFrames(args.capacity) for _ in range(size)]
        store = FrameStore(news)
        warm = args.capacity + 100  # (warm-up past the rings' wrap-around, then both checked equal)
        for step in range(warm):
            store(calls[step % steps])
            old_store(olds, calls[step % steps])
        step = warm
        assert all(
            o.frames.tobytes() == n.frames.tobytes()
            and o.frame_gid.tobytes() == n.frame_gid.tobytes()
            and o.first_sampleable_id == n.first_sampleable_id
            for o, n in zip(olds, news, strict=True)
        )
        times = {"old": [], "new": []}
        for _ in range(args.rounds):
            block = [calls[(step + j) % steps] for j in range(args.calls)]
            step += args.calls
            started = time.thread_time()
            for rows in block:
                old_store(olds, rows)
            times["old"].append((time.thread_time() - started) / args.calls * 1e6)
            started = time.thread_time()
            for rows in block:
                store(rows)
            times["new"].append((time.thread_time() - started) / args.calls * 1e6)
        old, new = statistics.median(times["old"]), statistics.median(times["new"])
        print(f"{size:>4} {old:>10.1f} {new:>10.1f} {old / new:>8.2f}", flush=True)
    print(f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
