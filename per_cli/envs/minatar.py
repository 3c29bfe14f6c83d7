"""MinAtar (Young & Tian 2019): five Atari-like games on a 10×10 grid of C binary channels, small enough for a CPU.

The games come from the ``minatar`` package (an optional extra: ``pip install 'per-cli[minatar]'``), whose
``minatar.gym.register_envs()`` registers ``MinAtar/<Game>-v0`` (all 6 actions) and ``MinAtar/<Game>-v1``
(each game's minimal action set) with Gymnasium. The aliases here name the ``-v1`` ids.

What the package does, read from its source (minatar 1.0.15) and relied on here:

* observations are ``bool`` arrays of shape (10, 10, C), channels last, C = 4 (Breakout) to 10 (Seaquest);
  the replay memory keeps them bit-packed (:mod:`per_cli.replay.storage.packed`);
* sticky actions: with probability ``sticky_action_prob`` (MinAtar's default 0.1, the paper's setting) the
  previous action is repeated; ``difficulty_ramping`` (default on) speeds games up as they go;
* ``reset(seed=s)`` reseeds the game's own ``RandomState`` (sticky actions and spawns), so a seed fixes an
  episode sequence;
* episodes end only with ``terminated``: no time limit is registered. Freeway ends after 2,500 frames, which
  the game reports as a terminal (as the paper's DQN treats it), not as a truncation.
"""

from __future__ import annotations

import difflib
from typing import Any

import gymnasium as gym

from per_cli.config import EnvConfig
from per_cli.errors import ConfigError

PREFIX = "MinAtar/"
# alias game name -> the Gymnasium id's game name
GAMES: dict[str, str] = {
    "asterix": "Asterix",
    "breakout": "Breakout",
    "freeway": "Freeway",
    "seaquest": "Seaquest",
    "spaceinvaders": "SpaceInvaders",
}
SUFFIX = "-minatar"
ALIASES: dict[str, str] = {f"{game}{SUFFIX}": f"{PREFIX}{name}-v1" for game, name in GAMES.items()}


def is_minatar_id(env_id: str) -> bool:
    return env_id.startswith(PREFIX)


def looks_like_minatar(name: str) -> bool:
    """A name meant for this family: an alias-like ``<game>-minatar`` or a ``MinAtar/...`` id."""
    return "minatar" in name.lower()


def register() -> None:
    """Make MinAtar's ids visible in Gymnasium's registry (idempotent; imports minatar only when needed)."""
    if f"{PREFIX}Breakout-v1" in gym.registry:
        return
    try:
        import minatar.gym
    except ImportError:
        raise ConfigError(
            "env.id: MinAtar games need the minatar package; install it with pip install 'per-cli[minatar]'"
        ) from None
    minatar.gym.register_envs()


def unknown_game(name: str) -> ConfigError:
    """The one-line error for a MinAtar-looking name that is no game, with the closest names."""
    candidates = list(ALIASES) + [i for i in gym.registry if is_minatar_id(i)]
    close = difflib.get_close_matches(name, candidates, n=3, cutoff=0.4)
    hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
    return ConfigError(f"env.id: unknown MinAtar game {name!r}; {hint}the games are {', '.join(ALIASES)}")


def minatar_kwargs(cfg: EnvConfig) -> dict[str, Any]:
    """``gym.make`` keyword arguments from ``env.minatar`` (``env.kwargs`` given by hand override them)."""
    return {
        "sticky_action_prob": cfg.minatar.sticky_actions,
        "difficulty_ramping": cfg.minatar.difficulty_ramping,
    }
