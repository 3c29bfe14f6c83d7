"""summary.json's ``machine``: the CPU, the numba target the kernels are compiled for, Python and the versions of
the packages a run's arithmetic passes through, as this process has them."""

from __future__ import annotations

import importlib.metadata
import platform

import llvmlite.binding
import numba

from per_cli.rundir.machine import PACKAGES, machine


def test_the_machine_names_the_installed_packages_versions_and_only_those():
    recorded = machine()
    for name in PACKAGES:
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            assert name not in recorded
        else:
            assert recorded[name] == version
    assert recorded["python"] == platform.python_version()
    assert recorded["numpy"] and recorded["numba"] and recorded["torch"]  # (the core's own dependencies)


def test_the_numba_target_is_the_cpu_the_kernels_are_compiled_for():
    recorded = machine()
    assert recorded["numba_target"] == (numba.config.CPU_NAME or llvmlite.binding.get_host_cpu_name())
    assert isinstance(recorded["cpu"], str) and recorded["cpu"]
