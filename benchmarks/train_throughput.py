"""Training throughput: env steps per second of `per train` against Stable-Baselines3's DQN, same settings.

Both train a DQN on CartPole-v1 for the same number of env steps: uniform replay of 100k, batch 64, one
gradient step per env step (train_freq 1, gradient_steps 1) from step 1000 on, an MLP with one hidden
layer of 128, Huber loss, Adam, gradient clipping at 10, a hard target copy every 500 steps, ε from 1 to 0.05
over the first 10% of the run. `per` runs as `per train` would (its loop, replay, metrics, TensorBoard and
CSV logging; no evaluation episodes), once with each update engine; SB3 runs `DQN.learn`. All runs share one
process and one torch thread count, and are timed after a warm-up (numba's kernels loaded or compiled).

Each run is timed from building the member / model to the end of training, in wall-clock time and in this
process's CPU time (the CPU figures hold steadier when other processes load the machine). The table also
splits the CPU time of a step: "update µs" is one gradient step measured alone (per: ``agent.learn`` on a
fixed batch; SB3: ``model.train(1, 64)``), "rest µs" is what the loop spends per env step on everything else
(acting, env step, replay add/sample, metrics, logging), averaged over the run.

    python benchmarks/train_throughput.py [--steps 20000] [--repeats 1] [--only numba,torch,sb3]
    python benchmarks/train_throughput.py --updates   # only: update µs of both engines per network shape

Needs the `bench` extra for SB3 (`pip install -e ".[bench]"`); without it the SB3 row is skipped.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from per_cli.config import load_config  # noqa: E402
from per_cli.rl.engines import make_agent  # noqa: E402
from per_cli.train.loop.trainer import build_member, run_member  # noqa: E402

# the settings both libraries share
HIDDEN = 128
BATCH = 64
BUFFER = 100_000
LEARNING_STARTS = 1_000
TARGET_PERIOD = 500
LR = 1e-3
GAMMA = 0.99
MAX_GRAD_NORM = 10.0
EPS_START, EPS_END, EPS_FRACTION = 1.0, 0.05, 0.1


def per_overrides(engine: str, steps: int, seed: int) -> list[str]:
    return [
        "env.id=cartpole",
        f"agent.engine={engine}",
        f"agent.hidden_sizes=[{HIDDEN}]",
        f"agent.lr={LR}",
        f"agent.gamma={GAMMA}",
        "agent.loss=huber",
        "agent.double_dqn=false",
        f"agent.target_update_period={TARGET_PERIOD}",
        "agent.tau=1.0",
        f"agent.max_grad_norm={MAX_GRAD_NORM}",
        "replay.kind=uniform",
        f"replay.capacity={BUFFER}",
        f"replay.batch_size={BATCH}",
        f"train.total_steps={steps}",
        f"train.learning_starts={LEARNING_STARTS}",
        "train.train_freq=1",
        "train.gradient_steps=1",
        f"train.eps_start={EPS_START}",
        f"train.eps_end={EPS_END}",
        f"train.eps_fraction={EPS_FRACTION}",
        "train.eval_episodes=0",
        f"seed={seed}",
    ]


def fixed_batch(agent_obs_dim: int = 4, n_actions: int = 2, seed: int = 0, size: int = BATCH):
    import dataclasses

    from per_cli.replay import Batch

    rng = np.random.default_rng(seed)
    given = {
        "obs": rng.normal(size=(size, agent_obs_dim)).astype(np.float32),
        "actions": rng.integers(n_actions, size=size),
        "rewards": np.ones(size, np.float32),
        "next_obs": rng.normal(size=(size, agent_obs_dim)).astype(np.float32),
        "terminated": (rng.random(size) < 0.05).astype(np.float32),
        "weights": np.ones(size, np.float32),
    }
    # bookkeeping fields (indices, ages, episode ids, ...) do not enter an update
    rest = {f.name: np.zeros(size, np.int64) for f in dataclasses.fields(Batch) if f.name not in given}
    return Batch(**given, **rest)


def time_call(fn, n: int) -> float:
    """Median CPU µs of ``fn()`` over 5 rounds of ``n`` calls (after one warm-up call). CPU time, like the
    "CPU" columns, so that load from other processes does not leak into the split of a step."""
    fn()
    rounds = []
    for _ in range(5):
        t0 = time.process_time()
        for _ in range(n):
            fn()
        rounds.append((time.process_time() - t0) / n)
    return statistics.median(rounds) * 1e6


def per_update_us(engine: str, obs_dim: int = 4, n_actions: int = 2, hidden=(HIDDEN,), batch: int = BATCH) -> float:
    torch.manual_seed(0)
    cfg = load_config(None, per_overrides(engine, 1000, 0) + [f"agent.hidden_sizes=[{','.join(map(str, hidden))}]"])
    agent = make_agent(cfg.agent, (obs_dim,), n_actions, torch.device("cpu"))
    assert agent.engine == engine, (agent.engine, agent.engine_note)
    fixed = fixed_batch(obs_dim, n_actions, size=batch)
    dims = (obs_dim, *hidden, n_actions)
    work = sum(a * b for a, b in zip(dims[:-1], dims[1:], strict=True))  # multiply-adds per sample
    n = max(20, min(300, int(3e7 / (work * batch)))) if engine == "numba" else 100
    return time_call(lambda: agent.learn(fixed), n)


# (obs dim, hidden sizes, actions, batch): this benchmark's CartPole net, the shipped classic-control default,
# configs/mountaincar_uniform.yaml, and sizes between them
UPDATE_SHAPES = [
    (4, (64,), 2, 64),
    (4, (128,), 2, 64),
    (4, (256,), 2, 64),
    (4, (64, 64), 2, 64),
    (4, (128, 128), 2, 64),
    (4, (256, 256), 2, 64),
    (2, (256, 256), 3, 128),
]


def update_table() -> None:
    """One update (Huber, clipping, Adam), CPU µs, numba against torch eager, per network shape."""
    print(f"{'network':>16} {'batch':>6} {'numba µs':>10} {'torch µs':>10} {'torch/numba':>12}")
    for obs_dim, hidden, n_actions, batch in UPDATE_SHAPES:
        fast = per_update_us("numba", obs_dim, n_actions, hidden, batch)
        ref = per_update_us("torch", obs_dim, n_actions, hidden, batch)
        name = "-".join(map(str, (obs_dim, *hidden, n_actions)))
        print(f"{name:>16} {batch:>6} {fast:>10.0f} {ref:>10.0f} {ref / fast:>11.1f}x")


def run_per(engine: str, steps: int, seed: int) -> tuple[float, float]:
    """(steps per wall second, steps per CPU second) of one `per` training run (run directory in a
    temporary folder)."""
    cfg = load_config(None, per_overrides(engine, steps, seed))
    with tempfile.TemporaryDirectory() as tmp:
        t0, c0 = time.perf_counter(), time.process_time()
        member = build_member(cfg, device="cpu")
        run_member(member, Path(tmp) / "run")
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return steps / wall, steps / cpu


def make_sb3(steps: int, seed: int):
    import gymnasium as gym
    from stable_baselines3 import DQN

    env = gym.make("CartPole-v1")
    return DQN(
        "MlpPolicy",
        env,
        learning_rate=LR,
        buffer_size=BUFFER,
        learning_starts=LEARNING_STARTS,
        batch_size=BATCH,
        tau=1.0,
        gamma=GAMMA,
        train_freq=1,
        gradient_steps=1,
        target_update_interval=TARGET_PERIOD,
        exploration_fraction=EPS_FRACTION,
        exploration_initial_eps=EPS_START,
        exploration_final_eps=EPS_END,
        max_grad_norm=MAX_GRAD_NORM,
        policy_kwargs={"net_arch": [HIDDEN]},
        seed=seed,
        device="cpu",
        verbose=0,
    )


def run_sb3(steps: int, seed: int) -> tuple[float, float, float]:
    """(steps per wall second and per CPU second of building and training the model, µs of one
    ``model.train(1, 64)`` measured afterwards)."""
    t0, c0 = time.perf_counter(), time.process_time()
    model = make_sb3(steps, seed)
    model.learn(total_timesteps=steps)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    update = time_call(lambda: model.train(gradient_steps=1, batch_size=BATCH), 100)
    return steps / wall, steps / cpu, update


def warm_up_numba() -> float:
    """Seconds to get the numba kernels ready (a compile on the first ever call, a cache load after)."""
    t0 = time.perf_counter()
    torch.manual_seed(0)
    cfg = load_config(None, per_overrides("numba", 1000, 0))
    agent = make_agent(cfg.agent, (4,), 2, torch.device("cpu"))
    batch = fixed_batch()
    agent.learn(batch)
    agent.td_errors(batch)
    agent.greedy_action(batch.obs[0])
    agent.sync_target()
    return time.perf_counter() - t0


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000, help="env steps per run (default 20000)")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each; the best is reported")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1, help="torch threads for every run (default 1)")
    parser.add_argument("--only", default="numba,torch,sb3", help="comma-separated subset of numba,torch,sb3")
    parser.add_argument("--updates", action="store_true", help="only the table of update µs per network shape")
    args = parser.parse_args()
    which = [w.strip() for w in args.only.split(",") if w.strip()]
    torch.set_num_threads(args.threads)
    if args.updates:
        print(f"torch {torch.__version__}, {args.threads} torch thread(s), load {load_average()}")
        warm_up_numba()
        update_table()
        print(f"load average after: {load_average()}")
        return

    have_sb3 = True
    if "sb3" in which:
        try:
            import stable_baselines3  # noqa: F401
        except ImportError:
            have_sb3 = False
            print("stable-baselines3 is not installed (pip install -e '.[bench]'): skipping SB3", file=sys.stderr)

    print(
        f"CartPole-v1, {args.steps} env steps, batch {BATCH}, 1 update/step from step {LEARNING_STARTS}, MLP [{HIDDEN}]"
    )
    print(f"torch {torch.__version__}, {args.threads} torch thread(s), {os.cpu_count()} CPUs, load {load_average()}")
    if "numba" in which:
        print(f"numba kernels ready in {warm_up_numba():.2f} s (compile on the first run, cache load after)")

    rows: dict[str, dict] = {}
    update_us = {e: per_update_us(e) for e in ("numba", "torch") if e in which}
    for _ in range(args.repeats):  # interleaved, so a burst of load elsewhere hits every contender alike
        for name in which:
            if name in ("numba", "torch"):
                (sps, cpu_sps), upd = run_per(name, args.steps, args.seed), update_us[name]
                label = f"per (engine {name})"
            elif have_sb3:
                sps, cpu_sps, upd = run_sb3(args.steps, args.seed)
                label = "Stable-Baselines3 DQN"
            else:
                continue
            best = rows.get(label)
            if best is None or sps > best["sps"]:
                rows[label] = {"sps": sps, "cpu_sps": cpu_sps, "update": upd}

    updating = (args.steps - LEARNING_STARTS) / args.steps  # the fraction of steps that run an update
    sb3 = rows.get("Stable-Baselines3 DQN")
    print()
    header = ("steps/s", "vs SB3", "CPU steps/s", "vs SB3", "CPU µs/step", "update µs", "rest µs")
    print(f"{'':24}" + "".join(f"{h:>12}" for h in header))
    for label, r in rows.items():
        step_us = 1e6 / r["cpu_sps"]
        rest = step_us - updating * r["update"]
        ratio = f"{r['sps'] / sb3['sps']:.2f}x" if sb3 else "-"
        cpu_ratio = f"{r['cpu_sps'] / sb3['cpu_sps']:.2f}x" if sb3 else "-"
        cells = (f"{r['sps']:.0f}", ratio, f"{r['cpu_sps']:.0f}", cpu_ratio, f"{step_us:.0f}", f"{r['update']:.0f}")
        print(f"{label:24}" + "".join(f"{c:>12}" for c in (*cells, f"{rest:.0f}")))
    print(
        "\nsteps/s: env steps per wall-clock second of the whole run; CPU steps/s: per second of this process's"
        "\nCPU time (steadier on a loaded machine). The split of a step, in CPU µs: update µs is one gradient step"
        "\nmeasured alone; rest µs is CPU µs/step minus the updates' share (acting, env step, replay, metrics,"
        "\nlogging)."
    )
    print(f"load average after: {load_average()}")


if __name__ == "__main__":
    main()
