"""The leaf every layer may import: the project's error types."""

from __future__ import annotations

import errno
import shlex


class ConfigError(ValueError):
    """Bad user input: one line, naming the key and the fix. The CLI maps it to exit code 2."""


def cut(text: str, limit: int = 100, keep: int = 60) -> str:
    """``text`` for an error line: whole up to ``limit`` characters, else its first ``keep`` and its length."""
    return text if len(text) <= limit else f"{text[:keep]}...({len(text):,} characters)"


def os_error_line(exc: OSError) -> str:
    """One line for an OSError that ended a command or a grid's run: why, and the file (cut to a readable
    length); a full disk said as such (the fix is space, not the input)."""
    name = cut(shlex.quote(str(exc.filename))) if exc.filename else ""
    if exc.errno == errno.ENOSPC:
        where = f" while writing {name}" if name else " on the device"
        return f"the disk is full: no space left{where}; free space, then run the command again"
    return f"{exc.strerror or type(exc).__name__}{f': {name}' if name else ''}"
