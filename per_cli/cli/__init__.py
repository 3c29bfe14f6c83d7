"""The ``per`` command line: the Typer app (:mod:`.commands`), its one-line usage errors (:mod:`.usage`) and
what ``per train`` does around the training stage (:mod:`.running`)."""

from per_cli.cli.commands import app, main

__all__ = ["app", "main"]
