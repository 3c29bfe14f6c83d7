"""The ``per`` Typer app, its root options and the options its commands share; the commands themselves are in
:mod:`.commands` (train, configs, grid) and :mod:`.reports` (plot, cliffwalk), each registering on :data:`app`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from per_cli import __version__
from per_cli.cli.usage import OneLineErrors, path_option

app = typer.Typer(
    name="per",
    cls=OneLineErrors,
    help="Experiment runner for experience replay in deep Q-learning.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


ConfigOpt = Annotated[
    str | None,
    typer.Option(
        "--config",
        "-c",
        help="A YAML file, or a shipped config by name (cartpole_per, seed001/cartpole_per; see per configs). "
        "Defaults apply without one.",
    ),
]
SetOpt = Annotated[list[str] | None, typer.Option("--set", help="Override any key: --set agent.lr=3e-4 (repeatable).")]


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"per {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_show_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Experiment runner for experience replay in deep Q-learning: train, sweep, plot."""


RunsDirOpt = Annotated[
    Path, typer.Option("--runs-dir", parser=path_option, metavar="DIR", help="Where run directories are created.")
]
