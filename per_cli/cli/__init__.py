"""The ``per`` command line: the Typer app (:mod:`.app`), its commands (:mod:`.commands`, :mod:`.reports`), its
one-line usage errors (:mod:`.usage`) and what ``per train`` does around the training stage (:mod:`.running`)."""

import sys

from per_cli.cli import commands, reports  # noqa: F401 - each registers its commands on the app
from per_cli.cli.app import app


def main() -> None:  # pragma: no cover - `python -m per_cli`
    sys.exit(app())


__all__ = ["app", "main"]
