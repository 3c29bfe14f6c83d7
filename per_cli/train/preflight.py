"""Every check that can be made before a run starts, in one call: :func:`preflight`.

``per_cli.config`` validates what the schema alone can judge (types, ranges, relations between keys). The
checks here need the registries and the environment: env ids and replay kind names (their registries live in
``per_cli.envs`` and ``per_cli.replay``, which the config layer must not import), whether the network fits the
env's observations, whether the memory fits in RAM, and whether the schedule lets the agent learn at all.
``per train`` calls it before creating the run directory and ``per grid`` for every run of a sweep before any
run starts, so a mistake is one line and exit 2 with nothing written, never a failed run.
"""

from __future__ import annotations

import difflib
import functools

import numpy as np
import yaml

from per_cli.config import Config, EnvConfig, to_dict
from per_cli.envs import accepts_n_bits, check_env_id, make_env
from per_cli.errors import ConfigError
from per_cli.replay import REPLAY_KINDS
from per_cli.rl.networks import check_network

GiB = 1024**3


def preflight(cfg: Config) -> None:
    """Raise :class:`ConfigError` (one line naming the key and the fix) for any setting that cannot run."""
    check_names(cfg)
    check_schedule(cfg)
    obs_shape, obs_dtype = observation_space(cfg.env)
    check_network(cfg.agent, obs_shape)
    check_memory(cfg, obs_shape, obs_dtype)


def check_names(cfg: Config) -> None:
    """Names that live in registries: the env id, the replay kind (and the sampler under hindsight)."""
    check_env_id(cfg.env.id)
    if cfg.env.n_bits is not None and not accepts_n_bits(cfg.env.id):
        raise ConfigError(f"env.n_bits: only bit flipping (env.id: bitflip) has bits; {cfg.env.id} does not")
    kinds = list(REPLAY_KINDS)
    r = cfg.replay
    if r.kind not in kinds:
        raise ConfigError(
            f"replay.kind: unknown replay kind {r.kind!r}; {_hint(r.kind, kinds)}choose one of {', '.join(kinds)}"
        )
    her_sampler = getattr(r, "her_sampler", None)  # until replay.kind hindsight becomes a writer (issue 17)
    if r.kind == "hindsight" and her_sampler is not None:
        under = [k for k in kinds if k != "hindsight"]
        if her_sampler not in under:
            raise ConfigError(
                f"replay.her_sampler: {her_sampler!r} cannot sample under hindsight; "
                f"{_hint(her_sampler, under)}choose one of {', '.join(under)}"
            )


def _hint(name: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(name, choices, n=1)
    return f"did you mean '{close[0]}'? " if close else ""


def check_schedule(cfg: Config) -> None:
    """A run whose learning never starts exits 0 having learnt nothing: reject it."""
    t = cfg.train
    if t.learning_starts >= t.total_steps:
        raise ConfigError(
            f"train.learning_starts: {t.learning_starts} is not below train.total_steps ({t.total_steps}), so the "
            "agent would never learn; lower train.learning_starts or raise train.total_steps"
        )


def observation_space(env_cfg: EnvConfig) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype of the env's observations (made once per distinct env config, then closed)."""
    return _observation_space(yaml.safe_dump(to_dict(Config(env=env_cfg))["env"], sort_keys=True))


@functools.lru_cache(maxsize=64)
def _observation_space(env_yaml: str) -> tuple[tuple[int, ...], np.dtype]:
    from per_cli.config import from_dict

    import gymnasium as gym

    env_cfg = from_dict({"env": yaml.safe_load(env_yaml)}).env
    env = make_env(env_cfg, seed=0)
    try:
        if not isinstance(env.action_space, gym.spaces.Discrete):  # (H5: per grid relied on this check)
            raise ConfigError(
                f"env.id: {env_cfg.id} has a {type(env.action_space).__name__} action space; DQN needs a Discrete one"
            )
        space = env.observation_space
        return tuple(int(d) for d in space.shape), np.dtype(space.dtype)
    finally:
        env.close()


def check_memory(cfg: Config, obs_shape: tuple[int, ...], obs_dtype: np.dtype) -> None:
    """The replay memory's estimated size against the memory this machine has available now."""
    try:
        from per_cli.replay import memory_bytes
    except ImportError:  # the replay layer's estimate (issue 16) has not landed yet: the storages still check
        return
    from per_cli.replay.storage.frames import available_memory_bytes

    need = memory_bytes(cfg, obs_shape, obs_dtype)
    have = available_memory_bytes()
    if have is not None and need > have:
        raise ConfigError(
            f"replay.capacity: {cfg.replay.capacity} transitions need about {need / GiB:.1f} GiB but "
            f"{have / GiB:.1f} GiB is available; lower replay.capacity"
        )
