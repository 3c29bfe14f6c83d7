"""Users' own code, imported by name before a run: the config's ``plugins`` list."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path

from per_cli.errors import ConfigError

_loaded: dict[str, object] = {}


def load_plugins(names: Sequence[str]) -> None:
    """Import each plugin of ``names`` not imported yet in this process (ConfigError naming the one that fails)."""
    for name in names:
        if name not in _loaded:
            _loaded[name] = _import(name)


def _import(name: str) -> object:
    try:
        if not name.endswith(".py"):
            return importlib.import_module(name)
        path = Path(name).expanduser().resolve()
        if not path.is_file():
            raise ConfigError(f"plugins: {name}: no such file; give a .py file or an importable module name")
        # a stable module name per file, so numba's cache and pickles find the same module again
        module_name = f"per_plugin_{path.stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"
        if module_name in sys.modules:
            return sys.modules[module_name]
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[module_name]
            raise
        return module
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's code: one line naming it
        raise ConfigError(f"plugins: {name} failed to import: {type(exc).__name__}: {exc}") from None
