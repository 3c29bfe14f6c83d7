"""The compiled kernels' cache is keyed by the source of every numba module, so a changed callee in another
module is compiled again instead of served stale (per_cli/compiled_cache.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from per_cli.compiled_cache import cache_dir, source_key

REPO = Path(__file__).resolve().parents[1]

CALLEE = "import numba\n\n\n@numba.njit(cache=True)\ndef value():\n    return {}\n"
CALLER = (
    "import numba\n\nfrom kernels.callee import value\n\n\n@numba.njit(cache=True)\ndef twice():\n"
    "    return 2 * value()\n"
)
RUN = """
import os, sys
sys.path[:0] = [{repo!r}, {root!r}]
from per_cli.compiled_cache import point_numba_cache
from pathlib import Path
del os.environ["NUMBA_CACHE_DIR"]  # (per_cli's own, set when it was imported)
point_numba_cache(Path({root!r}) / "kernels")
import kernels.caller
print(kernels.caller.twice(), os.environ["NUMBA_CACHE_DIR"])
"""


def _package(root: Path, value: int) -> Path:
    package = root / "kernels"
    package.mkdir(exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "callee.py").write_text(CALLEE.format(value))
    (package / "caller.py").write_text(CALLER)
    (package / "notes.py").write_text("TEXT = 'no compiled code here'\n")
    return package


def _twice(root: Path, cache_home: Path) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"} | {"XDG_CACHE_HOME": str(cache_home)}
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # (an edit within the same second, of the same size, reuses a .pyc)
    code = textwrap.dedent(RUN.format(repo=str(REPO), root=str(root)))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=True)
    value, path = out.stdout.split()
    return int(value), path


def test_the_key_follows_compiled_modules_only(tmp_path):
    package = _package(tmp_path, 1)
    key = source_key(package)
    (package / "notes.py").write_text("TEXT = 'edited'\n")
    assert source_key(package) == key  # no numba in it: no recompiling
    (package / "callee.py").write_text(CALLEE.format(2))
    assert source_key(package) != key
    assert cache_dir(package).name == source_key(package)


def test_a_changed_callee_in_another_module_is_compiled_again(tmp_path):
    package = _package(tmp_path, 1)
    first, first_dir = _twice(tmp_path, tmp_path / "cache")
    assert first == 2 and Path(first_dir).parent == tmp_path / "cache" / "per" / "numba"
    assert any(Path(first_dir).rglob("*.nbi"))  # the kernels were cached there
    assert _twice(tmp_path, tmp_path / "cache") == (2, first_dir)  # unchanged code: the same cache
    (package / "callee.py").write_text(CALLEE.format(5))  # the caller's own file is unchanged
    assert _twice(tmp_path, tmp_path / "cache")[0] == 10


def test_a_users_numba_cache_dir_wins_and_importing_the_package_points_numba(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"} | {"XDG_CACHE_HOME": str(tmp_path)}
    code = "import per_cli, numba; print(numba.config.CACHE_DIR)"
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert Path(run.stdout.strip()) == tmp_path / "per" / "numba" / source_key()
    env["NUMBA_CACHE_DIR"] = str(tmp_path / "mine")
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert run.stdout.strip() == str(tmp_path / "mine")


def test_without_a_home_the_cache_is_never_under_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setattr(os.path, "expanduser", lambda path: path)  # as when neither HOME nor a passwd entry exists
    assert cache_dir().is_absolute()


COMPILING = """
import numba, numpy as np
import per_cli
from per_cli.cli.compiling import compile_note
from per_cli.replay.structures.ids import current_slot

@numba.njit
def not_ours(x):
    return x + 1

said = []
with compile_note(said.append):
    not_ours(1)  # (a kernel of another package, compiled on every run: no note)
    current_slot(np.arange(4), 2)
    current_slot(np.arange(4), 3)
print(len(said), per_cli.__file__)
"""


def _notes_when_compiling(root: Path, cache: Path) -> int:
    """How many compile notes a process importing the package from ``root`` printed (its file checked)."""
    env = {**os.environ, "PYTHONPATH": str(root), "NUMBA_CACHE_DIR": str(cache)}
    out = subprocess.run([sys.executable, "-c", COMPILING], env=env, capture_output=True, text=True, timeout=120,
                         check=True, cwd=root)  # fmt: skip
    count, where = out.stdout.split()
    assert Path(where) == root / "per_cli" / "__init__.py"
    return int(count)


def test_a_compile_is_said_once_in_a_new_checkout_beside_an_old_one(tmp_path):
    """Issue 45: a new clone beside an old one compiled every kernel in silence, because the version's cache
    already held the old clone's kernels (numba keeps a folder per source folder). The note now comes from
    numba's own compile event: once at a process's first compile of a cached kernel of the package, never when
    they all load from the cache."""
    cache = tmp_path / "cache"  # a real, fresh cache
    clone = tmp_path / "clone"
    shutil.copytree(REPO / "per_cli", clone / "per_cli", ignore=shutil.ignore_patterns("__pycache__"))
    assert _notes_when_compiling(REPO, cache) == 1  # the first run: compiles, says so once
    assert _notes_when_compiling(REPO, cache) == 0  # loads from the cache: nothing to say
    assert any(cache.rglob("*.nbi"))  # (what the old check read as "not cold" for the clone below)
    assert _notes_when_compiling(clone, cache) == 1  # the clone compiles into folders of its own, and says so
    assert _notes_when_compiling(clone, cache) == 0
