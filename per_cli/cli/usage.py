"""How the ``per`` command line reports bad input: click's and Typer's own usage errors and every ConfigError as the
tool's one-line ``error: ...`` with exit code 2, and the checks of option values that need no stage."""

from __future__ import annotations

import importlib
import inspect
import shlex
import shutil
import sys
import textwrap
from pathlib import Path, PurePosixPath, PureWindowsPath

import typer
from typer.core import TyperCommand, TyperGroup

from per_cli.errors import ConfigError, os_error_line

EXIT_BAD_INPUT = 2
EXIT_RUN_FAILED = 1
MAX_NAME_BYTES = 200

# Click's exceptions, from the click that Typer runs on (recent Typer versions vendor their own copy)
_clicks = importlib.import_module(TyperGroup.__mro__[1].__module__.rpartition(".")[0] + ".exceptions")
_NO_ARGS = getattr(_clicks, "NoArgsIsHelpError", ())  # click >= 8.2; older ones print the help themselves


def _no_flag_metavars(params: list) -> list:
    """An on/off flag takes no value, but Typer's help shows ``--quiet <bool>`` (its type's name), which reads
    as ``--quiet true`` (an error): flags get an empty metavar, so the help shows none."""
    for param in params:
        if getattr(param, "is_flag", False):
            param.metavar = ""
    return params


def unwrapped(text: str | None) -> str | None:
    """A docstring's paragraphs each on one line: the help's renderer wraps them to the terminal, but keeps the
    docstring's own line breaks in the list of commands (``per --help`` broke lines mid-sentence)."""
    if not text:
        return text
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)


class FlagCommand(TyperCommand):
    """A command whose help shows flags without a ``<bool>`` value (:func:`_no_flag_metavars`) and its
    paragraphs unbroken (:func:`unwrapped`)."""

    def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003 - click's signature
        super().__init__(*args, **kwargs)
        self.help = unwrapped(self.help)

    def get_params(self, ctx):  # noqa: ANN001, ANN201 - click's signature
        return _no_flag_metavars(super().get_params(ctx))


class OneLineErrors(TyperGroup):
    """Click's and Typer's usage errors (``--seed abc``, an unknown option) and every ConfigError a command raises as
    the tool's one-line ``error: ...``, exit code 2; ``per`` alone prints the help, exit 0."""

    def get_params(self, ctx):  # noqa: ANN001, ANN201 - click's signature
        return _no_flag_metavars(super().get_params(ctx))

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):  # noqa: ANN001
        args = sys.argv[1:] if args is None else list(args)
        if not args:  # as --help: no-args-is-help's error prints the help as it is made, and again when shown
            args = ["--help"]
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except _NO_ARGS:  # a subgroup called with no arguments (its help already printed)
            code = 0
        except _clicks.UsageError as exc:
            command = exc.ctx.command_path if exc.ctx is not None else "per"
            typer.echo(f"error: {exc.format_message()} (see {command} --help)", err=True)
            code = EXIT_BAD_INPUT
        except _clicks.ClickException as exc:
            typer.echo(f"error: {exc.format_message()}", err=True)
            code = exc.exit_code
        except ConfigError as exc:  # bad input found by a command or the stage it calls: one line, nothing written
            typer.echo(f"error: {exc}", err=True)
            code = EXIT_BAD_INPUT
        except typer.Abort:
            typer.echo("aborted", err=True)
            code = 1
        except OSError as exc:  # what no check before the work can see: the disk filling up while it is written
            typer.echo(f"error: {os_error_line(exc)}", err=True)
            code = EXIT_RUN_FAILED
        code = code if isinstance(code, int) else 0
        if not standalone_mode:
            return code
        sys.exit(code)


def path_option(value: str | Path) -> Path:
    """A path option's value (Typer's ``parser``): an empty one is refused, as ``Path("")`` is the working
    directory, where ``--runs-dir ''`` would quietly write."""
    if not str(value).strip():
        raise typer.BadParameter("an empty path (it would mean the working directory); give a path")
    return Path(value)


def config_listing(rows: list[tuple[str, str]], closing: str) -> str:
    """``per configs``: each name whole, its description wrapped beside it to the terminal's width (below it when
    the names leave too little room), then ``closing`` wrapped; nothing is cut."""
    width = shutil.get_terminal_size().columns
    names = max(len(name) for name, _ in rows) + 2
    beside = width - names >= 30
    lines = []
    for name, text in rows:
        indent = " " * (names if beside else 4)
        body = textwrap.wrap(text, max(width, 40) - len(indent), break_on_hyphens=False) or [""]
        if beside:
            lines += [name.ljust(names) + body[0], *(indent + line for line in body[1:])]
        else:
            lines += [name, *(indent + line for line in body)]
    return "\n".join([*lines, textwrap.fill(closing, max(width, 40), break_on_hyphens=False)])


def shown(path: object) -> str:
    """A path as printed to the user: quoted as a shell would need it (a path with spaces stays one word)."""
    return shlex.quote(str(path))


def say_notes(*notes: str | None) -> None:
    """Each note on stderr as ``note: ...`` (empty ones and None left out)."""
    for note in notes:
        if note:
            typer.echo(f"note: {note}", err=True)


def check_run_name(name: str | None) -> None:
    """A run (or grid) name is one printable folder name inside --runs-dir (no separators, '.' or '..'): a newline or
    an escape sequence would reach the terminal in every line that names the run."""
    if name is None:
        return
    if not name.isprintable():  # C0 and C1 controls, DEL, line separators, invisible format characters
        bad = next(ch for ch in name if not ch.isprintable())
        raise ConfigError(f"--name {name[:60]!r}: {bad!r} cannot be in a name; use letters, digits, '-', '_', '.'")
    parts = PurePosixPath(name).parts + PureWindowsPath(name).parts
    if not name.strip() or name in (".", "..") or len(set(parts)) != 1 or "/" in name or "\\" in name:
        raise ConfigError(f"--name {name!r}: a name is one folder name inside --runs-dir (no '/', '\\' or '..')")
    if len(name.encode()) > MAX_NAME_BYTES:  # a file name is at most 255 bytes; leave room for a suffix
        raise ConfigError(f"--name: the name is {len(name.encode()):,} bytes long; give at most {MAX_NAME_BYTES}")
