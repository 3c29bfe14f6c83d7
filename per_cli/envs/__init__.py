"""Environment factory: aliases, registered Gymnasium ids, the Atari pipeline and the MinAtar games."""

from __future__ import annotations

import difflib

import gymnasium as gym

from per_cli.config import ConfigError, EnvConfig
from per_cli.envs import minatar

ALIASES: dict[str, str] = {
    "cartpole": "CartPole-v1",
    "acrobot": "Acrobot-v1",
    "mountaincar": "MountainCar-v0",
    "pong": "ALE/Pong-v5",
    "bitflip": "BitFlip-v0",
    "cliffwalk": "BlindCliffwalk-v0",
    **minatar.ALIASES,  # breakout-minatar, ... -> MinAtar/<Game>-v1
}

# the project's own research envs (entry points are imported only when an env is made)
PROJECT_ENVS: dict[str, str] = {
    "BitFlip-v0": "per_cli.envs.bitflip:BitFlipEnv",  # kwargs: n_bits (env.n_bits)
    "BlindCliffwalk-v0": "per_cli.envs.cliffwalk:BlindCliffwalkEnv",  # kwargs: n_states
}
for _env_id, _entry_point in PROJECT_ENVS.items():
    if _env_id not in gym.registry:
        gym.register(_env_id, entry_point=_entry_point)


def resolve_env_id(name: str) -> str:
    return ALIASES.get(name.lower(), name)


def is_atari_id(env_id: str) -> bool:
    return env_id.startswith("ALE/") or env_id.endswith("NoFrameskip-v4") or env_id.endswith("NoFrameskip-v0")


def frame_stack_of(env_cfg) -> int | None:
    """The frames an observation of this env stacks (``env.atari.frame_stack`` for an ALE game), None for envs
    whose observations are not frame stacks: the value the replay memory's storage is chosen by."""
    return env_cfg.atari.frame_stack if is_atari_id(resolve_env_id(env_cfg.id)) else None


def _register_optional_envs(env_id: str) -> None:
    """Make ids of optional packages (ale-py's Atari games, minatar's games) visible in Gymnasium's registry."""
    if minatar.looks_like_minatar(env_id):
        minatar.register()
    if is_atari_id(env_id) and env_id not in gym.registry:
        import ale_py  # (a dependency: gymnasium[atari])

        gym.register_envs(ale_py)


def check_env_id(name: str) -> None:
    env_id = resolve_env_id(name)
    _register_optional_envs(env_id)
    if env_id in gym.registry:
        return
    if minatar.looks_like_minatar(name):
        raise minatar.unknown_game(name)
    candidates = list(ALIASES) + list(gym.registry)
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    hint = f"did you mean '{close[0]}'? " if close else ""
    raise ConfigError(
        f"env.id: unknown env {name!r}; {hint}use an alias ({', '.join(ALIASES)}) or a registered Gymnasium id"
    )


def checked_env_id(name: str, option: str) -> str:
    """A command-line env name (alias or id) as its resolved id; an unknown one is :func:`check_env_id`'s ConfigError
    with ``option`` (e.g. ``--env acrobt``) in place of its ``env.id`` key."""
    try:
        check_env_id(name)
    except ConfigError as exc:
        raise ConfigError(str(exc).replace("env.id: ", f"{option}: ", 1)) from None
    return resolve_env_id(name)


def env_label(name: str) -> str:
    """A short, file-name-safe label: the alias where one is used, else the id with '/' replaced."""
    return name.lower() if name.lower() in ALIASES else name.replace("/", "-")


def check_backend(cfg: EnvConfig) -> None:
    """``env.backend: envpool`` only for the classic-control envs EnvPool implements, without kwargs, and with
    EnvPool installed; ConfigError naming the key and the fix otherwise."""
    if cfg.backend != "envpool":
        return
    from per_cli.envs.pool import SUPPORTED, import_envpool

    env_id = resolve_env_id(cfg.id)
    if env_id not in SUPPORTED:
        raise ConfigError(
            f"env.backend envpool: {env_id} is not one of {', '.join(SUPPORTED)}; use env.backend: gymnasium"
        )
    if cfg.kwargs:
        raise ConfigError(f"env.backend envpool: env.kwargs {sorted(cfg.kwargs)} are Gymnasium's; leave them out")
    import_envpool()


def accepts_n_bits(name: str) -> bool:
    """Whether ``env.n_bits`` applies to this env (bit flipping only)."""
    return resolve_env_id(name) == "BitFlip-v0"


def make_env(cfg: EnvConfig, seed: int, *, evaluation: bool = False) -> gym.Env:
    """Build the env described by ``cfg`` (already validated: see ``check_env_id``); evaluation envs skip training-only
    shaping (Atari reward clipping and life-loss terminals). The env is reset once with ``seed`` so its RNG is seeded;
    under ``env.backend: envpool`` the training env is one seed's EnvPool env."""
    env_id = resolve_env_id(cfg.id)
    if cfg.backend == "envpool" and not evaluation:
        from per_cli.envs.pool import make_pooled

        (env,) = make_pooled(env_id, [seed], cfg.max_episode_steps)
        return env
    _register_optional_envs(env_id)
    if is_atari_id(env_id):
        from per_cli.envs.atari import make_atari_env

        env = make_atari_env(env_id, cfg, evaluation=evaluation)
    else:
        kwargs: dict = {}
        if minatar.is_minatar_id(env_id):  # env.minatar's options (env.kwargs given by hand override them)
            m = cfg.minatar
            kwargs = {"sticky_action_prob": m.sticky_actions, "difficulty_ramping": m.difficulty_ramping}
        kwargs.update(cfg.kwargs)
        if cfg.max_episode_steps is not None:
            kwargs["max_episode_steps"] = cfg.max_episode_steps
        if cfg.n_bits is not None:
            kwargs["n_bits"] = cfg.n_bits
        try:
            env = gym.make(env_id, **kwargs)
        except TypeError as exc:
            raise ConfigError(f"env.kwargs: {env_id} rejected {sorted(kwargs)} ({exc})") from None
    env.reset(seed=seed)
    env.action_space.seed(seed)
    return env
