"""Synthetic run directories with known values: the files ``per train`` writes (config.yaml, summary.json,
metrics.csv, a TensorBoard event file from torch's SummaryWriter), with scalars chosen by the test."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import yaml

from per_cli.config import Config, apply_override, to_dict
from per_cli.rundir.logger import EPISODE_COLUMNS, EPISODE_UPDATE_COLUMNS

ALIASES = {"cartpole": "CartPole-v1", "acrobot": "Acrobot-v1"}


def write_run(
    path: Path,
    *,
    env: str = "cartpole",
    replay: str = "uniform",
    seed: int = 1,
    status: str | None = "completed",
    returns: list[tuple[int, float]] = (),
    updates: dict[str, list[tuple[int, float]]] | None = None,
    final_return: float | None = None,
    eval_return: float | None = None,
    overrides: dict[str, object] | None = None,
    tensorboard: bool = True,
    error: str = "RuntimeError: boom",
    total_steps: int | None = None,
    lengths: list[int] | None = None,
) -> Path:
    """Write a run directory. ``returns``: (env step, episodic return) per episode; ``updates``: tag ->
    (env step, value) of update scalars (in the event file; metrics.csv gets each episode's mean of those in
    its steps, as the loop writes it); ``lengths``: each episode's length (default 1); ``status=None`` leaves no
    summary.json (a run just started)."""
    path.mkdir(parents=True)
    data = to_dict(Config())
    for key, value in {"env.id": env, "replay.kind": replay, "seed": seed, **(overrides or {})}.items():
        apply_override(data, key, value)
    (path / "config.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    if status is not None:
        summary = {"status": status, "env": env, "replay": replay, "seed": seed, "device": "cpu"}
        if status == "completed":
            last = [r for _, r in returns][-20:]
            summary["final_return_mean"] = final_return if final_return is not None else float(np.mean(last))
            summary["eval_return_mean"] = eval_return
            summary["total_steps"] = total_steps
        if status == "failed":
            summary["error"] = error
        (path / "summary.json").write_text(json.dumps(summary))
    updates = updates or {}
    with (path / "metrics.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=EPISODE_COLUMNS)
        writer.writeheader()
        previous = -1
        for i, (step, value) in enumerate(returns, 1):
            row = {"step": step, "episode": i, "return": value, "length": lengths[i - 1] if lengths else 1}
            for tag, column in EPISODE_UPDATE_COLUMNS.items():  # as the loop writes it: the episode's means
                during = [v for s, v in updates.get(tag, ()) if previous < s <= step]
                row[column] = float(np.mean(during)) if during else ""
            writer.writerow(row)
            previous = step
    if tensorboard:
        from torch.utils.tensorboard import SummaryWriter

        tb = SummaryWriter(log_dir=str(path))
        for step, value in returns:
            tb.add_scalar("charts/episodic_return", value, step)
        for tag, points in updates.items():
            for step, value in points:
                tb.add_scalar(tag, value, step)
        tb.close()
    return path


def linear_returns(
    n: int, last_step: int, fn: Callable[[np.ndarray], np.ndarray], first_step: int | None = None
) -> list[tuple[int, float]]:
    """``n`` episodes ending at evenly spaced steps up to ``last_step``, return ``fn(step)``."""
    steps = np.linspace(first_step or last_step / n, last_step, n).round().astype(int)
    return [(int(s), float(v)) for s, v in zip(steps, fn(steps.astype(float)), strict=True)]


def env_id(alias: str) -> str:
    return ALIASES.get(alias, alias)
