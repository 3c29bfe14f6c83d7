"""Agent steps per second of a MinAtar training run on this machine, and where the time goes.

    nice -n 10 python benchmarks/minatar_throughput.py [--config breakout-minatar_uniform] [--steps 6000]
                                                       [--learning-starts 1000] [--threads 1]

Runs ``per``'s own training loop on a shipped MinAtar config (default: Breakout, uniform replay, the paper's
settings: one update of batch 32 per step, the MinAtar network, the bit-packed memory), without evaluation or
checkpoints, for ``--steps`` agent steps of which those after ``--learning-starts`` learn. Each phase of the
loop is timed by wrapping the member's own objects' methods (exclusive times: a phase called inside another
is not counted twice):

* env step: ``env.step`` and ``env.reset`` (MinAtar's game in Python);
* acting: ``agent.act`` (one forward pass, or a random action while ε says so);
* replay add / sample / priority update: ``memory.add``, ``memory.sample`` (unpacking the bits),
  ``memory.update_priorities``;
* update: ``agent.learn`` (forward, backward and Adam on a batch of 32), ``agent.sync_target``;
* measures: the update window's batch measures (``metrics.*``);
* logging: metrics.csv / TensorBoard writes and episode bookkeeping;
* loop: the rest (the Python loop itself, schedules, progress).

Phases are timed in this process's CPU time (``time.process_time``), so the split holds on a busy machine
too, where wall time also counts the waits for a core. It prints steps/s of the collection phase (before
learning starts) and of the learning phase (what a long run spends its time in), per wall second and per CPU
second (what one quiet core would give), then the learning phase's split in CPU µs per agent step and as
shares.
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from collections import defaultdict
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]


class PhaseTimer:
    """Exclusive wall time per phase: a timed call nested in another is subtracted from its parent."""

    def __init__(self) -> None:
        self.total: dict[str, float] = defaultdict(float)
        self.active = False
        self._stack: list[float] = []  # time spent in nested timed calls, per open call

    def wrap(self, obj, method: str, phase: str) -> None:
        inner = getattr(obj, method)

        def timed(*args, **kwargs):
            if not self.active:
                return inner(*args, **kwargs)
            self._stack.append(0.0)
            t0 = time.process_time()
            try:
                return inner(*args, **kwargs)
            finally:
                elapsed = time.process_time() - t0
                nested = self._stack.pop()
                self.total[phase] += elapsed - nested
                if self._stack:
                    self._stack[-1] += elapsed

        setattr(obj, method, timed)


class Marks:
    """A progress sink recording (step, wall time, CPU time) at each progress report (every 1000 steps);
    switches the phase timer on once learning has started."""

    def __init__(self, timer: PhaseTimer, learning_starts: int) -> None:
        self.timer, self.learning_starts = timer, learning_starts
        self.marks: list[tuple[int, float, float]] = []

    def mark(self, step: int) -> None:
        self.marks.append((step, time.perf_counter(), time.process_time()))

    def update(self, step: int, info: dict) -> None:
        self.mark(step)
        if step == self.learning_starts:
            self.timer.active = True

    def rates(self, lo: int, hi: int) -> tuple[float, float, float]:
        """Steps per wall second and per CPU second between steps lo and hi, and the CPU seconds."""
        inside = [m for m in self.marks if lo <= m[0] <= hi]
        (s0, w0, c0), (s1, w1, c1) = inside[0], inside[-1]
        return (s1 - s0) / (w1 - w0), (s1 - s0) / (c1 - c0), c1 - c0


def build(args):
    from per_cli.config import load_config
    from per_cli.train.loop import reporting
    from per_cli.train.loop.trainer import build_member

    overrides = [
        f"train.total_steps={args.steps}",
        f"train.learning_starts={args.learning_starts}",
        "train.eval_episodes=0",
        "train.checkpoint_every=0",
    ]
    cfg = load_config(REPO / "configs" / f"{args.config}.yaml", overrides, device="cpu", seed=1)
    timer = PhaseTimer()
    marks = Marks(timer, args.learning_starts)
    member = build_member(cfg, progress=marks)
    torch.set_num_threads(args.threads)
    phases = {
        "env step": [(member.env, "step"), (member.env, "reset")],
        "acting": [(member.agent, "act")],
        "replay add": [(member.memory, "add")],
        "replay sample": [(member.memory, "sample"), (member.memory, "begin_phase")],
        "priority update": [(member.memory, "update_priorities")],
        "update": [(member.agent, "learn"), (member.agent, "sync_target")],
        "measures": [(member.window, "add"), (member.window, "pop")],
        "logging": [(reporting, "log_point"), (reporting, "end_episode")],
    }
    for phase, methods in phases.items():
        for obj, name in methods:
            timer.wrap(obj, name, phase)
    return member, timer, marks


def main() -> None:
    from per_cli.train.loop.trainer import run_member

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="breakout-minatar_uniform", help="a shipped config's name")
    parser.add_argument("--steps", type=int, default=6000)
    parser.add_argument("--learning-starts", type=int, default=1000, help="a multiple of 1000")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--runs-dir", type=Path, default=Path("/tmp/per-minatar-throughput"))
    args = parser.parse_args()

    shutil.rmtree(args.runs_dir, ignore_errors=True)
    load_before = " ".join(f"{x:.1f}" for x in os.getloadavg())
    member, timer, marks = build(args)
    marks.marks = []
    marks.mark(0)
    summary = run_member(member, args.runs_dir / "run")
    learn_steps = args.steps - args.learning_starts
    collect_wall, collect_cpu, _ = marks.rates(0, args.learning_starts)
    learn_wall, learn_cpu, learn_cpu_s = marks.rates(args.learning_starts, args.steps)
    print(f"{args.config}, cpu, torch threads {args.threads}, {args.steps} agent steps, learning from step "
          f"{args.learning_starts} (1 update of batch {member.cfg.replay.batch_size} per step); "
          f"load average before: {load_before}")  # fmt: skip
    print(f"{'':<15} {'steps/wall s':>13} {'steps/CPU s':>12}")
    print(f"{'collect phase':<15} {collect_wall:>13.1f} {collect_cpu:>12.1f}  (env + acting + replay add)")
    print(f"{'learn phase':<15} {learn_wall:>13.1f} {learn_cpu:>12.1f}  ({summary['updates']} updates in the run)")
    print(f"{'phase (learning)':<18} {'CPU µs/step':>12} {'share':>7}")
    timed = dict(timer.total)
    timed["loop"] = learn_cpu_s - sum(timed.values())
    for phase, seconds in sorted(timed.items(), key=lambda kv: -kv[1]):
        print(f"{phase:<18} {seconds / learn_steps * 1e6:>12.1f} {seconds / learn_cpu_s:>7.1%}")


if __name__ == "__main__":
    main()
