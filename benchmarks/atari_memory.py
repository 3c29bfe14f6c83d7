"""Resident memory of a full Atari replay memory: 10^6 transitions of 4 x 84 x 84 uint8 frame stacks.

    python benchmarks/atari_memory.py [--capacity 1000000] [--kind prioritized] [--episode-length 900]
                                      [--import-torch]

Builds the memory exactly as ``per train`` does for ``pong`` (``make_replay``: the frame storage plus the
sampler of ``--kind``), fills it past its capacity with synthetic episodes of distinct, non-zero frames
(so every page of the ring is written), samples a few batches, and prints the process's resident memory
(VmRSS, and its peak VmHWM) against the 7.5 GB target. For comparison it prints what storing stacks as
they come would need. ``--import-torch`` imports torch first, as a training process does (~0.2 GB more).

Run it when nothing else big is running: it needs ~7.5 GB of free memory.
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

import numpy as np

TARGET_GB = 7.5


def _status_gb(field: str) -> float:
    text = Path("/proc/self/status").read_text()
    return int(re.search(rf"{field}:\s+(\d+) kB", text).group(1)) * 1024 / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capacity", type=int, default=1_000_000)
    parser.add_argument("--kind", default="prioritized", help="replay kind (the sampler's memory counts too)")
    parser.add_argument("--episode-length", type=int, default=900, help="agent steps per synthetic episode")
    parser.add_argument("--fill", type=float, default=1.05, help="transitions added, as a multiple of capacity")
    parser.add_argument("--import-torch", action="store_true", help="import torch first, as `per train` does")
    args = parser.parse_args()

    if args.import_torch:
        import torch  # noqa: F401

    from per_cli.config import load_config
    from per_cli.envs import frame_stack_of
    from per_cli.replay import make_replay
    from per_cli.replay.storage.frames import FrameStackStorage

    stack, size = 4, 84
    shape = (stack, size, size)
    rss_before = _status_gb("VmRSS")
    cfg = load_config(None, ["env.id=pong", f"replay.kind={args.kind}", f"replay.capacity={args.capacity}"])
    memory = make_replay(cfg, shape, np.dtype(np.uint8), seed=0, frame_stack=frame_stack_of(cfg.env))
    storage = memory.storage
    assert isinstance(storage, FrameStackStorage)
    frame_bytes = size * size
    print(f"capacity {args.capacity:,} transitions of {shape} uint8, replay kind {args.kind}")
    print(f"  frames in the ring          {storage.n_frames:,} ({storage.n_frames - args.capacity:,} extra)")
    print(f"  requested (frames + slots)  {FrameStackStorage.bytes_needed(args.capacity, shape) / 1e9:.3f} GB")
    print(f"  floor: one frame each       {args.capacity * frame_bytes / 1e9:.3f} GB")
    print(f"  stacked obs only            {args.capacity * stack * frame_bytes / 1e9:.3f} GB")
    print(f"  stacked obs + next_obs      {2 * args.capacity * stack * frame_bytes / 1e9:.3f} GB")
    loaded = "Python, numpy, numba" + (", torch" if args.import_torch else "")
    print(f"resident before the memory    {rss_before:.3f} GB ({loaded})")

    rng = np.random.default_rng(0)
    pool = rng.integers(1, 256, size=(257, size, size), dtype=np.uint8)  # distinct non-zero frames
    total = int(args.fill * args.capacity)
    started = time.perf_counter()
    obs = np.zeros(shape, dtype=np.uint8)
    t = 0
    for i in range(total):
        if t == 0:  # a new episode: zero padding, then its first frame
            obs = np.zeros(shape, dtype=np.uint8)
            obs[-1] = pool[i % 257]
        frame = pool[(i * 7 + 3) % 257].copy()
        frame[0, :8] = np.frombuffer(np.int64(i).tobytes(), dtype=np.uint8)  # every frame unique
        next_obs = np.concatenate([obs[1:], frame[None]])
        t += 1
        done = t >= args.episode_length
        memory.add(obs, i % 6, 0.0, next_obs, done, False)
        obs = next_obs
        if done:
            t = 0
        if (i + 1) % 200_000 == 0:
            print(f"  {i + 1:>9,} added  {(i + 1) / (time.perf_counter() - started):,.0f}/s  "
                  f"resident {_status_gb('VmRSS'):.3f} GB", flush=True)  # fmt: skip
    fill_s = time.perf_counter() - started

    timings = []
    for _ in range(50):
        t0 = time.perf_counter()
        batch = memory.sample(32, 0.5)
        memory.update_priorities(batch.indices, rng.random(32))
        timings.append(time.perf_counter() - t0)
    assert batch.obs.shape == (32, *shape)

    rss, peak = _status_gb("VmRSS"), _status_gb("VmHWM")
    print(f"filled {total:,} transitions in {fill_s:.0f} s ({total / fill_s:,.0f}/s); "
          f"{storage.added - storage.oldest_sampleable_id():,} of {storage.size:,} sampleable")  # fmt: skip
    print(f"sample(32) + update_priorities: median {np.median(timings) * 1e6:.0f} µs")
    print(f"resident memory: {rss:.3f} GB (peak {peak:.3f} GB); the memory itself {rss - rss_before:.3f} GB")
    print(f"target <= {TARGET_GB} GB: {'met' if peak <= TARGET_GB else 'MISSED'}")


if __name__ == "__main__":
    main()
