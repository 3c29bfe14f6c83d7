"""A new user's first hour with the command line (issue 45): help text that reads whole at 80 columns, names and
paths that cannot be what the user meant refused in one line before anything is written."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from per_cli.cli.usage import unwrapped
from per_cli.config.shipped import describe, shipped_configs

COMMANDS = ["train", "configs", "grid", "plot", "cliffwalk"]


def _per(*args: str, cwd: object = None, columns: int = 80) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": str(columns)}
    return subprocess.run(
        [sys.executable, "-m", "per_cli", *args], capture_output=True, text=True, timeout=60, env=env, cwd=cwd,
        check=False,
    )


def _refused(done: subprocess.CompletedProcess, message: str) -> None:
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: ") and message in done.stderr, done.stderr
    assert "\x1b" not in done.stderr + done.stdout and "Traceback" not in done.stderr


def _panel_rows(text: str, title: str) -> list[list[str]]:
    """The rows of a help panel's two-column table: each row its description cell's lines."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if title in line)
    rows: list[list[str]] = []
    for line in lines[start + 1 :]:
        if not line.startswith("│"):
            break
        inner = line[2:-2]
        name, cell = inner[:11], inner[11:].rstrip()
        if name.strip():
            rows.append([cell])
        else:
            rows[-1].append(cell)
    return rows


def test_the_list_of_commands_wraps_its_sentences_where_the_width_ends():
    """Issue 45: ``per --help`` broke lines mid-sentence, at the docstrings' own line ends ("print one resolved
    (every default filled" / "in, ready to copy"). Wrapped to the width, a line ends only where the next word
    would not fit."""
    done = _per("--help")
    assert done.returncode == 0, done.stderr
    width = max(len(line) for line in done.stdout.splitlines() if line.startswith("│")) - 2 - 2 - 11
    rows = _panel_rows(done.stdout, "Commands")
    assert len(rows) == len(COMMANDS)
    for cells in rows:
        for line, following in zip(cells, cells[1:], strict=False):
            assert len(line) + 1 + len(following.split()[0]) > width, (line, following)
    assert "print one resolved (every default filled in, ready to copy and edit)" in " ".join(
        " ".join(cells) for cells in rows
    )


def test_a_docstring_is_one_paragraph_a_line():
    assert unwrapped("One\n    two.\n\n    Three\n    four.") == "One two.\n\nThree four."


@pytest.mark.parametrize("command", COMMANDS)
def test_no_help_cuts_a_value_at_80_columns(command):
    """Issue 45: at 80 columns ``per cliffwalk --help`` showed ``[default: uniform,prioritized,rank,…`` and
    ``runs/cliffwalk__LEARNER__…``."""
    done = _per(command, "--help")
    assert done.returncode == 0, done.stderr
    assert "…" not in done.stdout and max(len(line) for line in done.stdout.splitlines()) <= 80


def test_per_configs_shows_every_name_and_description_whole_at_80_columns():
    """Issue 45: ``per configs`` cut descriptions off with "…" and ran past 80 columns."""
    done = _per("configs")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "…" not in done.stdout and max(len(line) for line in lines) <= 80
    entries: dict[str, list[str]] = {}
    for line in lines[:-2]:  # (the closing sentence is the last two)
        if line.startswith(" "):
            entries[list(entries)[-1]].append(line.strip())
        else:
            name, _, text = line.partition(" ")
            entries[name] = [text.strip()]
    shipped = shipped_configs()
    assert list(entries) == list(shipped)
    for name, path in shipped.items():
        assert " ".join(entries[name]) == describe(path, cut=False), name
    narrow = _per("configs", columns=50).stdout.splitlines()  # too narrow for both side by side: below the name
    assert narrow[0] == next(iter(shipped)) and narrow[1].startswith("    ") and max(map(len, narrow)) <= 50


@pytest.mark.parametrize("command", ["train", "grid"])
@pytest.mark.parametrize(
    ("name", "shown"),
    [("a\nb", r"'a\nb'"), ("\x1b[31mred", r"'\x1b[31mred'"), ("x\x85y", r"'x\x85y'"), ("ok\x7f", r"'ok\x7f'")],
)
def test_a_name_with_a_control_character_is_refused_and_shown_escaped(tmp_path, command, name, shown):
    """Issue 45: ``--name`` with a newline or an escape sequence was accepted and echoed to the terminal."""
    args = ["--envs", "cartpole", "--replays", "uniform"] if command == "grid" else []
    done = _per(command, *args, "--name", name, "--runs-dir", str(tmp_path / "runs"))
    _refused(done, f"--name {shown}: ")
    assert "cannot be in a name" in done.stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["train", "--runs-dir", ""],
        ["grid", "--envs", "cartpole", "--replays", "uniform", "--runs-dir", ""],
        ["train", "--runs-dir", " "],
        ["train", "--resume", ""],
        ["cliffwalk", "--out", ""],
        ["plot", ""],
    ],
)
def test_an_empty_path_is_refused_not_taken_as_the_working_directory(tmp_path, args):
    """Issue 45: ``--runs-dir ''`` wrote into the current directory (``Path("")`` is ``.``)."""
    done = _per(*args, cwd=tmp_path)
    _refused(done, "an empty path (it would mean the working directory); give a path")
    assert list(tmp_path.iterdir()) == []
