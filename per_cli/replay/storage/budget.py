"""Memory the system can give, checked before a storage allocates (a replay memory too large for the machine
is a config error naming ``replay.capacity``, not numpy's ``_ArrayMemoryError`` or the OOM killer)."""

from __future__ import annotations

import contextlib
import os

from per_cli.errors import ConfigError

# leave this fraction of the available memory to the rest of the process (network, batches, the env)
MEMORY_HEADROOM = 0.9


def available_memory_bytes() -> int | None:
    """Memory the system can give this process without swapping (``MemAvailable``), or None if unknown."""
    with contextlib.suppress(OSError), open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                _, kib, *_ = line.split()  # "MemAvailable: <n> kB"
                return int(kib) * 1024
    try:  # other Unixes: free pages (an underestimate: caches could be dropped)
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB"


def ensure_memory_fits(nbytes: int, what: str, *, per_unit: int | None = None, key: str = "replay.capacity") -> None:
    """Raise ConfigError (one line, naming ``key``) when ``nbytes`` is more than the system can give; call it
    before allocating. ``per_unit``: bytes per unit of ``key``, for the largest value that would fit."""
    available = available_memory_bytes()
    if available is None:
        return
    budget = int(available * MEMORY_HEADROOM)
    if nbytes <= budget:
        return
    most = f" to at most {max(budget // per_unit, 1):,}" if per_unit else ""
    raise ConfigError(
        f"{key}: {what} needs {_gb(nbytes)} of memory but only {_gb(available)} is available; "
        f"lower {key}{most} or free memory"
    )
