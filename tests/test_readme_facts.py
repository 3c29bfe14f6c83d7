"""The README's facts about the test suite stay true (issue 45: it named 1,228 tests where a fresh clone collected
1,502). It states the count as "over N tests", N a whole hundred: true as long as the suite has at least N tests,
and stale (this test fails) once it has N + 100 or more, so a change of a few tests needs no edit and a change
of the suite's size does."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _collected() -> int:
    """What ``python -m pytest --collect-only -q`` counts, run from the repository root."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=REPO, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    match = re.search(r"^(\d+) tests? collected", done.stdout, re.MULTILINE)
    assert match, done.stdout[-2000:] + done.stderr[-2000:]
    return int(match.group(1))


def test_the_readme_states_how_many_tests_the_suite_has():
    stated = re.findall(r"is over ([\d,]+) tests", (REPO / "README.md").read_text(encoding="utf-8"))
    assert len(stated) == 1, stated
    floor = int(stated[0].replace(",", ""))
    assert floor % 100 == 0
    collected = _collected()
    assert floor <= collected < floor + 100, f"the suite has {collected} tests; write 'over {collected // 100 * 100:,}'"
