"""The torch engine's greedy action: argmax_a Q(s, a) of one observation under the online network as it is now.

Why a class: ε-greedy at a small ε calls this at nearly every agent step, and on a GPU each call blocks the host
until the update queued before it is done (the action must see the network after the last update). What the
host does before that wait should not wait itself: for a copy from pageable memory
(``torch.as_tensor(obs, device=cuda)``) the driver may synchronise with the stream first (CUDA's API
synchronisation notes), and then the forward's kernels are launched only after the update ran. Here the
observation goes through a pinned host buffer into a device buffer that live as long as the agent
(``non_blocking``: queued behind the update, no wait), the forward's kernels are queued behind it, and the one
wait is the read of the action (one int). On a CPU the observation is used where it lies (no copy).

Contract: ``GreedyAction(device)(q_net, obs)`` (``q_net`` on ``device``) equals
``int(q_net(torch.as_tensor(obs)[None]).argmax(dim=1))`` (the first of tied maxima), bit for bit: the same
network on the same values. The staging buffers are made on the first call and again when an observation's shape
or dtype changes; a call returns only after its input copy is done (the read of the action waits for everything
queued before it), so the next call may overwrite them.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn


class GreedyAction:
    def __init__(self, device: torch.device):
        self.device = device
        self._staged = device.type == "cuda"
        self._host: np.ndarray | None = None  # (1, *obs.shape): a numpy view of the pinned buffer (CUDA)
        self._pinned: torch.Tensor | None = None
        self._input: torch.Tensor | None = None  # (1, *obs.shape) on the device (CUDA)

    @torch.inference_mode()
    def __call__(self, q_net: nn.Module, obs: np.ndarray) -> int:
        obs = np.asarray(obs)
        x = self._stage(obs) if self._staged else torch.from_numpy(obs)[None]
        return int(q_net(x).argmax(dim=1).item())

    def _stage(self, obs: np.ndarray) -> torch.Tensor:
        """``obs`` as a (1, ...) tensor on the device: copied into the pinned buffer, then queued to the device."""
        host = self._host
        if host is None or host.shape[1:] != obs.shape or host.dtype != obs.dtype:
            self._pinned = torch.from_numpy(np.empty((1, *obs.shape), dtype=obs.dtype)).pin_memory()
            self._host = host = self._pinned.numpy()
            self._input = torch.empty(self._pinned.shape, dtype=self._pinned.dtype, device=self.device)
        host[0] = obs
        return self._input.copy_(self._pinned, non_blocking=True)
