"""The leaf every layer may import: the project's error types.

``ConfigError`` is bad user input: one line naming the key and the fix; the CLI maps it to exit code 2.
"""

from __future__ import annotations

import errno
import shlex


class ConfigError(ValueError):
    """Bad user input: one line, naming the key and the fix. The CLI maps it to exit code 2."""


def os_error_line(exc: OSError) -> str:
    """One line for an OSError that ended a command or a grid's run: why, and the file (cut to a readable
    length); a full disk said as such (the fix is space, not the input)."""
    name = shlex.quote(str(exc.filename)) if exc.filename else ""
    name = name if len(name) <= 100 else f"{name[:60]}...({len(name):,} characters)"
    if exc.errno == errno.ENOSPC:
        where = f" while writing {name}" if name else " on the device"
        return f"the disk is full: no space left{where}; free space, then run the command again"
    return f"{exc.strerror or type(exc).__name__}{f': {name}' if name else ''}"
