"""What computed a run, for its ``summary.json`` (``machine``): the CPU, the numba target, Python and the versions
of the packages whose arithmetic the run's numbers pass through.

Why: a run is equal bit for bit to another of its config and seed only on the same numba target and packages. The
numba engine's kernels are compiled for the host CPU (llvmlite's name for it, unless ``NUMBA_CPU_NAME`` names
another), and their vectorised sums round by that target's vector width; an EnvPool, torch or Gymnasium release
may change its own arithmetic. These fields say which, so a difference can be traced (docs/results/README.md)."""

from __future__ import annotations

import functools
import importlib.metadata
import platform
from pathlib import Path

import llvmlite.binding
import numba

PACKAGES = ("numpy", "numba", "torch", "gymnasium", "envpool", "ale-py", "minatar")  # those installed are named


@functools.cache
def machine() -> dict[str, str]:
    """``cpu`` (the model name), ``numba_target``, ``python`` and each installed package of :data:`PACKAGES` with
    its version (one read per process)."""
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    target = numba.config.CPU_NAME or llvmlite.binding.get_host_cpu_name()
    return {"cpu": _cpu_model(), "numba_target": target, "python": platform.python_version(), **versions}


def _cpu_model() -> str:
    """The CPU's model name as Linux reports it (``/proc/cpuinfo``), else what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
