"""Hostile input to the command line (issue 35): one line, exit 2, nothing written; the help as it should read."""

import os

import pytest
from typer.testing import CliRunner

from per_cli.cli import app

runner = CliRunner()


def _one_line_error(result, message):
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], result.output
    assert len(lines[0]) < 400


def _tree(path):
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


@pytest.mark.parametrize(
    ("runs_dir", "message"),
    [
        ("a_file", "is a file, not a directory"),
        ("a_file/sub", "cannot create run directories there (Not a directory)"),
        ("/proc/per-runs", "cannot create run directories there"),
    ],
)
def test_a_runs_dir_that_cannot_hold_runs_is_bad_input_and_nothing_is_written(tmp_path, runs_dir, message):
    (tmp_path / "a_file").write_text("x")
    before = _tree(tmp_path)
    result = runner.invoke(app, ["train", "--runs-dir", str(tmp_path / runs_dir), "--set", "train.total_steps=2000"])
    _one_line_error(result, message)
    assert _tree(tmp_path) == before
    assert not os.path.exists("/proc/per-runs")


def test_a_passed_runs_dir_check_leaves_nothing_behind(tmp_path):
    from per_cli.cli.running import check_writable_dir

    check_writable_dir(tmp_path / "a" / "b", "--runs-dir", "run directories")
    assert _tree(tmp_path) == []


def test_a_grid_runs_dir_that_is_a_file_is_bad_input(tmp_path):
    (tmp_path / "a_file").write_text("x")
    result = runner.invoke(app, ["grid", "--envs", "cartpole", "--replays", "uniform", "--seeds", "1",
                                 "--runs-dir", str(tmp_path / "a_file")])
    _one_line_error(result, "is a file, not a directory")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "env.id=" + "x" * 400], "env.id: "),
        (["--set", "replay.kind=" + "x" * 400], "replay.kind: "),
        (["--set", "replay.kind=" + "x" * 90], "replay.kind: unknown replay kind"),
        (["--name", "x" * 300], "--name: the name is 300 bytes long"),
        (["--seed", "99999999999999999999"], "seed: 99999999999999999999 is out of range; must be in [0, 1000000000]"),
        (["--set", "agent.gamma=.nan"], "agent.gamma: nan is not a finite number"),
    ],
)
def test_names_and_values_that_cannot_run_are_refused_before_the_run_directory(tmp_path, args, message):
    result = runner.invoke(app, ["train", "--runs-dir", str(tmp_path / "runs"), *args])
    _one_line_error(result, message)
    assert not (tmp_path / "runs").exists() or _tree(tmp_path / "runs") == []


@pytest.mark.parametrize(
    ("seeds", "message"),
    [
        ("1-100000", "names 100,000 seeds; one command takes at most 10,000"),
        ("1-99999999999", "seed 99999999999 is out of range; seeds are in [0, 1000000000]"),
    ],
)
def test_a_cohort_too_large_is_refused_at_once(tmp_path, seeds, message):
    result = runner.invoke(app, ["train", "--seeds", seeds, "--runs-dir", str(tmp_path)])
    _one_line_error(result, message)
    assert _tree(tmp_path) == []


def test_a_cohort_is_checked_against_memory_as_a_whole(tmp_path):
    """5,000 seeds of a 10^6-transition memory cannot fit in any machine's RAM this suite runs on (~100 GB)."""
    result = runner.invoke(
        app, ["train", "--seeds", "1-5000", "--set", "replay.capacity=1000000", "--runs-dir", str(tmp_path)]
    )
    _one_line_error(result, "--seeds: a cohort of 5,000 seeds")
    assert _tree(tmp_path) == []


