"""One Pong update on a GPU, eager against the captured CUDA graph (agent.cuda_graph), in one invocation.

    python benchmarks/cuda_update.py [--updates 500] [--rounds 3] [--batch 32] [--kind adam|rmsprop]

The agent is ``configs/pong_fast_per.yaml``'s (Nature CNN, double DQN, Huber, grad-norm clip, Adam); batches are
uint8 frame stacks (32 × 4 × 84 × 84, as the frame storage gathers them) drawn once on the host, so what is timed is
``DQNAgent.learn``: the host-to-device copy, the update, and the TD errors back (what the training loop waits for).
Rounds alternate eager and graphed; it prints each one's median ms per update and the ratio eager / graphed, and
how long the host-to-device copy of one batch takes alone.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from per_cli.config import AgentConfig
from per_cli.replay import Batch


def batches(n: int, size: int, rng: np.random.Generator) -> list[Batch]:
    out = []
    for _ in range(n):
        fields = {
            "obs": rng.integers(0, 256, (size, 4, 84, 84), dtype=np.uint8),
            "next_obs": rng.integers(0, 256, (size, 4, 84, 84), dtype=np.uint8),
            "actions": rng.integers(0, 6, size).astype(np.int64),
            "rewards": rng.choice([-1.0, 0.0, 1.0], size).astype(np.float32),
            "terminated": (rng.random(size) < 0.01).astype(np.float32),
            "weights": rng.random(size).astype(np.float32),
        }
        rest = {f: np.zeros(size, np.int64) for f in Batch.__dataclass_fields__ if f not in fields}
        out.append(Batch(**fields, **rest))
    return out


def ms_per_update(graphed: bool, data: list[Batch], updates: int, optimizer: str) -> float:
    from per_cli.rl.agent import DQNAgent

    cfg = AgentConfig(network="cnn", double_dqn=True, lr=1e-4, adam_eps=1.5e-4, optimizer=optimizer, cuda_graph=graphed)
    agent = DQNAgent(cfg, (4, 84, 84), 6, torch.device("cuda"))
    for batch in data[:10]:  # warm-up (and the capture)
        agent.learn(batch)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for i in range(updates):
        agent.learn(data[i % len(data)])
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / updates * 1e3


def copy_ms(data: list[Batch], repeats: int = 200) -> float:
    torch.cuda.synchronize()
    start = time.perf_counter()
    for i in range(repeats):
        b = data[i % len(data)]
        torch.as_tensor(b.obs, device="cuda")
        torch.as_tensor(b.next_obs, device="cuda")
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / repeats * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--kind", default="adam", choices=["adam", "rmsprop"])
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("cuda_update: needs a CUDA device (the graph is CUDA's)")
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    data = batches(64, args.batch, np.random.default_rng(0))
    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(args.rounds):
        for graphed in (False, True):
            times[graphed].append(ms_per_update(graphed, data, args.updates, args.kind))
    eager, graphed = statistics.median(times[False]), statistics.median(times[True])
    print(f"eager   {eager:.3f} ms/update   rounds {[round(t, 3) for t in times[False]]}")
    print(f"graphed {graphed:.3f} ms/update   rounds {[round(t, 3) for t in times[True]]}")
    print(f"eager / graphed: {eager / graphed:.2f}x")
    print(f"host-to-device copy of obs + next_obs alone: {copy_ms(data):.3f} ms")


if __name__ == "__main__":
    main()
