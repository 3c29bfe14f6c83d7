"""Typed, validated run configuration.

A config is a tree of frozen dataclasses built from YAML plus ``--set a.b=c`` overrides. Validation is
driven by the dataclass fields themselves (their type hints and ``metadata`` bounds), so every error
names the dotted key, what was given, and what is allowed.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml


class ConfigError(ValueError):
    """Bad user input: one line, naming the key and the fix. The CLI maps it to exit code 2."""


def _bounds(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False) -> dict:
    return {"lo": lo, "hi": hi, "lo_open": lo_open}


@dataclass(frozen=True)
class AtariConfig:
    """Options of the Atari pipeline (ignored for other envs)."""

    frame_stack: int = field(default=4, metadata=_bounds(1, 16))
    frame_skip: int = field(default=4, metadata=_bounds(1, 16))
    screen_size: int = field(default=84, metadata=_bounds(8, 512))
    noop_max: int = field(default=30, metadata=_bounds(0))
    sticky_actions: float = field(default=0.0, metadata=_bounds(0.0, 1.0))
    fire_reset: bool = True
    terminal_on_life_loss: bool = True
    clip_rewards: bool = True
    full_action_space: bool = False


@dataclass(frozen=True)
class EnvConfig:
    id: str = "cartpole"
    kwargs: dict[str, Any] = field(default_factory=dict)
    max_episode_steps: int | None = field(default=None, metadata=_bounds(1))
    atari: AtariConfig = field(default_factory=AtariConfig)
    # bit flipping (env.id: bitflip) only: the number of bits n (episode length n); null: the env's default 10
    n_bits: int | None = field(default=None, metadata=_bounds(1))


@dataclass(frozen=True)
class AgentConfig:
    network: Literal["auto", "mlp", "cnn"] = "auto"
    hidden_sizes: list[int] = field(default_factory=lambda: [256, 256])
    lr: float = field(default=1e-3, metadata=_bounds(0.0, lo_open=True))
    adam_eps: float = field(default=1e-8, metadata=_bounds(0.0, lo_open=True))
    gamma: float = field(default=0.99, metadata=_bounds(0.0, 1.0))
    loss: Literal["huber", "mse"] = "huber"
    double_dqn: bool = False
    target_update_period: int = field(default=500, metadata=_bounds(1))
    tau: float = field(default=1.0, metadata=_bounds(0.0, 1.0, lo_open=True))
    max_grad_norm: float | None = field(default=10.0, metadata=_bounds(0.0, lo_open=True))
    # auto: the numba engine (one compiled call per update) for an MLP on the CPU, torch autograd otherwise
    engine: Literal["auto", "torch", "numba"] = "auto"


# (alpha, beta0) of each prioritized kind when the config leaves them out: the paper's Atari values
# (Schaul et al. 2016, Table 3); other kinds ignore them (their IS weights are ones)
PRIORITY_DEFAULTS: dict[str, tuple[float, float]] = {"prioritized": (0.6, 0.4), "rank": (0.7, 0.5)}


@dataclass(frozen=True)
class ReplayConfig:
    kind: str = "uniform"
    capacity: int = field(default=100_000, metadata=_bounds(1))
    batch_size: int = field(default=64, metadata=_bounds(1))
    # null: the kind's default from PRIORITY_DEFAULTS (resolved at construction, so dumps show the value)
    alpha: float | None = field(default=None, metadata=_bounds(0.0))
    beta0: float | None = field(default=None, metadata=_bounds(0.0, 1.0))
    beta_end_step: int | None = field(default=None, metadata=_bounds(1))
    priority_eps: float = field(default=1e-6, metadata=_bounds(0.0))
    initial_priority: Literal["max", "td_error"] = "max"
    # rank: exact re-sort of the heap every this many priority updates (calls); null: once per `capacity`
    # updated priorities (about one pass over the memory)
    rank_resort_period: int | None = field(default=None, metadata=_bounds(1))
    # kind hindsight (goal relabelling, per_cli/replay/writers/hindsight.py): which goals, relabelled copies stored per
    # transition, and the sampler of the stored transitions (any other kind: uniform, prioritized, rank, ...)
    her_strategy: Literal["final", "future", "episode", "random"] = "future"
    her_k: int = field(default=4, metadata=_bounds(1))
    her_sampler: str = "uniform"

    def __post_init__(self) -> None:
        sampling = self.her_sampler if self.kind == "hindsight" else self.kind
        alpha, beta0 = PRIORITY_DEFAULTS.get(sampling, PRIORITY_DEFAULTS["prioritized"])
        if self.alpha is None:
            object.__setattr__(self, "alpha", alpha)
        if self.beta0 is None:
            object.__setattr__(self, "beta0", beta0)


@dataclass(frozen=True)
class TrainConfig:
    total_steps: int = field(default=50_000, metadata=_bounds(1))
    learning_starts: int = field(default=1_000, metadata=_bounds(0))
    train_freq: int = field(default=1, metadata=_bounds(1))
    gradient_steps: int = field(default=1, metadata=_bounds(1))
    eps_start: float = field(default=1.0, metadata=_bounds(0.0, 1.0))
    eps_end: float = field(default=0.05, metadata=_bounds(0.0, 1.0))
    eps_fraction: float = field(default=0.1, metadata=_bounds(0.0, 1.0))
    eval_every: int = field(default=10_000, metadata=_bounds(1))
    eval_episodes: int = field(default=10, metadata=_bounds(0))
    eval_eps: float = field(default=0.0, metadata=_bounds(0.0, 1.0))
    checkpoint_every: int = field(default=0, metadata=_bounds(0))
    save_replay: bool = False


@dataclass(frozen=True)
class LogConfig:
    every: int = field(default=100, metadata=_bounds(1))
    tensorboard: bool = True
    print_every: int = field(default=0, metadata=_bounds(0))


@dataclass(frozen=True)
class MetricsConfig:
    correlation_threshold: float = field(default=0.8, metadata=_bounds(0.0, 1.0))
    correlation: bool = True


@dataclass(frozen=True)
class Config:
    env: EnvConfig = field(default_factory=EnvConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    replay: ReplayConfig = field(default_factory=ReplayConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    log: LogConfig = field(default_factory=LogConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    seed: int = field(default=1, metadata=_bounds(0))
    device: Literal["auto", "cpu", "cuda"] = "auto"


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
    """Constraints across keys, and names that live in registries (envs, replay kinds)."""
    from per_cli.envs import check_env_id
    from per_cli.replay import REPLAY_KINDS

    r, t = cfg.replay, cfg.train
    if r.kind not in REPLAY_KINDS:
        close = difflib.get_close_matches(r.kind, list(REPLAY_KINDS), n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        raise ConfigError(f"replay.kind: unknown replay kind {r.kind!r}; {hint}choose one of {', '.join(REPLAY_KINDS)}")
    if r.kind == "hindsight":
        under = [k for k in REPLAY_KINDS if k != "hindsight"]
        if r.her_sampler not in under:
            close = difflib.get_close_matches(r.her_sampler, under, n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            raise ConfigError(
                f"replay.her_sampler: {r.her_sampler!r} cannot sample under hindsight; "
                f"{hint}choose one of {', '.join(under)}"
            )
        if r.initial_priority == "td_error":
            raise ConfigError(
                "replay.initial_priority: td_error does not work with replay.kind hindsight (transitions are stored "
                "when their episode ends); use max"
            )
    if r.batch_size > r.capacity:
        raise ConfigError(
            f"replay.batch_size: {r.batch_size} is larger than replay.capacity ({r.capacity}); "
            "lower the batch size or raise the capacity"
        )
    if t.eps_end > t.eps_start:
        raise ConfigError(f"train.eps_end: {t.eps_end} exceeds train.eps_start ({t.eps_start}); ε only anneals down")
    if any(h < 1 for h in cfg.agent.hidden_sizes):
        raise ConfigError(f"agent.hidden_sizes: {cfg.agent.hidden_sizes} must hold positive layer widths")
    check_env_id(cfg.env.id)
    if cfg.env.n_bits is not None:
        from per_cli.envs import accepts_n_bits

        if not accepts_n_bits(cfg.env.id):
            raise ConfigError(f"env.n_bits: only bit flipping (env.id: bitflip) has bits; {cfg.env.id} does not")


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


def read_yaml(path: str | Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path} (give an existing YAML file, e.g. configs/cartpole_per.yaml)")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        raise ConfigError(f"{path}: malformed YAML{where}: {problem}") from None
    if data is None:
        data = {}
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
