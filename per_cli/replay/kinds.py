"""The one registry of replay kinds: a :class:`KindSpec` per ``replay.kind``, everything the project knows of it.

Each built-in kind's spec lives in its sampler's file; a user's kind calls :func:`register_kind`
(docs/extending.md). Every layer that needs kind knowledge asks :data:`KINDS`; the config layer below cannot, so
kind-dependent defaults (α, β0, ``replay.params``) are filled in by :func:`resolve_config` where a run is built."""

from __future__ import annotations

import dataclasses
import difflib

from per_cli.config import Config
from per_cli.errors import ConfigError
from per_cli.plugins import load_plugins
from per_cli.replay.kind_spec import KindSpec
from per_cli.replay.sampler import Sampler

KINDS: dict[str, KindSpec] = {}


def register_kind(spec: KindSpec) -> None:
    """Make ``spec.name`` a ``replay.kind``. A known name with the same sampler class again is a no-op (a plugin
    imported twice); with another class, a name that is not an identifier, a class that is not a ``Sampler`` with
    its own ``draw_members``, or ``params`` that is not a dataclass is an error."""
    kind, cls = spec.name, spec.sampler
    if not kind.isidentifier():
        raise ValueError(f"a replay kind is a name of letters, digits and underscores, got {kind!r}")
    if not (isinstance(cls, type) and issubclass(cls, Sampler)):
        raise TypeError(f"replay kind {kind!r}: {cls!r} is not a Sampler subclass")
    if cls.draw_members is Sampler.draw_members:
        raise TypeError(f"replay kind {kind!r}: {cls.__name__} defines no draw_members")
    if spec.params is not None and not dataclasses.is_dataclass(spec.params):
        raise TypeError(f"replay kind {kind!r}: params {spec.params!r} is not a dataclass")
    known = KINDS.get(kind)
    if known is not None:
        if (known.sampler.__module__, known.sampler.__qualname__) == (cls.__module__, cls.__qualname__):
            return  # (the same class, imported again)
        raise ValueError(f"replay kind {kind!r} is already registered (by {_qualified(known.sampler)})")
    KINDS[kind] = spec


def kind_spec(kind: str) -> KindSpec:
    """The spec of ``kind``; ConfigError naming ``replay.kind`` and the registered kinds where it is not one."""
    spec = KINDS.get(kind)
    if spec is None:
        kinds = list(KINDS)
        close = difflib.get_close_matches(kind, kinds, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        raise ConfigError(f"replay.kind: unknown replay kind {kind!r}; {hint}choose one of {', '.join(kinds)}")
    return spec


def resolve_config(cfg: Config) -> Config:
    """``cfg`` with its replay kind's defaults filled in (:meth:`KindSpec.resolve`), after importing its
    ``plugins``: what a run is built from and what its config.yaml shows. Idempotent."""
    load_plugins(cfg.plugins)
    return dataclasses.replace(cfg, replay=kind_spec(cfg.replay.kind).resolve(cfg.replay))


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"
