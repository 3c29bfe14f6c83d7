"""Q-networks: an MLP for vectors, the Nature CNN (Mnih et al. 2015) for Atari frame stacks, the MinAtar network
(Young & Tian 2019) for MinAtar's 10×10×C grids.

``agent.network: auto`` (:func:`resolve_network`): ``cnn`` for (C, H, W) with H, W >= 36 (the smallest its
convolutions accept), ``minatar`` for other 3-D (H, W, C) with H, W >= 3, else ``mlp``. :func:`check_network` needs
only the observation shape, so a sweep with a misfit is rejected before it starts."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from per_cli.errors import ConfigError

CNN_MIN_SCREEN = 36  # 8x8/4 -> 4x4/2 -> 3x3/1 convolutions need at least a 36x36 screen
MINATAR_KERNEL = 3


ACTIVATIONS: dict[str, type[nn.Module]] = {"relu": nn.ReLU, "tanh": nn.Tanh}


@dataclass(frozen=True)
class MLPSpec:
    """One explicit description of an MLP Q-network: (input_dim, *hidden, n_actions) Linear layers with
    ``activation`` between them and nothing else. The torch module (:class:`MLPQNetwork`) and the numba
    engine's kernel (:mod:`per_cli.rl.engines`) are both built from it, so they cannot disagree on the network."""

    input_dim: int
    hidden: tuple[int, ...]
    n_actions: int
    activation: str = "relu"

    @property
    def dims(self) -> tuple[int, ...]:
        return (self.input_dim, *self.hidden, self.n_actions)

    @classmethod
    def from_config(cls, agent_cfg, obs_shape: tuple[int, ...], n_actions: int) -> MLPSpec:
        return cls(math.prod(obs_shape), tuple(agent_cfg.hidden_sizes), n_actions, agent_cfg.activation)


class MLPQNetwork(nn.Module):
    """The torch module of an :class:`MLPSpec`; observations of any shape are flattened and cast to float."""

    def __init__(self, spec: MLPSpec):
        super().__init__()
        layers: list[nn.Module] = []
        width = spec.input_dim
        for h in spec.hidden:
            layers += [nn.Linear(width, h), ACTIVATIONS[spec.activation]()]
            width = h
        layers.append(nn.Linear(width, spec.n_actions))
        self.net = nn.Sequential(*layers)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs.flatten(1).float())


class NatureCNN(nn.Module):
    """Three conv layers and a 512-unit layer; uint8 frames are scaled to [0, 1] on the device."""

    def __init__(self, in_channels: int, n_actions: int, screen_size: int = 84):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 32, 8, stride=4),
            nn.ReLU(),
            nn.Conv2d(32, 64, 4, stride=2),
            nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1),
            nn.ReLU(),
            nn.Flatten(),
        )
        with torch.no_grad():
            n_flat = self.features(torch.zeros(1, in_channels, screen_size, screen_size)).shape[1]
        self.head = nn.Sequential(nn.Linear(n_flat, 512), nn.ReLU(), nn.Linear(512, n_actions))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(obs.float() / 255.0))


class MinAtarQNetwork(nn.Module):
    """The MinAtar paper's DQN network: conv 16 × 3×3 stride 1 → ReLU → linear 128 → ReLU → one Q per action. Takes
    (batch, H, W, C) 0/1 observations (bool or uint8, as stored), permuted and cast to float on the device, unscaled."""

    def __init__(self, obs_shape: tuple[int, int, int], n_actions: int, hidden: int = 128):
        super().__init__()
        height, width, channels = obs_shape
        self.conv = nn.Conv2d(channels, 16, MINATAR_KERNEL, stride=1)
        n_flat = 16 * (height - MINATAR_KERNEL + 1) * (width - MINATAR_KERNEL + 1)
        self.head = nn.Sequential(nn.Linear(n_flat, hidden), nn.ReLU(), nn.Linear(hidden, n_actions))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.conv(obs.permute(0, 3, 1, 2).float()))
        return self.head(x.flatten(1))


def resolve_network(kind: str, obs_shape: tuple[int, ...]) -> str:
    """``auto`` → ``cnn`` for (C, H, W) screens of at least 36×36, ``minatar`` for other 3-D (H, W, C) grids,
    ``mlp`` otherwise (see the module docstring); an explicit kind is returned unchanged."""
    if kind != "auto":
        return kind
    if len(obs_shape) == 3:
        if min(obs_shape[1:]) >= CNN_MIN_SCREEN:
            return "cnn"
        if min(obs_shape[:2]) >= MINATAR_KERNEL:
            return "minatar"
    return "mlp"


def check_network(agent_cfg, obs_shape: tuple[int, ...]) -> None:
    """Raise ConfigError (one line naming ``agent.network`` and the fix) when ``agent_cfg.network`` cannot take
    observations of ``obs_shape``. Needs no env and no training: preflight calls it for every run of a sweep, and
    ``make_agent`` before it builds a network."""
    resolved, shape = resolve_network(agent_cfg.network, obs_shape), tuple(int(d) for d in obs_shape)
    if resolved == "cnn" and (len(shape) != 3 or min(shape[1:]) < CNN_MIN_SCREEN):
        why = (
            f"cnn needs (channels, height, width) image observations of at least {CNN_MIN_SCREEN}x{CNN_MIN_SCREEN}, "
            f"but this env's observations have shape {shape}"
        )
    elif resolved == "minatar" and (len(shape) != 3 or min(shape[:2]) < MINATAR_KERNEL):
        why = (
            f"minatar needs (height, width, channels) grid observations of at least "
            f"{MINATAR_KERNEL}x{MINATAR_KERNEL} (MinAtar's 10x10xC), but this env's observations have shape {shape}"
        )
    else:
        return
    fitting = resolve_network("auto", obs_shape)
    raise ConfigError(f"agent.network: {why}; use agent.network=auto (which picks {fitting} here)")


def make_q_network(
    kind: str, obs_shape: tuple[int, ...], n_actions: int, hidden_sizes: list[int], activation: str = "relu"
) -> nn.Module:
    """The Q-network ``kind`` (auto: see :func:`resolve_network`) for ``obs_shape``; ``hidden_sizes`` and
    ``activation`` shape the MLP only (the CNN and the MinAtar network are the papers' fixed architectures); a
    ``kind`` that :func:`check_network` passes for ``obs_shape``."""
    kind = resolve_network(kind, obs_shape)
    if kind == "cnn":
        return NatureCNN(obs_shape[0], n_actions, obs_shape[1])
    if kind == "minatar":
        return MinAtarQNetwork(tuple(obs_shape), n_actions)
    return MLPQNetwork(MLPSpec(math.prod(obs_shape), tuple(hidden_sizes), n_actions, activation))
