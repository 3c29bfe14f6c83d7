"""``uniform_integer`` against numba's ``Generator.integers``, in one invocation: ns per scalar draw, and µs per
``draw_distinct`` of a batch (the uniform kind's draw: Floyd's set and a shuffle, two integers per value), the
baseline being the same loop written with ``integers`` here.

    python benchmarks/uniform_integer.py [--batch 64] [--candidates 50000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import time

import numba
import numpy as np

from per_cli.replay.integers import uniform_integer
from per_cli.replay.sampler import draw_distinct


@numba.njit(cache=True)
def _scalar_new(generator, n, reps):
    total = 0
    for r in range(reps):
        total += uniform_integer(generator, 0, n + (r & 7))
    return total


@numba.njit(cache=True)
def _scalar_old(generator, n, reps):
    total = 0
    for r in range(reps):
        total += generator.integers(0, n + (r & 7))
    return total


@numba.njit(cache=True)
def _distinct_old(generator, n, count, out):
    """``draw_distinct`` as it was, with numba's ``integers``: the baseline."""
    mask = 1
    while mask < 2 * count:
        mask *= 2
    table = np.full(mask, -1, dtype=np.int64)
    mask -= 1
    for t in range(count):
        j = n - count + t
        value = generator.integers(0, j + 1)
        at = value & mask
        while table[at] != -1 and table[at] != value:
            at = (at + 1) & mask
        if table[at] == value:
            value = j
            at = value & mask
            while table[at] != -1:
                at = (at + 1) & mask
        table[at] = value
        out[t] = value
    for t in range(count - 1, 0, -1):
        r = generator.integers(0, t + 1)
        out[t], out[r] = out[r], out[t]


@numba.njit(cache=True)
def _batches(draw, generator, n, count, reps, out):
    for _ in range(reps):
        draw(generator, n, count, out)


def _best(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--candidates", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    n, count, out = args.candidates, args.batch, np.empty(args.batch, dtype=np.int64)
    got, want = np.empty_like(out), np.empty_like(out)
    draw_distinct(np.random.default_rng(3), n, count, got)
    _distinct_old(np.random.default_rng(3), n, count, want)
    assert np.array_equal(got, want), "the two draws differ"
    scalar_reps, batch_reps = 2_000_000, 20_000
    rows = [
        ("scalar draw (ns)", 1e9 / scalar_reps,
         lambda: _scalar_old(np.random.default_rng(0), n, scalar_reps),
         lambda: _scalar_new(np.random.default_rng(0), n, scalar_reps)),
        (f"draw_distinct of {count} (µs)", 1e6 / batch_reps,
         lambda: _batches(_distinct_old, np.random.default_rng(0), n, count, batch_reps, out),
         lambda: _batches(draw_distinct, np.random.default_rng(0), n, count, batch_reps, out)),
    ]  # fmt: skip
    print(f"{'':28s} {'integers':>10s} {'uniform_integer':>16s} {'speed-up':>9s}")
    for name, scale, old, new in rows:
        old(), new()  # (compiled)
        t_old, t_new = _best(old, args.repeats) * scale, _best(new, args.repeats) * scale
        print(f"{name:28s} {t_old:10.2f} {t_new:16.2f} {t_old / t_new:8.2f}x")


if __name__ == "__main__":
    main()
