"""Do the i.i.d. measures separate a batch of consecutive transitions from an i.i.d. one? (issue 10)

Short real runs of each env with ``replay.kind: none`` (each batch: consecutive transitions, the newest) and
``uniform`` (independent draws from the memory), everything else from the env's shipped uniform config. Every
update's values are collected from the member's own update window (the numbers the run logs), and the table
prints their means over the run's updates: ``iid/state_diversity``, ``iid/episode_diversity``, the seed
notebook's correlation count as a share of the B(B−1)/2 pairs, ``replay/sample_age``, and per env the ratio
uniform / none.

    nice -n 10 python benchmarks/iid_separation.py [--envs cartpole,acrobot,mountaincar,pong] [--steps 5000]
        [--pong-steps 2500] [--seed 1] [--configs-dir configs]    (configs/seed001: the notebook's protocol)
        [--save DIR]    (each run's viewed batches and a same-time reference sample, for trying other measures)

Pong runs ``configs/pong_uniform.yaml`` with a small memory (5,000), ``learning_starts`` 500 and
``log.every`` 25 (about 60 env steps/s on a 2-core CPU: keep it short); evaluation, checkpoints and
TensorBoard are off everywhere.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from per_cli.config import load_config
from per_cli.train.loop.trainer import build_member, run_member
from per_cli.train.measures import cohort_rows
from per_cli.train.measures.iid import state_view
from per_cli.train.measures.reference import reference_slots, reference_views

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("none", "uniform")
COLUMNS = {
    "iid/state_diversity": "state_diversity",
    "iid/episode_diversity": "episode_diversity",
    "count_share": "count share",
    "replay/sample_age": "sample age",
}
PONG = ["replay.capacity=5000", "train.learning_starts=500", "log.every=25", "train.save_replay=false"]


def run(
    env: str, kind: str, steps: int, seed: int, out: Path, configs: Path, save: Path | None = None
) -> tuple[dict[str, float], int, float]:
    """(mean over the run's updates of each column, updates, wall seconds) of one short run. With ``save``,
    also writes ``<env>-<kind>.npz``: every update's batch as viewed features (``batches``, U × B × k), and per
    log window a reference of 512 uniform draws from the memory (``refs``) with the window's reference
    variance (``ref_vars``) and the window each update belongs to (``window``)."""
    overrides = [
        f"replay.kind={kind}",
        f"train.total_steps={steps}",
        f"seed={seed}",
        "train.eval_episodes=0",
        "train.checkpoint_every=0",
        "log.tensorboard=false",
        *(PONG if env == "pong" else []),
    ]
    cfg = load_config(configs / f"{env}_uniform.yaml", overrides, device="cpu")
    member = build_member(cfg)
    collected: dict[str, list[np.ndarray]] = {}
    window = member.window
    pop = window.pop
    saved: dict[str, list[np.ndarray]] = {"batches": [], "refs": [], "ref_vars": [], "window": []}
    save_rng = np.random.default_rng(seed)
    views: list[np.ndarray] = []  # the viewed batches measured since the last pop (a window's are measured at
    measure_table = cohort_rows.measure_table  # its pulls: its pop, or a checkpoint's save before it)

    def recording_measure(settings, td, losses, weights, ages, obs, *rest):  # each update's batch, viewed
        views.extend(state_view(obs, obs.ndim - 2))
        return measure_table(settings, td, losses, weights, ages, obs, *rest)

    def recording_pop(memory=None):  # the window's own values, kept as they are logged
        values = pop(memory)
        if save is not None and views:
            saved["batches"].append(np.stack(views))
            views.clear()
        for key, array in values.items():
            collected.setdefault(key, []).append(array)
        if save is not None and values:
            saved["window"].append(np.full(len(values["td_error/mean"]), len(saved["refs"])))
            saved["refs"].append(reference_views(memory.storage, reference_slots(memory.storage, save_rng, 512)))
            saved["ref_vars"].append(window._ref_var)
        return values

    member.window.pop = recording_pop
    if save is not None:
        cohort_rows.measure_table = recording_measure
    start = time.perf_counter()
    try:
        run_member(member, out / f"{env}-{kind}")
    finally:
        cohort_rows.measure_table = measure_table
    wall = time.perf_counter() - start
    if save is not None:
        np.savez(
            save / f"{env}-{kind}.npz",
            **{k: np.concatenate(v) if k in ("batches", "window") else np.stack(v) for k, v in saved.items()},
        )
    means = {key: float(np.concatenate(arrays).mean()) for key, arrays in collected.items()}
    b = cfg.replay.batch_size
    means["count_share"] = means["replay/correlation_count"] / (b * (b - 1) / 2)
    return means, member.agent.updates, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", default="cartpole,acrobot,mountaincar,pong")
    parser.add_argument("--steps", type=int, default=5000, help="env steps of each classic-control run")
    parser.add_argument("--pong-steps", type=int, default=2500)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--configs-dir", type=Path, default=ROOT / "configs", help="holds <env>_uniform.yaml")
    parser.add_argument("--save", type=Path, help="write each run's viewed batches and references here (.npz)")
    args = parser.parse_args()
    if args.save is not None:
        args.save.mkdir(parents=True, exist_ok=True)

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for env in args.envs.split(","):
            steps = args.pong_steps if env == "pong" else args.steps
            results = {}
            for kind in KINDS:
                results[kind], updates, wall = run(env, kind, steps, args.seed, Path(tmp), args.configs_dir, args.save)
                print(f"  {env} {kind}: {steps} steps, {updates} updates, {wall:.0f} s", flush=True)
            rows.append((env, steps, results))

    print(f"\n{args.configs_dir}: means over each run's updates (seed {args.seed}); ratio = uniform / none\n")
    print("| env | steps | kind | " + " | ".join(COLUMNS.values()) + " |")
    print("| --- | ---: | --- |" + " ---: |" * len(COLUMNS))
    for env, steps, results in rows:
        for kind in KINDS:
            cells = " | ".join(f"{results[kind][key]:.3f}" for key in COLUMNS)
            print(f"| {env} | {steps} | {kind} | {cells} |")
        ratios = " | ".join(f"**{results['uniform'][key] / results['none'][key]:.2f}×**" for key in COLUMNS)
        print(f"| {env} | | ratio | {ratios} |")


if __name__ == "__main__":
    main()
