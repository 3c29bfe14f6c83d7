"""MinAtar (Young & Tian 2019): five Atari-like games on a 10×10 grid of C binary channels, small enough for a CPU."""

from __future__ import annotations

import difflib

import gymnasium as gym

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
