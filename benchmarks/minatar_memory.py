"""Memory of 10^6 MinAtar transitions in the bit-packed storage, and the cost of unpacking a batch.

    python benchmarks/minatar_memory.py [--transitions 1000000] [--games breakout,seaquest]

For each game's state shape (10, 10, C), it fills a ``PackedTransitionStorage`` with ``--transitions``
transitions through ``add`` (random bool states: the bytes do not depend on the content) and prints

* the bytes its arrays hold (obs + next_obs packed, plus the scalar columns and ids), and the growth of the
  process's resident memory (VmRSS) from before allocating to after filling (pages are touched as the
  ring fills, so this is what the memory really costs);
* what the plain ring would hold for the same transitions with bool states (a byte per cell) and with
  float32 states, computed (not allocated), and the ratios;
* the time to gather a batch of 32 (unpacking included) against the plain bool ring's gather, on
  10^5 transitions.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from per_cli.replay.storage.packed import PackedTransitionStorage
from per_cli.replay.storage.ring import TransitionStorage
from per_cli.replay.store import add_transition

CHANNELS = {"asterix": 4, "breakout": 4, "freeway": 7, "seaquest": 10, "spaceinvaders": 6}


def rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def states(rng: np.random.Generator, n: int, shape: tuple[int, ...]) -> np.ndarray:
    return rng.random((n, *shape)) < 0.05  # MinAtar grids are mostly empty


def fill(storage, shape: tuple[int, ...], n: int, rng: np.random.Generator) -> None:
    pool = states(rng, 1024, shape)  # drawing 10^6 fresh states would cost more than the adds
    for t in range(n):
        add_transition(storage, pool[t % 1024], t % 3, 0.0, pool[(t + 1) % 1024], t % 100 == 99, False)


def gather_us(storage, rng: np.random.Generator, repeats: int = 2000) -> float:
    slots = rng.integers(0, storage.size, size=(repeats, 32))
    storage.gather(slots[0])
    t0 = time.perf_counter()
    for s in slots:
        storage.gather(s)
    return (time.perf_counter() - t0) / repeats * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transitions", type=int, default=1_000_000)
    parser.add_argument("--games", default="breakout,seaquest")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    n = args.transitions
    print(f"{n:,} transitions; MB = 10^6 bytes")
    print(f"{'game':<14} {'C':>2} {'packed MB':>10} {'RSS growth MB':>14} {'bool ring MB':>13} {'float32 MB':>11} "
          f"{'bool/packed':>12} {'gather32 packed µs':>19} {'bool ring µs':>13}")  # fmt: skip
    for game in args.games.split(","):
        shape = (10, 10, CHANNELS[game])
        before = rss_bytes()
        packed = PackedTransitionStorage(n, shape)
        fill(packed, shape, n, rng)
        grown = rss_bytes() - before
        held = sum(v.nbytes for v in vars(packed).values() if isinstance(v, np.ndarray))
        bool_ring = TransitionStorage.bytes_needed(n, shape, np.bool_)
        float_ring = TransitionStorage.bytes_needed(n, shape, np.float32)
        small = min(n, 100_000)
        plain = TransitionStorage(small, shape, np.bool_)
        fill(plain, shape, small, rng)
        us_plain = gather_us(plain, rng)
        us_packed = gather_us(packed, rng)
        print(f"{game:<14} {shape[2]:>2} {held / 1e6:>10.1f} {grown / 1e6:>14.1f} {bool_ring / 1e6:>13.1f} "
              f"{float_ring / 1e6:>11.1f} {bool_ring / held:>12.2f} {us_packed:>19.1f} {us_plain:>13.1f}")  # fmt: skip
        del packed, plain


if __name__ == "__main__":
    main()