def test_a_config_that_is_not_utf8_is_one_line(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_bytes(b"agent:\n  lr: 0.001 # \xff\n")
    result = runner.invoke(app, ["train", "--config", str(path), "--runs-dir", str(tmp_path / "runs")])
    _one_line_error(result, "is not UTF-8")


def test_per_alone_prints_the_help_once():
    result = runner.invoke(app, [])
    assert result.exit_code == 0
    assert result.output.count("Usage:") == 1


@pytest.mark.parametrize("command", [[], ["train"], ["grid"], ["cliffwalk"]])
def test_flags_are_shown_without_a_value(command):
    result = runner.invoke(app, [*command, "--help"], terminal_width=120)
    assert result.exit_code == 0
    assert "<bool>" not in result.output and "--help" in result.output


def test_cliffwalk_help_and_error_give_one_range():
    from per_cli.experiments.cliffwalk.settings import N_MAX, N_MIN

    allowed = f"[{N_MIN}, {N_MAX}]"
    import typer.main

    command = typer.main.get_command(app).commands["cliffwalk"]
    (n_help,) = [p.help for p in command.params if p.name == "n"]
    assert allowed in n_help and "2..14" not in n_help
    _one_line_error(runner.invoke(app, ["cliffwalk", "--n", "2..99"]), f"chain lengths must be in {allowed}")


@pytest.mark.parametrize(
    "args",
    [
        ["train", "--config", "cartpole_per", "--set", "agent.gamma=.nan"],
        ["train", "--config", "cartpole_per", "--seeds", "1-3", "--set", "agent.lrr=1"],
        ["train", "--config", "cartpole_per", "--seed", "99999999999999999999"],
    ],
)
def test_a_bad_config_is_refused_before_torch_and_gymnasium_are_imported(args):
    """Refusals come fast (issue 35: within a second) because the config is checked before the heavy imports,
    which alone take ~1.5 s on a 2-core VM. Checked in a fresh interpreter, where nothing is imported yet."""
    import subprocess
    import sys

    code = (
        "import sys; from typer.testing import CliRunner; from per_cli.cli import app; "
        f"r = CliRunner().invoke(app, {args!r}); "
        "print(r.exit_code, 'torch' in sys.modules, 'gymnasium' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["2", "False", "False"], out.stdout + out.stderr


LONG_PATH = "/tmp/" + "/".join(["a" * 200] * 25)  # 5,029 bytes: past PATH_MAX (4,096)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # issue 45: each of these was a traceback
        (["plot", "{tmp}", "--out", "{tmp}/a_file"], "--out {tmp}/a_file: is a file, not a directory"),
        (["plot", "{tmp}", "--out", "/proc/per-plots"], "--out /proc/per-plots: cannot create figures there"),
        (["plot", "{tmp}", "--out", LONG_PATH], "the path is 5,029 bytes long; the system takes 4,096"),
        (["plot", "{tmp}/" + "b" * 300], "RUNS_DIR: "),
        (["train", "--runs-dir", LONG_PATH], "--runs-dir /tmp/aaaa"),
        (["grid", "--envs", "cartpole", "--replays", "uniform", "--seeds", "1", "--runs-dir", LONG_PATH],
         "the path is 5,029 bytes long"),
        (["train", "--runs-dir", "{tmp}/" + "b" * 300], "a folder name in it is 300 bytes long"),
        (["cliffwalk", "--out", "{tmp}/a_file"], "--out {tmp}/a_file: is a file, not a directory"),
        (["cliffwalk", "--out", "/proc/per-cliffwalk"], "cannot create the results there"),
        (["cliffwalk", "--alpha", "1000"], "'--alpha': Input should be less than or equal to 10"),
    ],
)
def test_paths_that_cannot_hold_the_output_are_one_line_before_any_work(tmp_path, args, message):
    import time

    (tmp_path / "a_file").write_text("x")
    before = _tree(tmp_path)
    started = time.perf_counter()
    result = runner.invoke(app, [a.replace("{tmp}", str(tmp_path)) for a in args])
    seconds = time.perf_counter() - started
    _one_line_error(result, message.replace("{tmp}", str(tmp_path)))
    assert _tree(tmp_path) == before and not os.path.exists("/proc/per-plots")
    assert seconds < 30  # (under a second on an idle machine: nothing is trained or read)


def test_a_full_disk_while_plotting_is_one_line_and_leaves_no_partial_figures(tmp_path, tiny_disk):
    from tests.runfactory import linear_returns, write_run

    for seed in (1, 2):
        write_run(tmp_path / f"r{seed}", seed=seed, returns=linear_returns(20, 2000, lambda s: 10.0 + s / 100))
    (tiny_disk / "fill").write_bytes(b"x" * 48_000)  # room for the tables, not for every figure
    result = runner.invoke(app, ["plot", str(tmp_path), "--out", str(tiny_disk / "plots"), "--workers", "1"])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 1 and lines[-1].startswith("error: the disk is full: no space left"), result.output
    assert len([line for line in lines if line.startswith(("error", "Traceback"))]) == 1
    assert [p.name for p in tiny_disk.iterdir()] == ["fill"]


def test_a_full_disk_in_cliffwalk_is_one_line_and_leaves_nothing(tiny_disk):
    (tiny_disk / "fill").write_bytes(b"x" * 40_000)  # what is left is less than the figure needs
    result = runner.invoke(app, ["cliffwalk", "--n", "2..3", "--runs", "1", "--out", str(tiny_disk / "cw"), "-q"])
    assert result.exit_code == 1 and result.output.strip().splitlines()[-1].startswith("error: the disk is full")
    assert [p.name for p in tiny_disk.iterdir()] == ["fill"]
