"""Where the runs of a grid train: a pool of spawned local worker processes (:mod:`per_cli.sweep.local`) or Ray tasks
(:mod:`per_cli.sweep.ray_backend`). Both run the real training code in-process (:mod:`per_cli.sweep.worker`) and answer
the driver with the same events."""

from __future__ import annotations

from per_cli.errors import ConfigError


def make_executor(backend: str, workers: int | None, ray_address: str | None):
    """``workers`` None: all local cores, or all of the Ray cluster's CPUs."""
    if backend == "local":
        from per_cli.sweep.local import LocalExecutor

        return LocalExecutor(workers or 1)
    if backend == "ray":
        from per_cli.sweep.ray_backend import RayExecutor

        try:
            return RayExecutor(workers, ray_address)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            where = f"--ray-address {ray_address}" if ray_address else "--backend ray"
            raise ConfigError(f"{where}: Ray did not start: {type(exc).__name__}: {exc}") from None
    raise ValueError(f"unknown backend {backend!r}")
