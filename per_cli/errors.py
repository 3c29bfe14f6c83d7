"""The leaf every layer may import: the project's error types.

``ConfigError`` is bad user input: one line naming the key and the fix; the CLI maps it to exit code 2.
"""

from __future__ import annotations


class ConfigError(ValueError):
    """Bad user input: one line, naming the key and the fix. The CLI maps it to exit code 2."""
