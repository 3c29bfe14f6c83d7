"""``--seeds``: one parser and one meaning for ``per train`` and ``per grid`` (per_cli/config/seeds.py), the bound of
``--seed``, and a cap checked before anything is planned (issue 45)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from per_cli.cli.commands import app
from per_cli.config.seeds import MAX_SEEDS, parse_seeds, seed_bounds
from per_cli.errors import ConfigError
from per_cli.sweep.plan import MAX_RUNS

runner = CliRunner()


def _per(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "per_cli", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def _refused(done: subprocess.CompletedProcess, message: str) -> None:
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: ") and message in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_a_spec_is_a_seed_a_range_or_a_list():
    assert parse_seeds("3") == [3] and parse_seeds("0") == [0]
    assert parse_seeds("1-3") == [1, 2, 3] and parse_seeds("1-3,7") == [1, 2, 3, 7]
    assert parse_seeds("9, 5,1") == [9, 5, 1]  # the order given
    assert parse_seeds(f"1-{MAX_SEEDS}") == list(range(1, MAX_SEEDS + 1))
    assert seed_bounds() == (0, 1_000_000_000)  # the config's seed key, as --seed enforces it


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("1-", "write a seed (3), a range (1-100: seeds 1 to 100)"),
        ("-1", "write a seed"),
        ("1..3", "write a seed"),
        ("2,2", "names seed 2 twice"),
        ("1,01", "names seed 1 twice"),
        ("1-3,3", "names seed 3 twice"),
        ("3-1", "the range 3-1 is empty"),
        ("1000000000-1000000001", "seed 1000000001 is out of range; seeds are in [0, 1000000000]"),
        ("9" * 5000, "is out of range"),  # (past int()'s 4,300 digits: never converted)
        (f"1-{MAX_SEEDS + 1}", f"names {MAX_SEEDS + 1:,} seeds; one command takes at most {MAX_SEEDS:,}"),
        ("0-1000000000", "names 1,000,000,001 seeds"),
    ],
)
def test_what_a_spec_refuses(spec, message):
    with pytest.raises(ConfigError, match="^--seeds") as refused:
        parse_seeds(spec)
    assert message in str(refused.value) and len(str(refused.value)) < 200


def test_seeds_3_is_seed_3_for_both_commands_and_seeds_0_is_seed_0():
    """Issue 45: ``--seeds 3`` was seed 3 for ``per train`` and seeds 1-3 for ``per grid``; ``--seeds 0`` trained
    seed 0 in one and was an error in the other."""
    for spec, seeds in (("3", [3]), ("0", [0]), ("1-2", [1, 2])):
        grid = runner.invoke(app, ["grid", "--envs", "cartpole", "--replays", "uniform", "--seeds", spec, "--dry-run"])
        assert grid.exit_code == 0, grid.output
        names = [line.split()[0] for line in grid.output.splitlines() if line.startswith("cartpole__")]
        assert names == [f"cartpole__uniform__s{seed}" for seed in seeds]
        note = "note: --seeds 3 trains seed 3 alone; for seeds 1 to 3 write --seeds 1-3"
        assert (note in grid.output) == (spec == "3")
    assert parse_seeds("3") == [3]  # what per train --seeds takes (the cohort's tests train one)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("1000000000-1000000001", "seed 1000000001 is out of range; seeds are in [0, 1000000000] as for --seed"),
        ("99999999999999999999", "seed 99999999999999999999 is out of range"),
        ("1-100000", "names 100,000 seeds; one command takes at most 10,000"),
    ],
)
@pytest.mark.parametrize("command", ["train", "grid"])
def test_both_commands_refuse_a_bad_spec_at_once_and_write_nothing(tmp_path, command, spec, message):
    """Issue 45: ``per train --seeds 1000000000-1000000001`` passed the bound ``--seed`` enforces, ``per train
    --seeds 99999999999999999999`` was a traceback, ``per grid --seeds 100000`` planned for minutes."""
    args = ["--runs-dir", str(tmp_path / "runs"), "--seeds", spec]
    if command == "grid":
        args += ["--envs", "cartpole,acrobot"]
    started = time.perf_counter()
    _refused(_per(command, *args, timeout=30), message)
    assert time.perf_counter() - started < 20  # (refused before torch is imported; the old grid planned for minutes)
    assert not (tmp_path / "runs").exists()


def test_a_grid_of_more_runs_than_the_cap_is_refused_before_planning(tmp_path):
    seeds = MAX_RUNS // 10 + 1  # cartpole and acrobot have 5 kinds each: 10 settings
    done = _per("grid", "--envs", "cartpole,acrobot", "--seeds", f"1-{seeds}", "--runs-dir", str(tmp_path), "--dry-run")
    _refused(done, f"the grid would have {seeds * 10:,} runs ({seeds:,} seeds × 10 settings); one grid plans at most")


def test_planning_at_the_cap_resolves_each_setting_once():
    """Each seed's run is its setting's config with the seed, so a plan at the cap is quick: a setting is resolved
    and validated once, not once a run (which took minutes)."""
    from per_cli.config import from_dict, load_config, to_dict
    from per_cli.replay import resolve_config
    from per_cli.sweep.grid import build_request, plan_grid

    seeds = MAX_RUNS // 2
    request = build_request("cartpole", "uniform", f"1-{seeds}", ["agent.lr=1e-3,1e-4"])
    started = time.perf_counter()
    plan = plan_grid(request)
    assert time.perf_counter() - started < 15
    assert len(plan.runs) == MAX_RUNS and [r.seed for r in plan.runs[:4]] == [1, 1, 2, 2]
    run = plan.runs[-1]
    assert run.name == f"cartpole__uniform__s{seeds}__agent.lr=1e-4" and run.config["seed"] == seeds
    own = resolve_config(load_config(request.configs_dir / "cartpole_uniform.yaml", ["agent.lr=1e-4"], seed=seeds))
    assert run.config == to_dict(own) == to_dict(resolve_config(from_dict(run.config)))  # what resolving it alone gives


def test_default_kinds_without_a_config_are_not_mentioned():
    """Issue 45: ``per grid --envs cartpole,acrobot`` opened with four notes about lap and pal, kinds the user
    never asked for (the default is every kind with a config for the env)."""
    done = runner.invoke(app, ["grid", "--envs", "cartpole,acrobot", "--seeds", "1-2", "--dry-run"])
    assert done.exit_code == 0, done.output
    assert "note:" not in done.output and "lap" not in done.output and "cartpole__uniform__s2" in done.output
