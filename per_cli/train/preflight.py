"""Every check that can be made before a run starts, in one call: :func:`preflight`."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import yaml

from per_cli.config import Config, EnvConfig, from_dict, to_dict
from per_cli.envs import accepts_n_bits, check_backend, check_env_id, frame_stack_of, make_env, resolve_env_id
from per_cli.errors import ConfigError
from per_cli.plugins import load_plugins
from per_cli.replay import KINDS, kind_spec, memory_bytes
from per_cli.replay.storage.budget import ensure_memory_fits
from per_cli.replay.writers.hindsight import goal_layout_of
from per_cli.rl.networks import check_network


def preflight(cfg: Config, members: int = 1) -> None:
    """Raise :class:`ConfigError` (one line naming the key and the fix) for any setting that cannot run;
    ``members``: the seeds of a cohort trained together in one process (their memory counts together)."""
    check_names(cfg)
    check_schedule(cfg)
    probe = probe_env(cfg.env)
    if cfg.replay.her_strategy != "off" and probe.goal_error is not None:
        raise ConfigError(probe.goal_error)
    check_network(cfg.agent, probe.obs_shape)
    check_memory(cfg, probe, members)


def notes(cfg: Config) -> list[str]:
    """Settings that run, but perhaps not as their writer meant: one line each, for the CLI to print before
    the run starts (a surprise said once, not refused: the engines support each of them on purpose)."""
    found = []
    if cfg.replay.batch_size < 2 and cfg.metrics.iid:
        found.append("replay.batch_size is 1: a batch of one has no diversity, so state_diversity stays blank")
    spec = KINDS.get(cfg.replay.kind)
    if spec is not None and spec.loss is not None and cfg.agent.loss != "huber":
        found.append(
            f"replay.kind {cfg.replay.kind} trains with its own loss (Fujimoto et al. 2020, at replay.min_priority "
            f"{cfg.replay.min_priority}); agent.loss {cfg.agent.loss} is not used"
        )
    if not cfg.agent.hidden_sizes:
        found.append("agent.hidden_sizes is []: the Q-network is linear (no hidden layer); give e.g. [64] for one")
    return found


def check_names(cfg: Config) -> None:
    """Names that live in registries: the env id and the replay kind (whether it draws runs, its ``params``)."""
    check_env_id(cfg.env.id)
    check_backend(cfg.env)
    check_env_kwargs(cfg.env)
    if cfg.env.n_bits is not None and not accepts_n_bits(cfg.env.id):
        raise ConfigError(f"env.n_bits: only bit flipping (env.id: bitflip) has bits; {cfg.env.id} does not")
    load_plugins(cfg.plugins)  # (the kinds they register)
    spec = kind_spec(cfg.replay.kind)
    if cfg.replay.chunk > 1 and not spec.takes_chunks:
        chunked = ", ".join(k for k, s in KINDS.items() if s.takes_chunks)
        raise ConfigError(
            f"replay.chunk: kind {spec.name} draws no run starts; use one of {chunked}, or replay.chunk: 1"
        )
    spec.parse_params(cfg.replay.params)  # (its own keys, types and bounds)
    check_scoring(cfg, spec)


def check_scoring(cfg: Config, spec) -> None:
    """A kind that scores its batches with the networks (``KindSpec.scores``) takes its batches and priorities
    from those scores alone: the settings that would feed it otherwise are refused, not ignored."""
    if not spec.scores:
        return
    if cfg.replay.initial_priority == "td_error":
        raise ConfigError(
            f"replay.initial_priority: kind {spec.name} sets priorities from the networks' scores of its batches "
            "(new transitions enter at the largest priority held); use replay.initial_priority: max"
        )
    if cfg.replay.device_frames:
        raise ConfigError(f"replay.device_frames: kind {spec.name} scores its batches on the host; use false")


def check_env_kwargs(env_cfg: EnvConfig) -> None:
    """Each ``env.kwargs`` value against the env's own parameter of that name, where its default tells the type: a flag
    takes true or false (``.nan`` or ``1`` is truthy and changed CartPole's reward silently), a number a number, a name
    a string. Parameters without a typed default, and kwargs that ``gym.make`` itself takes, are left to the env."""
    if not env_cfg.kwargs:
        return
    defaults = _env_defaults(resolve_env_id(env_cfg.id))
    for name, value in env_cfg.kwargs.items():
        default = defaults.get(name)
        if isinstance(default, bool):
            ok, wanted = isinstance(value, bool), "true or false"
        elif isinstance(default, int | float):
            ok, wanted = isinstance(value, int | float) and not isinstance(value, bool), "a number"
        elif isinstance(default, str):
            ok, wanted = isinstance(value, str), "a string"
        else:
            continue
        if not ok:
            raise ConfigError(
                f"env.kwargs.{name}: {value!r:.60} is not {wanted} ({env_cfg.id}'s {name} defaults to {default!r})"
            )


def _env_defaults(env_id: str) -> dict[str, object]:
    """The defaults of the env constructor's parameters (its registered kwargs over them); empty where the
    constructor cannot be looked up (an id registered by a plugin in another way)."""
    import inspect

    from gymnasium.envs.registration import load_env_creator

    try:
        spec = gym.spec(env_id)
        creator = load_env_creator(spec.entry_point) if isinstance(spec.entry_point, str) else spec.entry_point
        params = inspect.signature(creator).parameters
    except Exception:  # noqa: BLE001 - a lookup that fails only leaves the values to the env
        return {}
    found = {n: p.default for n, p in params.items() if p.default is not inspect.Parameter.empty}
    return {**found, **(spec.kwargs or {})}


def check_schedule(cfg: Config) -> None:
    """A run whose learning never starts exits 0 having learnt nothing: reject it (a train_freq too long to
    reach an update is the config layer's check)."""
    t = cfg.train
    if t.learning_starts >= t.total_steps:
        raise ConfigError(
            f"train.learning_starts: {t.learning_starts} is not below train.total_steps ({t.total_steps}), so the "
            "agent would never learn; lower train.learning_starts or raise train.total_steps"
        )


@dataclass(frozen=True)
class EnvProbe:
    """What preflight needs to know of an env: its observations, and why it cannot take goal relabelling
    (None when it can)."""

    obs_shape: tuple[int, ...]
    obs_dtype: np.dtype
    goal_error: str | None
    n_actions: int


def probe_env(env_cfg: EnvConfig) -> EnvProbe:
    """Make the env once per distinct env config (a sweep has many runs of few envs), read it, close it.
    Raises ConfigError for an action space DQN cannot act in."""
    return _probe_env(yaml.safe_dump(to_dict(Config(env=env_cfg))["env"], sort_keys=True))


@functools.lru_cache(maxsize=64)
def _probe_env(env_yaml: str) -> EnvProbe:
    env_cfg = from_dict({"env": yaml.safe_load(env_yaml)}).env
    env = make_env(env_cfg, seed=0)
    try:
        if not isinstance(env.action_space, gym.spaces.Discrete):  # (H5: per grid relied on this check)
            raise ConfigError(
                f"env.id: {env_cfg.id} has a {type(env.action_space).__name__} action space; DQN needs a Discrete one"
            )
        try:
            goal_layout_of(env)
            goal_error = None
        except ConfigError as exc:
            goal_error = str(exc)
        space = env.observation_space
        shape = tuple(int(d) for d in space.shape)
        return EnvProbe(shape, np.dtype(space.dtype), goal_error, int(env.action_space.n))
    finally:
        env.close()


# what a member costs besides its replay memory and its network: the env, generators, buffers, the logger
MEMBER_OVERHEAD_BYTES = 4_000_000
# copies of the parameters a member keeps: online, target, gradient, Adam's two moments
PARAMETER_COPIES = 5


def check_memory(cfg: Config, probe: EnvProbe, members: int = 1) -> None:
    """The Q-network's memory (:func:`network_bytes`: ``agent.hidden_sizes: [1000000, 1000000]`` is 10^12
    parameters, a traceback from the allocator) and the replay memory's (the replay layer's estimate of what it will
    allocate) against the memory this machine can give now, with the same rule and message as the storages' own check
    before they allocate; for a cohort, the members' memories, networks and overhead together (``--seeds``), before
    any is built."""
    shape, n_actions = probe.obs_shape, probe.n_actions
    network = network_bytes(cfg, shape, n_actions)
    ensure_memory_fits(
        network,
        f"a Q-network for {'x'.join(map(str, shape))} observations and {n_actions:,} actions with hidden sizes "
        f"{list(cfg.agent.hidden_sizes)}",
        key="agent.hidden_sizes",
    )
    need = memory_bytes(cfg, shape, probe.obs_dtype, frame_stack_of(cfg.env))
    capacity = cfg.replay.capacity
    ensure_memory_fits(need, f"a replay memory of {capacity:,} transitions", per_unit=max(need // capacity, 1))
    if members > 1:
        each = need + MEMBER_OVERHEAD_BYTES + network
        ensure_memory_fits(
            members * each,
            f"a cohort of {members:,} seeds (each {each / 1e6:,.0f} MB with its replay memory and network)",
            per_unit=each,
            key="--seeds",
        )


# bytes per unit of a layer's width that one batch costs: float32 activations and their gradients, for the
# online network on the batch and on its next states, and for the target network
ACTIVATION_BYTES = 4 * 2 * 3


def network_bytes(cfg: Config, obs_shape: tuple[int, ...], n_actions: int) -> int:
    """What the Q-network costs a member: its parameters' copies (:data:`PARAMETER_COPIES`) and one batch's
    activations through its layers."""
    widths = math.prod(obs_shape) + sum(cfg.agent.hidden_sizes) + n_actions
    activations = cfg.replay.batch_size * widths * ACTIVATION_BYTES
    return PARAMETER_COPIES * 4 * network_parameters(cfg, obs_shape, n_actions) + activations


def network_parameters(cfg: Config, obs_shape: tuple[int, ...], n_actions: int) -> int:
    """The Q-network's parameter count, built on torch's meta device (no memory, no time)."""
    import torch

    from per_cli.rl.networks import make_q_network

    a = cfg.agent
    with torch.device("meta"):
        net = make_q_network(a.network, obs_shape, n_actions, list(a.hidden_sizes), a.activation)
    return sum(p.numel() for p in net.parameters())
