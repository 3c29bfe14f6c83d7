"""What ``per train`` does around a stage: ``--config`` resolved to a file, cohorts of seeds, the closing lines."""

from __future__ import annotations

import contextlib
from pathlib import Path

import typer

from per_cli.cli.usage import EXIT_RUN_FAILED, check_run_name, fail_input, shown
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



def check_runs_dir(runs_dir: Path) -> None:
    """``--runs-dir`` must be a directory this process can create run directories in: an existing file, a path
    under /proc, a read-only or full place are bad input (one line, exit 2), found before anything is written.
    The check makes the missing folders and one probe folder in the last, and removes all it made again
    (the run makes them itself), so a check, passed or failed, leaves the disk as it was."""
    import tempfile

    if runs_dir.exists() and not runs_dir.is_dir():
        raise ConfigError(f"--runs-dir {shown(runs_dir)}: is a file, not a directory; give a directory")
    made = [p for p in (runs_dir, *runs_dir.parents) if not p.exists()]
    try:
        runs_dir.mkdir(parents=True, exist_ok=True)
        Path(tempfile.mkdtemp(prefix=".per-probe-", dir=runs_dir)).rmdir()
        failure = None
    except OSError as exc:
        failure = exc
    for path in made:  # the deepest first
        with contextlib.suppress(OSError):
            path.rmdir()
    if failure is not None:
        reason = failure.strerror or type(failure).__name__
        raise ConfigError(
            f"--runs-dir {shown(runs_dir)}: cannot create run directories there ({reason}); give a writable directory"
        ) from None


def say_when_compiling(stack: contextlib.ExitStack, quiet: bool) -> None:
    """Until ``stack`` closes, a note at the run's first compile of a kernel (per_cli/cli/compiling.py). Called
    once numba is imported (with the trainer), so that bad input is refused without importing it."""
    from per_cli.cli.compiling import compile_note

    if not quiet:
        stack.enter_context(compile_note(lambda note: typer.echo(f"note: {note}", err=True)))


def train_solo(config, overrides, seed, runs_dir, name, device, quiet, resume) -> None:  # noqa: ANN001
    """``per train`` of one seed (or ``--resume RUN_DIR``): every check, and the run directory's name, before
    anything is written; exit 2 for bad input, 1 for a failed run, 128 + the signal for an interrupted one."""
    with contextlib.ExitStack() as compiling:
        _train_solo(compiling, config, overrides, seed, runs_dir, name, device, quiet, resume)


def train_cohort(config, overrides, seeds, runs_dir, device, quiet, clash) -> None:  # noqa: ANN001
    """``per train --seeds``: one run directory per seed (named as solo runs are), trained as one cohort.
    Exit 1 when a seed failed (its summary.json says why; the other seeds completed)."""
    with contextlib.ExitStack() as compiling:
        _train_cohort(compiling, config, overrides, seeds, runs_dir, device, quiet, clash)


def _train_solo(compiling, config, overrides, seed, runs_dir, name, device, quiet, resume) -> None:  # noqa: ANN001
    from per_cli.config import load_config

    try:
        if resume is not None:
            if config is not None or seed is not None or name is not None:
                raise ConfigError("--resume: the run continues with its own config.yaml; drop --config, --seed, --name")
            if not (resume / "config.yaml").is_file():
                raise ConfigError(f"--resume: {shown(resume)} is not a run directory (it has no config.yaml)")
            cfg = load_config(resume / "config.yaml", overrides, device=device)
        else:
            check_run_name(name)
            cfg = load_config(resolve_config_option(config), overrides, seed=seed, device=device)
        # bad keys and values are refused above, before torch and Gymnasium are imported (~1.5 s on a small VM)
        from per_cli.train.loop.setup import default_run_name
        from per_cli.train.loop.trainer import Trainer
        from per_cli.train.preflight import notes, preflight
        from per_cli.train.rundir.progress import train_progress

        say_when_compiling(compiling, quiet)
        preflight(cfg)  # before the name: env ids and kinds become part of it
        if resume is not None:
            run_dir = resume
        else:
            check_runs_dir(runs_dir)
            run_dir = runs_dir / (name or default_run_name(cfg))
            if run_dir.exists():
                raise ConfigError(f"--name: run directory {shown(run_dir)} already exists; choose another --name")
        progress = train_progress(cfg.train.total_steps, run_dir.name, quiet, cfg.train.total_episodes)
        trainer = Trainer(cfg, progress=progress)
        if resume is not None:
            trainer.resume(run_dir)
    except ConfigError as exc:
        raise fail_input(str(exc)) from None
    if not quiet:
        for note in notes(cfg):
            if note:
                typer.echo(f"note: {note}", err=True)
        if trainer.agent.engine_note:  # the fast path declined: say so once (also in summary.json)
            typer.echo(f"note: agent.engine {trainer.agent.engine}: {trainer.agent.engine_note}", err=True)
    try:
        with progress:
            summary = trainer.run(run_dir)
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM: the trainer raises RunInterrupted (exit 128 + signal)
        typer.echo(f"{exc or 'interrupted'}; recorded in {shown(run_dir / 'summary.json')}", err=True)
        raise typer.Exit(getattr(exc, "exit_code", 130)) from None
    except Exception as exc:  # noqa: BLE001 - recorded in summary.json by the trainer
        from per_cli.train.loop.stopping import describe_failure

        line = describe_failure(exc, run_dir)
        typer.echo(f"error: run failed: {line} (see {shown(run_dir / 'summary.json')})", err=True)
        raise typer.Exit(EXIT_RUN_FAILED) from None
    if not quiet:
        print_summary(run_dir, summary)


