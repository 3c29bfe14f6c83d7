"""Where numba keeps the compiled kernels: a directory per version of the package's compiled code.

Numba checks a cached kernel against its own source file only, so a kernel calling a changed function of another
module would keep the old code; hence ``$XDG_CACHE_HOME/per/numba/<hash of every module that mentions numba>``.
A ``NUMBA_CACHE_DIR`` the user exports wins."""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import tempfile
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent


def source_key(package: Path = PACKAGE) -> str:
    """16 hex digits of a hash over the path and bytes of each ``*.py`` under ``package`` that mentions numba."""
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        text = path.read_bytes()
        if b"numba" in text:
            digest.update(path.relative_to(package).as_posix().encode() + b"\0" + text + b"\0")
    return digest.hexdigest()[:16]


def cache_dir(package: Path = PACKAGE) -> Path:
    """The directory the compiled kernels of this version of ``package`` are cached in."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    if not os.path.isabs(base):  # no home to be found (expanduser left "~"): never a folder under the cwd
        return temporary_cache_dir(source_key(package))
    return Path(base) / "per" / "numba" / source_key(package)


def temporary_cache_dir(key: str) -> Path:
    """Where key ``key``'s kernels go when no home can be found or written: this user's folder under the
    system's temporary directory."""
    user = getattr(os, "getuid", lambda: "user")()
    return Path(tempfile.gettempdir()) / f"per-numba-{user}" / key


def point_numba_cache(package: Path = PACKAGE) -> None:
    """Make numba cache ``package``'s kernels in :func:`cache_dir`, created (where that cannot be written, a read-only
    home: the same key under the system's temporary directory), unless ``NUMBA_CACHE_DIR`` is set.
    Call it before the package's first ``@njit(cache=True)`` runs: numba picks the directory when it decorates."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    cache = cache_dir(package)
    with contextlib.suppress(OSError):
        cache.mkdir(parents=True, exist_ok=True)
    if not (os.path.isdir(cache) and os.access(cache, os.W_OK)):
        cache = temporary_cache_dir(cache.name)
        cache.mkdir(parents=True, exist_ok=True)
    path = str(cache)
    os.environ["NUMBA_CACHE_DIR"] = path  # read when numba is imported (and by subprocesses)
    config = getattr(sys.modules.get("numba"), "config", None)
    if config is not None:  # numba imported before per_cli: its config has already read the environment
        config.CACHE_DIR = path


# what the first run of a version on a cold cache costs (the README's "First run")
COLD_COMPILE_S = "1-2 min"
