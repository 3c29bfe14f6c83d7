"""Where the runs of a grid train: local worker processes (:mod:`.local`) or Ray tasks (:mod:`.ray_backend`), both
running :mod:`.worker` in-process and answering the driver with the same events."""

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
