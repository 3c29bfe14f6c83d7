"""How the ``per`` command line reports bad input: click's and Typer's own usage errors as the tool's one-line
``error: ...`` with exit code 2, and the checks of option values that need no stage."""

from __future__ import annotations

import importlib
import sys
from pathlib import PurePosixPath, PureWindowsPath

import typer
from typer.core import TyperGroup

from per_cli.errors import ConfigError

EXIT_BAD_INPUT = 2
EXIT_RUN_FAILED = 1

# Click's exceptions, from the click that Typer runs on (recent Typer versions vendor their own copy)
_clicks = importlib.import_module(TyperGroup.__mro__[1].__module__.rpartition(".")[0] + ".exceptions")
_NO_ARGS = getattr(_clicks, "NoArgsIsHelpError", ())  # click >= 8.2; older ones print the help themselves


class OneLineErrors(TyperGroup):
    """Click's and Typer's own usage errors (``--seed abc``, ``--workers 0``, an unknown option) as the tool's
    one-line ``error: ...`` with exit code 2, like every other bad input; ``per`` alone prints the help, exit 0."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):  # noqa: ANN001
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except _NO_ARGS:
            code = super().main(["--help"], prog_name, complete_var, standalone_mode=False, **extra)
        except _clicks.UsageError as exc:
            command = exc.ctx.command_path if exc.ctx is not None else "per"
            typer.echo(f"error: {exc.format_message()} (see {command} --help)", err=True)
            code = EXIT_BAD_INPUT
        except _clicks.ClickException as exc:
            typer.echo(f"error: {exc.format_message()}", err=True)
            code = exc.exit_code
        except typer.Abort:
            typer.echo("aborted", err=True)
            code = 1
        code = code if isinstance(code, int) else 0
        if not standalone_mode:
            return code
        sys.exit(code)


def fail_input(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(EXIT_BAD_INPUT)


def check_run_name(name: str | None, option: str = "--name") -> None:
    """A run (or grid) name is one folder name inside --runs-dir: no separators, not '.' or '..'."""
    if name is None:
        return
    parts = PurePosixPath(name).parts + PureWindowsPath(name).parts
    if not name.strip() or name in (".", "..") or len(set(parts)) != 1 or "/" in name or "\\" in name:
        raise ConfigError(f"{option} {name!r}: a name is one folder name inside --runs-dir (no '/', '\\' or '..')")
