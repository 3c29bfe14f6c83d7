"""A replay kind's description, :class:`KindSpec`: everything the project knows of a kind, in the kind's own file
(the registry of them is :mod:`per_cli.replay.kinds`). Imports no sampler, so every sampler's file can state its
kind's spec."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from per_cli.config import ReplayConfig, build_section
from per_cli.config.loading import MAX_STR
from per_cli.errors import ConfigError

if TYPE_CHECKING:
    from per_cli.replay.sampler import Sampler, Storage

# factory(replay_cfg, storage, rng, params): the kind's sampler; params is its params dataclass's instance, or None
SamplerFactory = Callable[[ReplayConfig, "Storage", np.random.Generator, Any], "Sampler"]


class PriorityDefaults(NamedTuple):
    """A kind's (α, β0) where the config leaves ``replay.alpha`` / ``replay.beta0`` out."""

    alpha: float
    beta0: float


# the defaults of a kind that states none (its IS weights are ones, or it ignores them): the prioritized kind's
NO_PRIORITY_DEFAULTS = PriorityDefaults(0.6, 0.4)


@dataclass(frozen=True)
class KindSpec:
    """A replay kind. ``factory`` None: ``sampler(storage, rng, window=cfg.window)`` (plus ``params=`` where the kind
    has parameters). ``loss``: the TD loss the kind trains with, None for ``agent.loss``. ``colour``: its figure
    colour, None for one picked by name. ``priority_defaults``: (α, β0) where the config leaves them out. ``scores``:
    the loop scores each drawn batch with the networks before the update and hands the scores to ``scored``."""

    name: str
    sampler: type[Sampler]
    factory: SamplerFactory | None = None
    params: type | None = None
    loss: str | None = None
    takes_chunks: bool = False
    colour: str | None = None
    priority_defaults: PriorityDefaults | None = None  # (a plain (α, β0) pair is taken as one)
    scores: bool = False

    def __post_init__(self) -> None:
        if self.priority_defaults is not None:
            object.__setattr__(self, "priority_defaults", PriorityDefaults(*self.priority_defaults))

    def parse_params(self, given: dict) -> Any:
        """``replay.params`` as the kind's params dataclass (its defaults for keys left out), or None for a kind
        without one. ConfigError, one line naming ``replay.params.<key>``, for an unknown key, a wrong type or a
        value out of its bounds."""
        known = [f.name for f in dataclasses.fields(self.params)] if self.params is not None else []
        for key in given:
            if key not in known:
                keys = f"its keys: {', '.join(known)}" if known else "it has no parameters of its own"
                name = str(key) if len(str(key)) <= MAX_STR else f"{str(key)[:50]}...({len(str(key)):,} characters)"
                close = difflib.get_close_matches(name, known, n=1)
                hint = f"did you mean replay.params.{close[0]}? " if close else ""
                raise ConfigError(f"replay.params.{name}: not a parameter of replay.kind {self.name}; {hint}{keys}")
        if self.params is None:
            return None
        return build_section(self.params, dict(given), "replay.params.")

    def resolve(self, replay: ReplayConfig) -> ReplayConfig:
        """``replay`` with its kind's defaults filled in: α and β0 where null, every key of ``replay.params``."""
        return self._resolved(replay)[0]

    def _resolved(self, replay: ReplayConfig) -> tuple[ReplayConfig, Any]:
        """:meth:`resolve`'s config and the parsed ``replay.params`` it holds (None for a kind without any)."""
        defaults = self.priority_defaults or NO_PRIORITY_DEFAULTS
        params = self.parse_params(replay.params)
        resolved = dataclasses.replace(
            replay,
            alpha=defaults.alpha if replay.alpha is None else replay.alpha,
            beta0=defaults.beta0 if replay.beta0 is None else replay.beta0,
            params=dataclasses.asdict(params) if params is not None else {},
        )
        return resolved, params

    def build(self, replay: ReplayConfig, storage: Storage, rng: np.random.Generator) -> Sampler:
        """The kind's sampler for ``replay`` (resolved here: a config straight from the loader works too)."""
        replay, params = self._resolved(replay)
        if self.factory is not None:
            return self.factory(replay, storage, rng, params)
        extra = {"params": params} if params is not None else {}
        return self.sampler(storage, rng, window=replay.window, **extra)
