"""Building a :class:`~per_cli.config.schema.Config` from YAML plus ``--set a.b=c`` overrides.

Validation is driven by the dataclass fields themselves (their type hints and ``metadata`` bounds), so every
error names the dotted key, what was given, and what is allowed.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from pathlib import Path
from typing import Any, Literal

import yaml

from per_cli.config.schema import Config
from per_cli.errors import ConfigError

# ----------------------------------------------------------------------------------------------------------
# building from plain data


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
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, key)
            except ConfigError:
                pass
        raise ConfigError(f"{key}: expected {_type_name(tp)}, got {value!r}")
    if origin is Literal:
        allowed = typing.get_args(tp)
        if isinstance(value, bool) and ("off" if value is False else "on") in allowed:
            # YAML 1.1 reads a bare off/on (also no/yes) as a bool: `is_weights: off` means the choice "off"
            return "off" if value is False else "on"
        if value not in allowed:
            raise ConfigError(f"{key}: {value!r} is not allowed; choose one of {', '.join(map(str, allowed))}")
        return value
    if origin is list:
        (item_tp,) = typing.get_args(tp)
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{key}: expected a list of {_type_name(item_tp)}, got {value!r}")
        return [_coerce(v, item_tp, f"{key}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a mapping, got {value!r}")
        return dict(value)
    if tp is Any:
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: expected true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)  # 1e6 in YAML is a float
            raise ConfigError(f"{key}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{key}: expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key}: expected a string, got {value!r}")
        return value
    raise TypeError(f"unsupported config type {tp!r} for {key}")  # a bug in this module, not user input


def _check_bounds(value: Any, meta: typing.Mapping, key: str) -> None:
    if value is None or not meta:
        return
    lo, hi, lo_open = meta.get("lo"), meta.get("hi"), meta.get("lo_open", False)
    if lo is not None and (value <= lo if lo_open else value < lo):
        relation = ">" if lo_open else ">="
        allowed = f"{relation} {lo}" if hi is None else f"in {'(' if lo_open else '['}{lo}, {hi}]"
        raise ConfigError(f"{key}: {value!r} is out of range; must be {allowed}")
    if hi is not None and value > hi:
        allowed = f"<= {hi}" if lo is None else f"in {'(' if lo_open else '['}{lo}, {hi}]"
        raise ConfigError(f"{key}: {value!r} is out of range; must be {allowed}")


def _unknown_key(key: str, name: str, valid: list[str]) -> ConfigError:
    close = difflib.get_close_matches(name, valid, n=1, cutoff=0.5)
    hint = f"did you mean '{key.rpartition('.')[0] + '.' if '.' in key else ''}{close[0]}'?" if close else ""
    return ConfigError(f"unknown key '{key}'; {hint or 'valid keys here: ' + ', '.join(valid)}")


def _build(cls: type, data: Any, prefix: str) -> Any:
    if not isinstance(data, dict):
        raise ConfigError(f"{prefix.rstrip('.') or 'config'}: expected a mapping of keys, got {data!r}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs = {}
    for name, value in data.items():
        key = f"{prefix}{name}"
        if name not in fields:
            raise _unknown_key(key, str(name), list(fields))
        tp = hints[name]
        if dataclasses.is_dataclass(tp):
            kwargs[name] = _build(tp, value if value is not None else {}, key + ".")
            continue
        value = _coerce(value, tp, key)
        _check_bounds(value, fields[name].metadata, key)
        kwargs[name] = value
    return cls(**kwargs)


def _check_relations(cfg: Config) -> None:
    """Constraints across keys that the schema alone can judge. Names that live in registries (env ids, replay
    kinds) and checks that need the env are made by ``per_cli.train.preflight`` (this layer imports neither
    envs nor replay)."""
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
    if any(h < 1 for h in cfg.agent.hidden_sizes):
        raise ConfigError(f"agent.hidden_sizes: {cfg.agent.hidden_sizes} must hold positive layer widths")


# ----------------------------------------------------------------------------------------------------------
# public API


def parse_override(text: str) -> tuple[str, Any]:
    """``'agent.lr=3e-4'`` -> ``('agent.lr', 0.0003)``; the value is read as a YAML scalar."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set {text!r}: expected KEY=VALUE, e.g. --set agent.lr=3e-4")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        raise ConfigError(f"--set {text!r}: the value is not valid YAML ({exc.__class__.__name__})") from None
    if isinstance(value, str):
        value = _yaml_number(value)
    return key.strip(), value


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
        last = depth == len(parts) - 1
        if last:
            node[part] = value
            return
        tp = typing.get_type_hints(cls)[part] if cls is not None else None
        if cls is not None and not dataclasses.is_dataclass(tp) and typing.get_origin(tp) is not dict:
            raise ConfigError(f"--set {key}: '{dotted}' is a value, not a section")
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            raise ConfigError(f"{dotted}: expected a mapping of keys, got {child!r}")
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


def _find_duplicate_key(node: yaml.Node, prefix: str = "") -> tuple[str, int] | None:
    """The first key given twice in one mapping (as a dotted key, with its line), or None. YAML itself keeps
    the last value silently, which would hide a typo'd second section."""
    if isinstance(node, yaml.MappingNode):
        seen: set = set()
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            dotted = f"{prefix}{key}"
            if key is not None and key != "<<":
                if key in seen:
                    return dotted, key_node.start_mark.line + 1
                seen.add(key)
            found = _find_duplicate_key(value_node, dotted + ".")
            if found:
                return found
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            found = _find_duplicate_key(item, f"{prefix.rstrip('.')}[{i}].")
            if found:
                return found
    return None


def _parse_yaml(path: Path, text: str) -> Any:
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        duplicate = _find_duplicate_key(node)
        if duplicate:
            key, line = duplicate
            raise ConfigError(f"{path}: duplicate key '{key}' at line {line}; give each key once")
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        raise ConfigError(f"{path}: malformed YAML{where}: {problem}") from None
    finally:
        loader.dispose()


def read_yaml(path: str | Path) -> dict:
    """The YAML mapping in ``path``: rejects a directory, a missing, empty or malformed file, a top level that
    is not a mapping, and a key given twice."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"config {path}: is a directory; give a YAML file (per configs lists the shipped ones)")
    if not path.is_file():
        raise ConfigError(f"config file not found: {path} (give an existing YAML file or a name from per configs)")
    data = _parse_yaml(path, path.read_text(encoding="utf-8"))
    if data is None or data == {}:
        raise ConfigError(
            f"{path}: the config is empty (nothing but comments or blank lines); give at least one section, "
            "or leave out --config to run the defaults"
        )
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections (env, agent, replay, ...)")
    return _walk_yaml_numbers(data)


def from_dict(data: dict) -> Config:
    cfg = _build(Config, data, "")
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
    return dataclasses.asdict(cfg)


def dump_config(cfg: Config) -> str:
    return yaml.safe_dump(to_dict(cfg), sort_keys=False)
