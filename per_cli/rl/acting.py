"""The torch engine's greedy action: argmax_a Q(s, a) of one observation under the online network as it is now.

``GreedyAction(device)(q_net, obs)`` equals ``int(q_net(torch.as_tensor(obs)[None]).argmax(dim=1))`` bit for bit.
Why a class: on a GPU a copy from pageable memory may wait for the queued update; the observation goes through
pinned and device buffers kept with the agent (``non_blocking``), so the one wait is the read of the action. A call
returns once its copy is done, so the next may reuse the buffers. On a CPU the observation is used where it lies."""

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
