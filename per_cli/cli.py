"""The ``per`` command line. Thin: parses options, calls a stage, maps errors to exit codes
(2 for bad input, 1 for a run that failed)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from per_cli.config import ConfigError

app = typer.Typer(
    name="per",
    help="Experiment runner for experience replay in deep Q-learning.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

EXIT_BAD_INPUT = 2
EXIT_RUN_FAILED = 1


def fail_input(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(EXIT_BAD_INPUT)


ConfigOpt = Annotated[
    Path | None, typer.Option("--config", "-c", help="YAML config file (defaults apply without one).")
]
SetOpt = Annotated[list[str] | None, typer.Option("--set", help="Override any key: --set agent.lr=3e-4 (repeatable).")]


@app.callback()
def _root() -> None:
    """Experiment runner for experience replay in deep Q-learning: train, sweep, plot."""


RunsDirOpt = Annotated[Path, typer.Option("--runs-dir", help="Where run directories are created.")]


@app.command()
def train(
    config: ConfigOpt = None,
    overrides: SetOpt = None,
    seed: Annotated[int | None, typer.Option(help="Random seed (overrides the config's seed).")] = None,
    runs_dir: RunsDirOpt = Path("runs"),
    name: Annotated[str | None, typer.Option(help="Run directory name (default: ENV__REPLAY__sSEED__TIME).")] = None,
    device: Annotated[str | None, typer.Option(help="auto, cpu or cuda (overrides the config).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress output.")] = False,
) -> None:
    """Train one DQN agent with the configured replay memory; writes a run directory."""
    from per_cli.config import load_config
    from per_cli.loop import Trainer, default_run_name
    from per_cli.progress import train_progress

    try:
        cfg = load_config(config, overrides or [], seed=seed, device=device)
        run_dir = runs_dir / (name or default_run_name(cfg))
        if run_dir.exists():
            raise ConfigError(f"--name: run directory {run_dir} already exists; choose another --name")
        progress = train_progress(cfg.train.total_steps, run_dir.name, quiet)
        trainer = Trainer(cfg, progress=progress)
    except ConfigError as exc:
        raise fail_input(str(exc)) from None
    try:
        with progress:
            summary = trainer.run(run_dir)
    except KeyboardInterrupt:
        typer.echo(f"interrupted; recorded in {run_dir / 'summary.json'}", err=True)
        raise typer.Exit(130) from None
    except Exception as exc:  # noqa: BLE001 - recorded in summary.json by the trainer
        typer.echo(f"error: run failed: {type(exc).__name__}: {exc} (see {run_dir / 'summary.json'})", err=True)
        raise typer.Exit(EXIT_RUN_FAILED) from None
    if not quiet:
        _print_summary(run_dir, summary)


def _print_summary(run_dir: Path, summary: dict) -> None:
    def fmt(v):
        return "-" if v is None else f"{v:.1f}"

    typer.echo(
        f"done: {summary['total_steps']} steps, {summary['episodes']} episodes in {summary['wall_time_s']:.1f}s "
        f"({summary['steps_per_second']:.0f} steps/s); last-20 return {fmt(summary['final_return_mean'])}, "
        f"eval return {fmt(summary['eval_return_mean'])}\n"
        f"run directory: {run_dir}\n"
        f"view: tensorboard --logdir {run_dir.parent}"
    )


def main() -> None:  # pragma: no cover - `python -m per_cli`
    sys.exit(app())
