"""What ``per train`` does around a stage: ``--config`` resolved to a file, cohorts of seeds, the closing lines."""

from __future__ import annotations

from pathlib import Path

import typer

from per_cli.cli.usage import EXIT_RUN_FAILED, fail_input
from per_cli.errors import ConfigError


def resolve_config_option(config: str | None) -> Path | None:
    """``--config`` as a file: an existing path, else a shipped config by name; a note when a local file
    shadows a shipped config. Raises ConfigError for an unknown or ambiguous name."""
    if config is None:
        return None
    from per_cli.config.shipped import resolve_config

    resolved = resolve_config(config)
    if resolved.note:
        typer.echo(f"note: {resolved.note}", err=True)
    return resolved.path



def train_cohort(config, overrides, seeds, runs_dir, device, quiet, clash) -> None:  # noqa: ANN001
    """``per train --seeds``: one run directory per seed (named as solo runs are), trained as one cohort.
    Exit 1 when a seed failed (its summary.json says why; the other seeds completed)."""
    from per_cli.config import load_config
    from per_cli.train.loop.cohort import Cohort, cohort_configs, parse_seeds
    from per_cli.train.loop.setup import default_run_name
    from per_cli.train.preflight import preflight
    from per_cli.train.rundir.progress import train_progress

    try:
        if any(value is not None for value in clash):
            raise ConfigError("--seeds: a cohort names its runs by seed and starts anew; drop --seed, --name, --resume")
        cfgs = cohort_configs(load_config(resolve_config_option(config), overrides, device=device), parse_seeds(seeds))
        run_dirs = [runs_dir / default_run_name(cfg) for cfg in cfgs]
        for run_dir in run_dirs:
            if run_dir.exists():
                raise ConfigError(f"--seeds: run directory {run_dir} already exists; wait a second and run again")
        preflight(cfgs[0])
        t = cfgs[0].train
        progress = train_progress(t.total_steps, f"cohort of {len(cfgs)} seeds", quiet, t.total_episodes)
        cohort = Cohort(cfgs, progress=progress)
    except ConfigError as exc:
        raise fail_input(str(exc)) from None
    if cohort.note and not quiet:
        typer.echo(f"note: {cohort.note}", err=True)
    try:
        with progress:
            summaries = cohort.run(run_dirs)
    except KeyboardInterrupt as exc:  # each unfinished run recorded `interrupted` in its summary.json
        typer.echo(f"{exc or 'interrupted'}; recorded in each run's summary.json under {runs_dir}", err=True)
        raise typer.Exit(getattr(exc, "exit_code", 130)) from None
    failed = [(d, s) for d, s in zip(run_dirs, summaries, strict=True) if s.get("status") != "completed"]
    for run_dir, summary in failed:
        typer.echo(f"error: run failed: {summary.get('error')} (see {run_dir / 'summary.json'})", err=True)
    if not quiet:
        typer.echo(f"{len(summaries) - len(failed)} of {len(summaries)} runs completed in {runs_dir}")
    if failed:
        raise typer.Exit(EXIT_RUN_FAILED)


def print_summary(run_dir: Path, summary: dict) -> None:
    from per_cli.train.rundir.progress import done_line

    typer.echo(
        f"{done_line(summary)}\n"
        f"run directory: {run_dir}\n"
        f"view: tensorboard --logdir {run_dir.parent}"
    )
