"""The ``per`` command line. Thin: parses options, calls a stage, maps errors to exit codes
(2 for bad input, 1 for a run that failed)."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Annotated

import typer

from per_cli.cli.app import ConfigOpt, RunsDirOpt, SetOpt, app
from per_cli.cli.running import (
    check_path_length,
    check_writable_dir,
    train_cohort,
    train_solo,
)
from per_cli.cli.usage import (
    FlagCommand,
    check_run_name,
    config_listing,
    path_option,
    say_notes,
)
from per_cli.errors import ConfigError


@app.command(cls=FlagCommand)
def train(
    config: ConfigOpt = None,
    overrides: SetOpt = None,
    seed: Annotated[int | None, typer.Option(help="Random seed (overrides the config's seed).")] = None,
    seeds: Annotated[
        str | None,
        typer.Option(
            help="Train a cohort in lockstep in one process, a run each: a seed (3), a range (1-100: seeds 1 to "
            "100) or a list (1,5,9 or 1-10,20), as per grid takes them."
        ),
    ] = None,
    runs_dir: RunsDirOpt = Path("runs"),
    name: Annotated[str | None, typer.Option(help="Run directory name (default: ENV__REPLAY__sSEED__TIME).")] = None,
    device: Annotated[str | None, typer.Option(help="auto, cpu or cuda (overrides the config).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress output.")] = False,
    resume: Annotated[
        Path | None,
        typer.Option(
            "--resume",
            parser=path_option,
            metavar="RUN_DIR",
            help="Continue RUN_DIR from its latest checkpoint, with its config.yaml; --set may change train.*, "
            "log.* and metrics.* keys and agent.cuda_graph (e.g. --set train.total_steps=2000000 to train longer).",
        ),
    ] = None,
) -> None:
    """Train one DQN agent with the configured replay memory; writes a run directory (with --seeds, one per seed)."""
    check_path_length(runs_dir, "--runs-dir")  # (before the config's checks import torch: said at once)
    with contextlib.ExitStack() as compiling:  # (the compile note, from the moment the run imports numba)
        if seeds is not None:
            train_cohort(compiling, config, overrides or [], seeds, runs_dir, device, quiet, clash=(seed, name, resume))
        else:
            train_solo(compiling, config, overrides or [], seed, runs_dir, name, device, quiet, resume)


@app.command(cls=FlagCommand)
def configs(
    name: Annotated[
        str | None,
        typer.Argument(help="A shipped config (or a file) to print resolved, with every default filled in."),
    ] = None,
) -> None:
    """List the shipped configs with their descriptions, or print one resolved (every default filled
    in, ready to copy and edit): per configs cartpole_per > my.yaml."""
    from per_cli.config import dump_config, load_config
    from per_cli.config.shipped import describe, resolve_config, shipped_configs, shipped_root

    if name is None:
        shipped = shipped_configs()
        listing = [(n, describe(path, cut=False)) for n, path in shipped.items()]
        closing = (
            f"{len(shipped)} configs in {shipped_root()}; per configs NAME prints one with every default; "
            "per train --config NAME runs it"
        )
        typer.echo(config_listing(listing, closing))
        return
    resolved = resolve_config(name, option="per configs")
    from per_cli.replay import resolve_config as with_kind_defaults

    cfg = with_kind_defaults(load_config(resolved.path))  # (the kind's own defaults: α, β0, params)
    say_notes(resolved.note)
    typer.echo(f"# {resolved.name or resolved.path}: {describe(resolved.path)}")
    typer.echo(f"# resolved from {resolved.path} with every default filled in; edit and run with per train --config")
    typer.echo(dump_config(cfg), nl=False)


@app.command(cls=FlagCommand)
def grid(
    envs: Annotated[
        str | None,
        typer.Option(
            "--envs",
            help="Comma-separated envs: cartpole,acrobot or Gymnasium ids (default with --config: its env.id, "
            "and its replay.kind unless --replays is given).",
        ),
    ] = None,
    replays: Annotated[
        str | None,
        typer.Option(help="Comma-separated replay kinds (default: every kind with a config for the env)."),
    ] = None,
    seeds: Annotated[
        str,
        typer.Option(
            help="The seeds of every setting: a seed (3), a range (1-10: seeds 1 to 10) or a list (1,5,9 or "
            "1-10,20), as per train takes them."
        ),
    ] = "1-3",
    sweep: Annotated[
        list[str] | None,
        typer.Option("--sweep", help="Add a config key as an axis: --sweep replay.capacity=1000,100000 (repeatable)."),
    ] = None,
    overrides: SetOpt = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config", "-c", help="Base config for every run: a file or a shipped name (env.id, replay.kind per run)"
        ),
    ] = None,
    configs_dir: Annotated[
        Path | None,
        typer.Option(
            parser=path_option,
            metavar="DIR",
            help="Where configs/<env>_<kind>.yaml live (default: ./configs, else the repository's).",
        ),
    ] = None,
    runs_dir: RunsDirOpt = Path("runs"),
    name: Annotated[
        str | None, typer.Option(help="Grid directory name (default: grid-TIME, or the grid this request made).")
    ] = None,
    workers: Annotated[
        int | None, typer.Option(min=1, help="Runs at once (default: CPU cores; Ray: its CPUs).")
    ] = None,
    cohort_size: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Train up to N runs that differ only in the seed together in one process or Ray task "
            "(default: the seeds of a setting spread over the workers; 1: every run alone).",
        ),
    ] = None,
    backend: Annotated[str, typer.Option(help="local (process pool) or ray.")] = "local",
    ray_address: Annotated[str | None, typer.Option(help="Ray cluster address (default: start Ray here).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the runs and their state; write nothing.")] = False,
    retry_failed: Annotated[bool, typer.Option("--retry-failed", help="Run failed runs again.")] = False,
    plot: Annotated[bool, typer.Option("--plot", help="Run per plot on the grid directory afterwards.")] = False,
) -> None:
    """Run env × replay × seed (× --sweep) as separate runs on local cores or Ray; re-run the same command
    to resume (completed runs are skipped)."""
    from per_cli.config.seeds import single_seed_note
    from per_cli.sweep import grid as grid_mod

    if backend not in ("local", "ray"):
        raise ConfigError(f"--backend {backend!r}: choose local or ray")
    if ray_address is not None and backend != "ray":
        raise ConfigError("--ray-address needs --backend ray")
    if backend == "ray" and not dry_run:
        try:
            import ray  # noqa: F401
        except ImportError:
            raise ConfigError(
                "--backend ray needs Ray: pip install -e '.[ray]' (in a clone; else pip install 'per-cli[ray]')"
            ) from None
    check_run_name(name)
    check_path_length(runs_dir, "--runs-dir")
    request = grid_mod.build_request(envs, replays, seeds, sweep, overrides, config, configs_dir)
    say_notes(single_seed_note(seeds, request.seeds))
    plan = grid_mod.plan_grid(request)
    if not dry_run:
        check_writable_dir(runs_dir, "--runs-dir", "run directories")
    grid_dir, exists = grid_mod.find_grid_dir(plan, runs_dir, name)
    if dry_run:
        grid_mod.dry_run_table(plan, grid_dir, exists, retry_failed)
        return
    if backend == "local":
        grid_mod.check_devices(plan)
    code = grid_mod.run_grid(
        plan,
        grid_dir,
        workers=workers,
        backend=backend,
        ray_address=ray_address,
        retry_failed=retry_failed,
        cohort_size=cohort_size,
    )
    if plot and code != 130:  # a separate process: plotting does not share the grid's imports
        import subprocess

        done = subprocess.run([sys.executable, "-m", "per_cli", "plot", str(grid_dir)], check=False)
        if done.returncode != 0 and code == 0:
            raise typer.Exit(done.returncode)
    raise typer.Exit(code)
