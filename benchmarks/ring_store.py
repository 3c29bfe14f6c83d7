"""A cohort's store of one step (a transition per member) into bit-packed rings, MinAtar's (10, 10, 4) bool states
under a prioritized kind: the one store call over the members (replay/store.py: every row packed in one packbits,
then one compiled write) against the member-by-member route it replaced: each member's own ``add_transition``
(the store over that one storage) and kind event, in one invocation. µs per step, best of ``--repeats``.

    python benchmarks/ring_store.py [--sizes 1,10,100] [--steps 2000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from per_cli.replay.cohort import CohortSampling
from per_cli.replay.memory import ReplayMemory
from per_cli.replay.sampler import MemberLists
from per_cli.replay.samplers import PrioritizedSampler
from per_cli.replay.storage.packed import PackedTransitionStorage
from per_cli.replay.storage.ring import ONE
from per_cli.replay.store import add_transition

SHAPE = (10, 10, 4)


def _memories(size: int, capacity: int) -> list[ReplayMemory]:
    out = []
    for seed in range(size):
        storage = PackedTransitionStorage(capacity, SHAPE)
        out.append(ReplayMemory(storage, PrioritizedSampler(storage, np.random.default_rng(seed))))
    return out


def _steps(size: int, steps: int) -> list[tuple]:
    rng = np.random.default_rng(0)
    return [
        (rng.random((size, *SHAPE)) < 0.1, rng.integers(0, 3, size), rng.normal(size=size).astype(np.float32),
         rng.random((size, *SHAPE)) < 0.1, rng.random(size) < 0.01, np.zeros(size, dtype=np.bool_))
        for _ in range(steps)
    ]  # fmt: skip


def _one_call(size: int, steps: list[tuple], capacity: int) -> float:
    sampling = CohortSampling(_memories(size, capacity))
    which = np.arange(size, dtype=np.int64)
    start = time.perf_counter()
    for step in steps:
        sampling.store(which, *step)
    return time.perf_counter() - start


def _each_member(size: int, steps: list[tuple], capacity: int) -> float:
    """The per-member route: member by member, its storage's own add, then its kind's event for the slot."""
    memories = _memories(size, capacity)
    lists = [MemberLists.of([m.sampler]) for m in memories]
    slot, entering = np.zeros(1, dtype=np.int64), np.ones(1, dtype=np.bool_)
    start = time.perf_counter()
    for obs, actions, rewards, next_obs, terminated, truncated in steps:
        for k, memory in enumerate(memories):
            slot[0] = add_transition(
                memory.storage, obs[k], actions[k], rewards[k], next_obs[k], terminated[k], truncated[k]
            )
            PrioritizedSampler.add_members(lists[k], ONE, slot, entering)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,10,100")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--capacity", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"{'S':>4} {'each member µs/step':>20} {'one call µs/step':>17} {'ratio':>6}")
    for size in (int(s) for s in args.sizes.split(",")):
        steps = _steps(size, args.steps)
        _one_call(size, steps[:10], args.capacity), _each_member(size, steps[:10], args.capacity)  # (compile)
        old = min(_each_member(size, steps, args.capacity) for _ in range(args.repeats)) / args.steps * 1e6
        new = min(_one_call(size, steps, args.capacity) for _ in range(args.repeats)) / args.steps * 1e6
        print(f"{size:4d} {old:20.1f} {new:17.1f} {old / new:6.2f}")


if __name__ == "__main__":
    main()
