"""One Pong update on a GPU: eager, the captured CUDA graph (agent.cuda_graph), and the graph fed from frames kept
on the device (replay.device_frames) with its results read one update late (train.priority_lag), alone and with a
greedy action after each update (eager and graphed), in one invocation.

    python benchmarks/cuda_update.py [--updates 500] [--rounds 3] [--batch 32] [--kind adam|rmsprop] [--device cpu]

The agent is ``configs/pong_fast_per.yaml``'s (Nature CNN, double DQN, Huber, grad-norm clip, Adam); batches are
uint8 frame stacks (32 × 4 × 84 × 84, as the frame storage gathers them) drawn once on the host, so what is timed is
``DQNAgent.learn``: the host-to-device copy, the update, and the TD errors back (what the training loop waits for).
The variants:

* ``eager``, ``graphed``: host batches, results waited for (the loop before this change);
* ``device``: the graph; each batch's 32 × 5 frames gathered on the device from a ring of frames there
  (``DeviceFrames.stacks`` from ring positions, as the memory does), results waited for;
* ``device+lag``: the same, the results of each update read after the next is queued (``learn(wait=False)``);
* ``act-eager``, ``act-graphed``: ``device+lag`` and a greedy action of one observation after each update
  (``GreedyAction`` eager and graphed), as a run at a small ε acts at nearly every step: the action's read waits
  for the queued update.

Rounds alternate the variants; it prints each one's median ms per update and how long the host-to-device copy of
one batch takes alone. ``--device cpu`` (no graph: the graphed variants run eagerly) rehearses it without a GPU.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from per_cli.config import AgentConfig
from per_cli.replay import Batch
from per_cli.replay.storage.device_frames import DeviceFrames

VARIANTS = ("eager", "graphed", "device", "device+lag", "act-eager", "act-graphed")


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


def ms_per_update(variant: str, data: list[Batch], updates: int, optimizer: str, device: torch.device) -> float:
    from per_cli.rl.acting import GreedyAction
    from per_cli.rl.engines import make_agent

    graphed = variant != "eager"
    cfg = AgentConfig(network="cnn", double_dqn=True, lr=1e-4, adam_eps=1.5e-4, optimizer=optimizer, cuda_graph=graphed)
    agent = make_agent(cfg, (4, 84, 84), 6, device)
    acting = variant.startswith("act")
    feed = device_feed(data, device) if variant.startswith("device") or acting else (lambda i: data[i % len(data)])
    wait = variant in ("eager", "graphed", "device")
    act = GreedyAction(agent.q_net, device, graphed=variant == "act-graphed") if acting else None
    for i in range(6):  # warm-up (and the captures, after the graphs' 3 eager calls)
        agent.learn(feed(i))
        if act is not None:
            act(data[i].obs[0])
    sync(device)
    start = time.perf_counter()
    held = None
    for i in range(updates):
        result = agent.learn(feed(i), wait)
        if held is not None:
            held.wait()  # the previous update's results, read now (what the lagged loop does)
        held = None if wait else result
        if act is not None:
            obs = data[i % len(data)].obs
            act(obs[i % len(obs)])
    if held is not None:
        held.wait()
    sync(device)
    return (time.perf_counter() - start) / updates * 1e3


def device_feed(data: list[Batch], device: torch.device):
    """Batch i with its stacks gathered on the device from a ring of frames there (random positions of 5
    consecutive frames, as the frame storage's gather)."""
    rng = np.random.default_rng(1)
    ring = DeviceFrames(rng.integers(0, 256, (10_000, 84, 84), dtype=np.uint8), device)
    size = len(data[0].actions)

    def feed(i: int) -> Batch:
        batch = data[i % len(data)]
        starts = rng.integers(0, 10_000 - 5, size)
        batch.device_stacks = ring.stacks(starts[:, None] + np.arange(5), None)
        return batch

    return feed


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


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
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("cuda_update: no CUDA device here (--device cpu rehearses it without the graph)")
    device = torch.device(args.device)
    name = torch.cuda.get_device_name() if device.type == "cuda" else "cpu (no graph: graphed variants run eagerly)"
    print(f"device: {name}, torch {torch.__version__}")
    data = batches(64, args.batch, np.random.default_rng(0))
    times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for _ in range(args.rounds):
        for variant in VARIANTS:
            times[variant].append(ms_per_update(variant, data, args.updates, args.kind, device))
    for variant in VARIANTS:
        median = statistics.median(times[variant])
        print(f"{variant:<11} {median:7.3f} ms/update   rounds {[round(t, 3) for t in times[variant]]}")
    eager, graphed = statistics.median(times["eager"]), statistics.median(times["graphed"])
    act_eager, act_graphed = statistics.median(times["act-eager"]), statistics.median(times["act-graphed"])
    print(f"eager / graphed: {eager / graphed:.2f}x; graphed / device+lag: "
          f"{graphed / statistics.median(times['device+lag']):.2f}x; act-eager / act-graphed: "
          f"{act_eager / act_graphed:.2f}x")  # fmt: skip
    if device.type == "cuda":
        print(f"host-to-device copy of obs + next_obs alone: {copy_ms(data):.3f} ms")


if __name__ == "__main__":
    main()
