"""Users' own code, imported by name before a run: the config's ``plugins`` list."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path

from per_cli.errors import ConfigError


def load_plugins(names: Sequence[str]) -> None:
    """Import each plugin of ``names`` (ConfigError naming the one that fails). A plugin already imported in this
    process is not run again: Python's own module cache (``sys.modules``) is the record, not one of ours."""
    for name in names:
        try:
            if not name.endswith(".py"):
                importlib.import_module(name)
                continue
            path = Path(name).expanduser().resolve()
            if not path.is_file():
                raise ConfigError(f"plugins: {name}: no such file; give a .py file or an importable module name")
            # a stable module name per file, so numba's cache and pickles find the same module again
            module_name = f"per_plugin_{path.stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"
            if module_name in sys.modules:
                continue
            spec = importlib.util.spec_from_file_location(module_name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[module_name]
                raise
        except ConfigError:
            raise
        except Exception as exc:  # noqa: BLE001 - the user's code: one line naming it
            raise ConfigError(f"plugins: {name} failed to import: {type(exc).__name__}: {exc}") from None
