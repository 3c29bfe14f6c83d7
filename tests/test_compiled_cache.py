"""The compiled kernels' cache is keyed by the source of every numba module, so a changed callee in another
module is compiled again instead of served stale (per_cli/compiled_cache.py)."""

from __future__ import annotations

import os
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


def test_a_cold_cache_is_said_before_the_first_run(tmp_path, monkeypatch):
    """Issue 35: the first run compiled for about 90 s in silence."""
    from per_cli.compiled_cache import cache_is_cold, cold_cache_note

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    assert cache_is_cold() and "compiling kernels (first run" in cold_cache_note()
    (tmp_path / "per_cli" / "x").mkdir(parents=True)
    (tmp_path / "per_cli" / "x" / "kernel.py.nbi").write_bytes(b"index")
    assert not cache_is_cold() and cold_cache_note() is None