def _train_cohort(compiling, config, overrides, seeds, runs_dir, device, quiet, clash) -> None:  # noqa: ANN001
    from per_cli.config import load_config
    from per_cli.config.seeds import parse_seeds, single_seed_note

    try:
        if any(value is not None for value in clash):
            raise ConfigError("--seeds: a cohort names its runs by seed and starts anew; drop --seed, --name, --resume")
        seed_list = parse_seeds(seeds)
        cfg = load_config(resolve_config_option(config), overrides, device=device)
        # bad keys and values are refused above, before torch and Gymnasium are imported (~1.5 s on a small VM)
        from per_cli.train.loop.cohort import Cohort, cohort_configs
        from per_cli.train.loop.setup import default_run_name
        from per_cli.train.preflight import notes, preflight
        from per_cli.train.rundir.progress import train_progress

        say_when_compiling(compiling, quiet)
        cfgs = cohort_configs(cfg, seed_list)
        preflight(cfgs[0], members=len(cfgs))  # before the names: env ids and kinds become part of them
        check_runs_dir(runs_dir)
        run_dirs = [runs_dir / default_run_name(cfg) for cfg in cfgs]
        for run_dir in run_dirs:
            if run_dir.exists():
                raise ConfigError(
                    f"--seeds: run directory {shown(run_dir)} already exists; wait a second and run again"
                )
        t = cfgs[0].train
        progress = train_progress(t.total_steps, f"cohort of {len(cfgs)} seeds", quiet, t.total_episodes)
        cohort = Cohort(cfgs, progress=progress)
    except ConfigError as exc:
        raise fail_input(str(exc)) from None
    if not quiet:
        for note in [single_seed_note(seeds, seed_list), *notes(cfgs[0]), cohort.note]:
            if note:
                typer.echo(f"note: {note}", err=True)
    try:
        with progress:
            summaries = cohort.run(run_dirs)
    except KeyboardInterrupt as exc:  # each unfinished run recorded `interrupted` in its summary.json
        typer.echo(f"{exc or 'interrupted'}; recorded in each run's summary.json under {shown(runs_dir)}", err=True)
        raise typer.Exit(getattr(exc, "exit_code", 130)) from None
    failed = [(d, s) for d, s in zip(run_dirs, summaries, strict=True) if s.get("status") != "completed"]
    for run_dir, summary in failed:
        typer.echo(f"error: run failed: {summary.get('error')} (see {shown(run_dir / 'summary.json')})", err=True)
    if not quiet:
        typer.echo(f"{len(summaries) - len(failed)} of {len(summaries)} runs completed in {shown(runs_dir)}")
    if failed:
        raise typer.Exit(EXIT_RUN_FAILED)


def print_summary(run_dir: Path, summary: dict) -> None:
    from per_cli.train.rundir.progress import done_line

    typer.echo(
        f"{done_line(summary)}\n"
        f"run directory: {shown(run_dir)}\n"
        f"view: tensorboard --logdir {shown(run_dir.parent)}"
    )
