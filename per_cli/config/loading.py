"""Building a :class:`~per_cli.config.schema.Config` from YAML plus ``--set a.b=c`` overrides."""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import math
import types
import typing
from pathlib import Path
from typing import Any, Literal, NamedTuple

import yaml

from per_cli.config.reading import parse_yaml, read_text
from per_cli.config.schema import Config
from per_cli.errors import ConfigError, cut

# libyaml's emitter where PyYAML has it: the same text as the pure-Python SafeDumper, faster
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

# every int field's limit besides its own bounds: 2^53 is exact in float64 and far inside int64
MAX_INT = 2**53
# every string field's length: env ids and replay kinds are short names, and they become part of file names
MAX_STR = 100


def _short(value: Any) -> str:
    """``repr(value)``, cut to one readable length (a 1 MB value must not become a 1 MB error line)."""
    return cut(repr(value), 60, 50)


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return " | ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " or ".join("null" if a is type(None) else _type_name(a) for a in typing.get_args(tp))
    if origin in (list, dict):
        return str(tp).replace("typing.", "")
    return getattr(tp, "__name__", str(tp))


def _coerce(value: Any, tp: Any, key: str) -> Any:
    """Check ``value`` against the annotation ``tp``; return it (ints widen to floats)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        options = [arg for arg in args if arg is not type(None)]
        if len(options) == 1:  # `float | None`: the float's own message (a NaN is "not finite", not "not a float")
            return _coerce(value, options[0], key)
        for arg in options:
            with contextlib.suppress(ConfigError):
                return _coerce(value, arg, key)
        raise ConfigError(f"{key}: expected {_type_name(tp)}, got {_short(value)}")
    if origin is Literal:
        allowed = typing.get_args(tp)
        if isinstance(value, bool) and ("off" if value is False else "on") in allowed:
            # YAML 1.1 reads a bare off/on (also no/yes) as a bool: `is_weights: off` means the choice "off"
            return "off" if value is False else "on"
        if value not in allowed:
            raise ConfigError(f"{key}: {_short(value)} is not allowed; choose one of {', '.join(map(str, allowed))}")
        return value
    if origin is list:
        (item_tp,) = typing.get_args(tp)
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{key}: expected a list of {_type_name(item_tp)}, got {_short(value)}")
        return [_coerce(v, item_tp, f"{key}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a mapping, got {_short(value)}")
        _check_finite(value, key)
        return dict(value)
    if tp is Any:
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: expected true or false, got {_short(value)}")
        return value
    if tp is int:
        if isinstance(value, float) and value.is_integer():
            value = int(value)  # 1e6 in YAML is a float
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key}: expected an integer, got {_short(value)}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{key}: expected a number, got {_short(value)}")
        if not math.isfinite(value):  # NaN passes every comparison of a range check; no key means infinity
            raise ConfigError(f"{key}: {_short(value)} is not a finite number; give a number such as the default")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key}: expected a string, got {_short(value)}")
        if len(value) > MAX_STR:  # names end up in run directory names (a file name is at most 255 bytes)
            raise ConfigError(
                f"{key}: {_short(value)} is {len(value):,} characters long; a name here is at most {MAX_STR}"
            )
        return value
    raise TypeError(f"unsupported config type {tp!r} for {key}")  # a bug in this module, not user input


def _check_finite(value: Any, key: str) -> None:
    """No NaN or infinity anywhere in a free-form mapping (``env.kwargs``): passed on to an env, a NaN is truthy as
    a flag and fails every comparison as a number, silently. Types are preflight's to check."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for name, item in items:
        where = f"{key}[{name}]" if isinstance(value, list) else f"{key}.{name}"
        if isinstance(item, float) and not math.isfinite(item):
            raise ConfigError(f"{where}: {_short(item)} is not a finite number; give a number, true/false or a name")
        _check_finite(item, where)


