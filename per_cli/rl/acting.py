"""The torch engine's greedy action: argmax_a Q(s, a) of one observation under the online network as it is now.

``GreedyAction(q_net, device)(obs)`` equals ``int(q_net(torch.as_tensor(obs)[None]).argmax(dim=1))`` bit for bit.
Why a class: on a GPU a copy from pageable memory may wait for the queued update; the observation goes through a
pinned buffer kept with the agent (``non_blocking``), so the one wait is the read of the action. A call returns once
its copy is done, so the next may reuse the buffer. With ``graphed`` (``agent.cuda_graph``) the forward and argmax
are replayed as one captured CUDA graph (:class:`~per_cli.rl.cuda_graph.GraphedCall`): at a small ε nearly every
agent step acts greedily, and the eager forward's kernel launches are host time the step waits on. The graph
reads the parameters in place, which the optimizer and a checkpoint's load write in place. On a CPU the
observation is used where it lies."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from per_cli.rl.cuda_graph import GraphedCall


class GreedyAction:
    def __init__(self, q_net: nn.Module, device: torch.device, graphed: bool = False):
        self.q_net = q_net
        self.device = device
        self._staged = device.type == "cuda"
        self._input: torch.Tensor | None = None  # (1, *obs.shape) on the device (CUDA, not graphed)
        self._pinned: torch.Tensor | None = None  # (1, *obs.shape), page-locked (CUDA)
        self._host: np.ndarray | None = None  # a numpy view of the pinned buffer
        self._graph = GraphedCall(self._forward, device) if graphed and self._staged else None

    @property
    def captured(self) -> bool:
        return self._graph is not None and self._graph.captured

    def reset(self) -> None:
        """Capture the graph again (after the network's tensors were replaced)."""
        if self._graph is not None:
            self._graph.reset()

    @torch.inference_mode()
    def __call__(self, obs: np.ndarray) -> int:
        obs = np.asarray(obs)
        if not self._staged:
            return int(self._forward(torch.from_numpy(obs)[None])[0].item())
        pinned = self._pin(obs)
        if self._graph is not None:
            return int(self._graph([pinned])[0].item())
        return int(self._forward(self._input.copy_(pinned, non_blocking=True))[0].item())

    def _forward(self, x: torch.Tensor) -> tuple[torch.Tensor]:
        return (self.q_net(x).argmax(dim=1),)

    def _pin(self, obs: np.ndarray) -> torch.Tensor:
        """``obs`` copied into the pinned (1, ...) buffer, made on the first call (and, eager, the device's)."""
        host = self._host
        if host is None or host.shape[1:] != obs.shape or host.dtype != obs.dtype:
            self._pinned = torch.from_numpy(np.empty((1, *obs.shape), dtype=obs.dtype)).pin_memory()
            self._host = host = self._pinned.numpy()
            if self._graph is None:  # (a graph copies into its own captured input)
                self._input = torch.empty(self._pinned.shape, dtype=self._pinned.dtype, device=self.device)
        host[0] = obs
        return self._pinned
