"""`per grid` packing the runs that differ only in the seed into cohorts (local pool), end to end."""

from __future__ import annotations

import yaml

from per_cli.config import load_config
from per_cli.sweep.cohorts import default_cohort_size, pack
from per_cli.sweep.plan import RunSpec
from per_cli.train.loop.trainer import build_member, run_member

from ..train.checkpoints.test_checkpoint import _rows
from .test_grid import TINY, _grid, _sets, _starts, _summary, configs  # noqa: F401 - configs is a fixture


def test_grid_trains_seeds_as_cohorts_each_equal_to_its_solo_run(configs, tmp_path):  # noqa: F811
    runs = tmp_path / "runs"
    args = ["--envs", "cartpole", "--replays", "uniform", "--seeds", "1-3", "--workers", "1", "--name", "g"]
    args += ["--cohort-size", "2", *_sets(TINY)]
    first = _grid(configs, runs, *args, timeout=300)
    assert first.returncode == 0, first.stderr
    assert "cohorts of up to 2 (2 tasks" in first.stderr
    grid_dir = runs / "g"
    names = [f"cartpole__uniform__s{seed}" for seed in (1, 2, 3)]
    for name in names:  # seeds 1 and 2 as one cohort, seed 3 as a cohort of one: each its own run
        run = grid_dir / name
        assert _summary(run)["status"] == "completed" and _summary(run)["total_steps"] == 300
        assert yaml.safe_load((run / "config.yaml").read_text())["seed"] == int(name[-1])
    solo = build_member(load_config(grid_dir / names[1] / "config.yaml"))
    run_member(solo, tmp_path / "solo2")
    assert _rows(grid_dir / names[1]) == _rows(tmp_path / "solo2")

    again = _grid(configs, runs, *args)
    assert again.returncode == 0 and "already complete" in again.stdout
    assert _starts(grid_dir) == dict.fromkeys(names, 1)

    grown = _grid(configs, runs, *[a if a != "1-3" else "1-4" for a in args])  # the same grid, one more seed
    assert grown.returncode == 0, grown.stderr
    assert _starts(grid_dir) == {**dict.fromkeys(names, 1), "cartpole__uniform__s4": 1}


def _spec(seed: int, lr: float) -> RunSpec:
    config = {"seed": seed, "agent": {"lr": lr}, "train": {"total_steps": 10}}
    return RunSpec(f"s{seed}_lr{lr}", "cartpole", "uniform", seed, {}, "x.yaml", config)


def test_pack_groups_runs_that_differ_only_in_the_seed():
    todo = [_spec(seed, lr) for seed in (1, 2, 3) for lr in (0.1, 0.2)]  # the plan's seed-major order
    packed = pack(todo, 2)
    assert [[s.name for s in group] for group in packed] == [
        ["s1_lr0.1", "s2_lr0.1"], ["s3_lr0.1"], ["s1_lr0.2", "s2_lr0.2"], ["s3_lr0.2"],
    ]  # fmt: skip
    assert default_cohort_size(todo, workers=2) == 2 and default_cohort_size(todo, workers=8) == 1