def _check_bounds(value: Any, meta: typing.Mapping, key: str) -> None:
    if value is None or not meta:
        return
    lo, hi, lo_open = meta.get("lo"), meta.get("hi"), meta.get("lo_open", False)
    below = lo is not None and (value <= lo if lo_open else value < lo)
    if below or (hi is not None and value > hi):
        allowed = f"in {'(' if lo_open else '['}{lo}, {hi}]"
        if hi is None or lo is None:
            allowed = f"{'>' if lo_open else '>='} {lo}" if below else f"<= {hi}"
        raise ConfigError(f"{key}: {_short(value)} is out of range; must be {allowed}")


def _check_magnitude(value: Any, key: str) -> None:
    """Every integer (also in lists) within ±:data:`MAX_INT`, whatever its field's own bounds: past int64
    numpy and torch overflow with a traceback."""
    if isinstance(value, list):
        for i, item in enumerate(value):
            _check_magnitude(item, f"{key}[{i}]")
    elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT:
        raise ConfigError(f"{key}: {_short(value)} is out of range; an integer here is at most 2^53")


def _unknown_key(key: str, name: str, valid: list[str]) -> ConfigError:
    if len(key) > MAX_STR:  # no fuzzy match over a megabyte of key
        return ConfigError(f"unknown key {_short(key)}; valid keys here: {', '.join(valid)}")
    close = difflib.get_close_matches(name, valid, n=1, cutoff=0.5)
    hint = f"did you mean '{key.rpartition('.')[0] + '.' if '.' in key else ''}{close[0]}'?" if close else ""
    return ConfigError(f"unknown key '{key}'; {hint or 'valid keys here: ' + ', '.join(valid)}")


