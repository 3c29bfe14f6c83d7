"""Env snapshots for checkpoints as plain data: the values of the env's attributes, read back into an env made from the
run's own config, so that a resumed run continues its episode exactly and nothing in a run directory is ever run or
built from it. An env holding other objects gets no snapshot (its resumed run starts a new episode); a snapshot that
does not fit the env is refused in one line."""

from __future__ import annotations

import collections
import types
from typing import Any

import numpy as np
from gymnasium.envs.registration import EnvSpec

from per_cli.errors import ConfigError

_PRIMITIVE = (bool, int, float, str, type(None), np.ndarray, np.generic)
# configuration the env was made with (the fresh env has its own): never part of a snapshot
_CONFIG = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, type, types.ModuleType, np.dtype, EnvSpec)
_BIT_GENERATORS = {name: getattr(np.random, name) for name in ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64")}


class NoSnapshot(Exception):
    """The env holds something a snapshot cannot keep as data."""


class _Emulator(Exception):
    """A value holding the ALE's own objects (its interface, its action set): the emulator's, restored from
    ``clone_state``'s bytes, or configuration the fresh env made the same."""


def _capture(value: Any) -> Any:
    """``value`` as plain data (see the module docstring); NoSnapshot where it cannot be."""
    if isinstance(value, _PRIMITIVE):
        if isinstance(value, np.ndarray) and (value.dtype.hasobject or value.dtype.kind in "USV"):
            raise NoSnapshot(f"an array of {value.dtype}")
        return value
    if isinstance(value, (list, tuple)):
        return type(value)(_capture(v) for v in value)
    if isinstance(value, collections.deque):
        return {"deque": [_capture(v) for v in value], "maxlen": value.maxlen}
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise NoSnapshot("a dict with keys other than strings")
        return {"dict": {k: _capture(v) for k, v in value.items()}}
    if isinstance(value, np.random.Generator):
        return {"generator": value.bit_generator.state}
    if isinstance(value, np.random.RandomState):
        return {"random_state": list(value.get_state())}
    if type(value).__module__ == "ale_py._ale_py":
        raise _Emulator
    raise NoSnapshot(f"a {type(value).__module__}.{type(value).__qualname__} inside a value")


def _object(obj: Any, seen: set[int]) -> dict | None:
    """An object's data attributes, by name (None for one met before on this walk: its first place keeps it)."""
    if id(obj) in seen:
        return None
    seen.add(id(obj))
    attrs: dict[str, Any] = {}
    for name, value in vars(obj).items():
        if isinstance(value, _CONFIG) or callable(value) and not hasattr(value, "__dict__"):
            continue
        if name.startswith("_ezpickle_"):  # (EzPickle's copy of the constructor's arguments: configuration)
            continue
        if hasattr(value, "__dict__") and not isinstance(value, (np.random.Generator, np.random.RandomState)):
            nested = _object(value, seen)
            if nested is not None:
                attrs[name] = nested
            continue
        try:
            attrs[name] = _capture(value)
        except _Emulator:
            continue
    return {"object": f"{type(obj).__module__}.{type(obj).__qualname__}", "attrs": attrs}


def snapshot_env(env) -> dict | None:
    """The env's state as plain data, for :func:`restore_env`; None when it holds anything that cannot be."""
    if env is None:
        return None
    try:
        state = _object(env, set())
    except NoSnapshot:
        return None
    base = env.unwrapped
    if hasattr(base, "ale") and hasattr(base, "clone_state"):  # the emulator with its RNG (sticky actions)
        state["ale_state"] = np.frombuffer(base.clone_state(include_rng=True).__getstate__(), dtype=np.uint8).copy()
    return state


def _unfit(where: str, why: str) -> ConfigError:
    return ConfigError(f"--resume: the checkpoint's env snapshot does not fit this run's env at {where} ({why})")


def _restored(current: Any, saved: Any, where: str) -> Any:
    """The value to set where the fresh env holds ``current`` and the snapshot ``saved``."""
    if isinstance(saved, dict) and set(saved) == {"generator"}:
        generator = current if isinstance(current, np.random.Generator) else None
        if generator is None:
            name = saved["generator"].get("bit_generator")
            if name not in _BIT_GENERATORS:
                raise _unfit(where, f"bit generator {name!r}")
            generator = np.random.Generator(_BIT_GENERATORS[name]())
        generator.bit_generator.state = saved["generator"]
        return generator
    if isinstance(saved, dict) and set(saved) == {"random_state"}:
        state = current if isinstance(current, np.random.RandomState) else np.random.RandomState()
        state.set_state(tuple(saved["random_state"]))
        return state
    return _plain(saved, where)


def _plain(saved: Any, where: str) -> Any:
    """Saved plain data back as Python values (lists, tuples, dicts of numbers, strings and arrays)."""
    if isinstance(saved, _PRIMITIVE):
        return saved
    if isinstance(saved, (list, tuple)):
        return type(saved)(_plain(v, where) for v in saved)
    if isinstance(saved, dict) and set(saved) == {"dict"} and isinstance(saved["dict"], dict):
        return {str(k): _plain(v, where) for k, v in saved["dict"].items()}
    if isinstance(saved, dict) and set(saved) == {"deque", "maxlen"}:
        return collections.deque([_plain(v, where) for v in saved["deque"]], maxlen=saved["maxlen"])
    raise _unfit(where, f"a value of type {type(saved).__name__}")


def _apply(obj: Any, saved: dict, where: str) -> None:
    name = f"{type(obj).__module__}.{type(obj).__qualname__}"
    if not isinstance(saved, dict) or saved.get("object") != name or not isinstance(saved.get("attrs"), dict):
        kept = f"{saved.get('object')!r:.80}" if isinstance(saved, dict) else f"a {type(saved).__name__} value"
        raise _unfit(where, f"it holds {kept} where this env has {name}")
    for attr, value in saved["attrs"].items():
        if not isinstance(attr, str):
            raise _unfit(where, "an attribute name that is no string")
        current = getattr(obj, attr, None)
        if isinstance(value, dict) and "object" in value:
            if current is None or not hasattr(current, "__dict__"):
                raise _unfit(f"{where}.{attr}", "no object there")
            _apply(current, value, f"{where}.{attr}")
        else:
            setattr(obj, attr, _restored(current, value, f"{where}.{attr}"))


def restore_env(env, snapshot: dict):
    """Set a :func:`snapshot_env` snapshot's values on ``env`` (made from the same config) and return it.
    ConfigError when the snapshot does not fit ``env``; nothing in it is run."""
    _apply(env, snapshot, "env")
    if "ale_state" in snapshot:
        import ale_py

        base = env.unwrapped
        base.restore_state(ale_py.ALEState(np.asarray(snapshot["ale_state"], dtype=np.uint8).tobytes()))
    return env
