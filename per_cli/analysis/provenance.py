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
    """The short commit of the per_cli checkout that runs (``-dirty``: per_cli itself has uncommitted changes);
    ``an unknown commit`` outside a git checkout."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(PACKAGE_DIR), *args], capture_output=True, text=True, timeout=10,
                                  check=False)  # fmt: skip
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    head = git("rev-parse", "--short=7", "HEAD")
    if not head:
        return "an unknown commit"
    changed = git("status", "--porcelain", "--untracked-files=no", "--", ".")
    return f"commit {head}{'-dirty' if changed else ''}"


def made_by(argv: Sequence[str]) -> str:
    """``Made at commit abc1234 by `per plot runs/x --out y`.`` (``argv``: the command, quoted for a shell)."""
    return f"Made at {commit()} by `{shlex.join([str(a) for a in argv])}`."