def build_section(cls: type, data: Any, prefix: str) -> Any:
    """The dataclass ``cls`` from the mapping ``data``, checked for types, ``metadata`` bounds and unknown keys, errors
    naming ``prefix`` + key (also a registered kind's ``replay.params``)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{prefix.rstrip('.') or 'config'}: expected a mapping of keys, got {_short(data)}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs = {}
    for name, value in data.items():
        key = f"{prefix}{name}"
        if name not in fields:
            raise _unknown_key(key, str(name), list(fields))
        tp = hints[name]
        if dataclasses.is_dataclass(tp):
            kwargs[name] = build_section(tp, value if value is not None else {}, key + ".")
            continue
        value = _coerce(value, tp, key)
        _check_bounds(value, fields[name].metadata, key)
        _check_magnitude(value, key)
        kwargs[name] = value
    return cls(**kwargs)


def _count(n: int) -> str:
    """An integer as printed in a message: 12,345, or 1e+300 for one too long to read."""
    return f"{n:,}" if n < 10**15 else f"{float(n):.3g}"


def _check_relations(cfg: Config) -> None:
    """Constraints across keys that the schema alone can judge; registry names and checks that need the env are
    ``per_cli.train.preflight``'s (this layer imports neither envs nor replay)."""
    r, t = cfg.replay, cfg.train
    if r.batch_size > r.capacity:
        raise ConfigError(
            f"replay.batch_size: {r.batch_size} is larger than replay.capacity ({r.capacity}); "
            "lower the batch size or raise the capacity"
        )
    if t.eps_end > t.eps_start:
        raise ConfigError(f"train.eps_end: {t.eps_end} exceeds train.eps_start ({t.eps_start}); ε only anneals down")
    e = cfg.env
    if r.her_strategy != "off" and (e.done_reward is not None or e.truncation_terminates):
        raise ConfigError(
            "env.done_reward / env.truncation_terminates: relabelling (replay.her_strategy) recomputes the rewards "
            "and terminal flags of what it stores; use them with replay.her_strategy: off"
        )
    first_update = (t.learning_starts // t.train_freq + 1) * t.train_freq
    if t.learning_starts < t.total_steps < first_update:  # (learning_starts too late: preflight's message)
        key, given = ("train.replay_ratio", f"{t.replay_ratio:g}") if t.replay_ratio else ("train.train_freq", "")
        raise ConfigError(
            f"{key}: {given or _count(t.train_freq)} means one update every {_count(t.train_freq)} steps, so the "
            f"first would come after train.total_steps ({t.total_steps:,}) and the agent would never learn; "
            "train more often"
        )
    if any(h < 1 for h in cfg.agent.hidden_sizes):
        raise ConfigError(f"agent.hidden_sizes: {cfg.agent.hidden_sizes} must hold positive layer widths")


class Override(NamedTuple):
    """One ``--set KEY=VALUE``: the dotted key and its value."""

    key: str
    value: Any


def parse_override(text: str) -> Override:
    """``'agent.lr=3e-4'`` -> ``Override('agent.lr', 0.0003)``; the value is read as a YAML scalar."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set {text!r}: expected KEY=VALUE, e.g. --set agent.lr=3e-4")
    try:
        value = parse_yaml(f"--set {key.strip()}", raw) if raw.strip() else ""
    except ConfigError as exc:
        raise ConfigError(f"--set {text[:80]!r}: the value is not valid YAML ({str(exc).partition(': ')[2]})") from None
    if isinstance(value, str):
        value = _yaml_number(value)
    return Override(key.strip(), value)


def _yaml_number(text: str) -> Any:
    """YAML 1.1 reads '3e-4' as a string; a config value that looks like a float should be one."""
    try:
        return float(text) if any(c in text for c in "eE.") else text
    except ValueError:
        return text


def apply_override(data: dict, key: str, value: Any) -> None:
    """Set a dotted key in nested plain data, checking each part against the schema."""
    parts = key.split(".")
    cls: Any = Config
    node = data
    for depth, part in enumerate(parts):
        dotted = ".".join(parts[: depth + 1])
        names = [f.name for f in dataclasses.fields(cls)] if cls is not None else None
        if names is not None and part not in names:
            raise _unknown_key(dotted, part, names)
        if depth == len(parts) - 1:
            node[part] = value
            return
        tp = typing.get_type_hints(cls)[part] if cls is not None else None
        if cls is not None and not dataclasses.is_dataclass(tp) and typing.get_origin(tp) is not dict:
            raise ConfigError(f"--set {key}: '{dotted}' is a value, not a section")
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            raise ConfigError(f"{dotted}: expected a mapping of keys, got {_short(child)}")
        node = child
        cls = tp if dataclasses.is_dataclass(tp) else None  # inside a free-form dict (env.kwargs)


def _walk_yaml_numbers(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _walk_yaml_numbers(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_walk_yaml_numbers(v) for v in data]
    if isinstance(data, str):
        return _yaml_number(data)
    return data


def read_yaml(path: str | Path) -> dict:
    """The YAML mapping in ``path``: rejects a directory, a missing, empty or malformed file, a top level that
    is not a mapping, and a key given twice."""
    path = Path(path)
    data = parse_yaml(path, read_text(path))
    if data is None or data == {}:
        raise ConfigError(
            f"{path}: the config is empty (nothing but comments or blank lines); give at least one section, "
            "or leave out --config to run the defaults"
        )
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections (env, agent, replay, ...)")
    return _walk_yaml_numbers(data)


def from_dict(data: dict) -> Config:
    cfg = build_section(Config, data, "")
    _check_relations(cfg)
    return cfg


def load_config(path: str | Path | None, overrides: typing.Iterable[str] = (), **top_level: Any) -> Config:
    """Read ``path`` (or start from defaults), apply ``--set`` overrides and top-level keyword overrides
    (``seed=3``, ``device='cpu'``; ``None`` values are ignored), validate, and return the config."""
    data = read_yaml(path) if path is not None else {}
    for text in overrides:
        apply_override(data, *parse_override(text))
    for key, value in top_level.items():
        if value is not None:
            apply_override(data, key, value)
    return from_dict(data)


def to_dict(cfg: Config) -> dict:
    """``cfg`` as plain data; ``replay.params`` only where the kind has parameters."""
    data = dataclasses.asdict(cfg)
    if not data["replay"]["params"]:
        del data["replay"]["params"]
    return data


def dump_config(cfg: Config) -> str:
    return yaml.dump(to_dict(cfg), Dumper=_DUMPER, sort_keys=False)
