"""Q-networks: an MLP for vector observations and the Nature CNN (Mnih et al. 2015) for image stacks."""

from __future__ import annotations

import math

import torch
from torch import nn


class MLPQNetwork(nn.Module):
    def __init__(self, obs_dim: int, n_actions: int, hidden_sizes: list[int]):
        super().__init__()
        layers: list[nn.Module] = []
        width = obs_dim
        for h in hidden_sizes:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        layers.append(nn.Linear(width, n_actions))
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


def make_q_network(kind: str, obs_shape: tuple[int, ...], n_actions: int, hidden_sizes: list[int]) -> nn.Module:
    """``kind`` 'auto' picks the CNN for (C, H, W) image observations and the MLP otherwise."""
    if kind == "auto":
        kind = "cnn" if len(obs_shape) == 3 else "mlp"
    if kind == "cnn":
        if len(obs_shape) != 3:
            raise ValueError(f"agent.network: cnn needs (channels, height, width) observations, got {obs_shape}")
        return NatureCNN(obs_shape[0], n_actions, obs_shape[1])
    return MLPQNetwork(math.prod(obs_shape), n_actions, hidden_sizes)
