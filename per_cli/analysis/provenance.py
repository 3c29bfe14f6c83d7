"""Which code made a table, and the command that makes it again: every table of ``per plot`` and of
docs/results/scripts names both in its header, so that a number can be traced and re-made."""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Sequence
from functools import cache
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]


@cache
def commit() -> str:
    """The short commit of the per_cli checkout that runs (``-dirty``: with uncommitted changes); ``an unknown
    commit`` outside a git checkout (an installed wheel)."""
    try:
        done = subprocess.run(["git", "-C", str(PACKAGE_DIR), "describe", "--always", "--dirty", "--abbrev=7"],
                              capture_output=True, text=True, timeout=10, check=False)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return "an unknown commit"
    text = done.stdout.strip()
    return f"commit {text}" if done.returncode == 0 and text else "an unknown commit"


def made_by(argv: Sequence[str]) -> str:
    """``Made at commit abc1234 by `per plot runs/x --out y`.`` (``argv``: the command, quoted for a shell)."""
    return f"Made at {commit()} by `{shlex.join([str(a) for a in argv])}`."
