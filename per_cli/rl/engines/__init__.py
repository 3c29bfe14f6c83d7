"""Update engines: which one runs a config, and why; :func:`make_agent` builds its agent, choosing once.

``torch`` (:class:`~per_cli.rl.agent.TorchAgent`) is the reference: any network, any device. ``numba``
(:class:`~per_cli.rl.engines.numba_agent.NumbaAgent`) runs a ReLU MLP's whole update in one compiled call on the
CPU; it fails closed: :func:`supports` names the first setting the kernel does not implement (:data:`KERNEL_VALUES`).
``auto`` picks numba where it runs (the faster: docs/engines.md); :func:`choose_engine` gives the fallback's reason."""

from __future__ import annotations

import dataclasses

import torch

from per_cli.config import AgentConfig
from per_cli.errors import ConfigError
from per_cli.rl.agent import DQNAgent, TorchAgent
from per_cli.rl.engines.numba_agent import NumbaAgent
from per_cli.rl.losses import KAPPA_LOSSES, TDLoss
from per_cli.rl.networks import check_network, resolve_network

ANY = None  # a setting the kernel takes as a number, whatever its (validated) value

# Every agent setting the numba kernel computes with, and the values it implements (ANY: every valid value).
# The equivalence tests (tests/rl/test_engines.py) are generated from this table.
KERNEL_VALUES: dict[str, tuple | None] = {
    "hidden_sizes": ANY,
    "activation": ("relu",),
    "optimizer": ("adam",),
    "lr": ANY,
    "adam_eps": ANY,
    "gamma": ANY,
    "loss": ("huber", "mse"),
    "double_dqn": (False, True),
    "tau": ANY,
    "max_grad_norm": ANY,
}
# Settings that do not change what an update computes: the loop's (when to sync), the choice itself, or how the
# torch engine launches it on a GPU (cuda_graph).
ENGINE_NEUTRAL = frozenset({"network", "engine", "target_update_period", "target_update_on_episode_end", "cuda_graph"})


def supports(agent_cfg, obs_shape: tuple[int, ...], device: torch.device | str = "cpu") -> str | None:
    """None when the numba engine computes exactly what the torch engine would for this config, else the
    reason why not (one human sentence)."""
    device = torch.device(device)
    if device.type != "cpu":
        return f"the numba engine runs on the CPU, and this run's device is {device.type}"
    network = resolve_network(agent_cfg.network, obs_shape)
    if network != "mlp":
        return f"the numba engine updates MLPs, and agent.network is {network} for observations of shape {obs_shape}"
    for f in dataclasses.fields(agent_cfg):
        if f.name in ENGINE_NEUTRAL:
            continue
        if f.name not in KERNEL_VALUES:
            return f"agent.{f.name} is a setting the numba engine does not know"
        allowed, value = KERNEL_VALUES[f.name], getattr(agent_cfg, f.name)
        if allowed is not ANY and value not in allowed:
            return f"the numba engine does not implement agent.{f.name}={value} (only {', '.join(map(str, allowed))})"
    return None


def choose_engine(agent_cfg, obs_shape: tuple[int, ...], device: torch.device | str) -> tuple[str, str | None]:
    """(engine, note): the engine that runs ``agent_cfg`` and, when ``auto`` did not pick numba, why.

    An explicit ``numba`` that :func:`supports` refuses is a ConfigError naming the reason.
    """
    if agent_cfg.engine == "torch":
        return "torch", None
    reason = supports(agent_cfg, obs_shape, device)
    if agent_cfg.engine == "numba":
        if reason is not None:
            raise ConfigError(f"agent.engine: numba cannot run this config: {reason}; use agent.engine=auto or torch")
        return "numba", None
    return ("torch", reason) if reason is not None else ("numba", None)


AGENTS: dict[str, type[DQNAgent]] = {"torch": TorchAgent, "numba": NumbaAgent}


def make_agent(
    cfg: AgentConfig,
    obs_shape: tuple[int, ...],
    n_actions: int,
    device: torch.device,
    td_loss: TDLoss | None = None,
) -> DQNAgent:
    """The agent of the engine that runs ``cfg`` (chosen here, once: :func:`choose_engine`). ``td_loss``: the loss
    the run trains with (``TDLoss.from_config`` of the whole config: a replay kind may bring its own); None:
    ``agent.loss``. A huber or mse ``td_loss`` must be ``agent.loss`` (one source of truth)."""
    if td_loss is None:
        td_loss = TDLoss(cfg.loss)
    elif td_loss.name not in KAPPA_LOSSES and td_loss.name != cfg.loss:
        raise ValueError(f"the loss {td_loss.name!r} is not agent.loss ({cfg.loss!r}) nor a replay kind's own")
    check_network(cfg, obs_shape)
    engine, note = choose_engine(cfg, obs_shape, device)
    return AGENTS[engine](cfg, obs_shape, n_actions, device, td_loss, note)
