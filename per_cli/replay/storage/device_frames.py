"""A copy of the Atari frame ring on the training device, so a batch's stacks are gathered there: an update moves
only the sampled frame positions, a new transition one frame.

:class:`DeviceFrames` mirrors the host ring (the source of truth); ``stacks(positions, padding)`` equals the host
``stacks`` byte for byte. Nothing here synchronises: copies are ``non_blocking`` from pageable memory, which the
driver stages before returning, so the source may be reused at once (a reused pinned buffer could not)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch


class DeviceStacks(NamedTuple):
    """A batch's ``obs`` and ``next_obs`` stacks on the device: views of one ``(B, S + 1, H, W)`` gather."""

    obs: torch.Tensor
    next_obs: torch.Tensor


class DeviceFrames:
    """``n_frames`` frames of ``frame_shape`` as one uint8 (or the storage's dtype) tensor on ``device``."""

    def __init__(self, host_frames: np.ndarray, device: torch.device | str):
        self.device = torch.device(device)
        self.frames = torch.from_numpy(np.ascontiguousarray(host_frames)).to(self.device, copy=True)

    def write_many(self, positions: np.ndarray, host_frames: np.ndarray) -> None:
        """Frames ``positions`` (int64; repeats allowed) of the ring become the host ring's ``host_frames`` there
        (``(n_frames, ...)``, flat rows or frames): one copy, after the host ring was written."""
        source = torch.from_numpy(host_frames[positions]).view(-1, *self.frames.shape[1:])
        index = torch.from_numpy(positions).to(self.device, non_blocking=True)
        self.frames.index_copy_(0, index, source.to(self.device, non_blocking=True))

    def load(self, host_frames: np.ndarray) -> None:
        """The whole ring from the host's (after a checkpoint load)."""
        self.frames.copy_(torch.from_numpy(np.ascontiguousarray(host_frames)))

    def stacks(self, positions: np.ndarray, padding: np.ndarray | None) -> DeviceStacks:
        """The stacks of ring ``positions`` ``(B, S + 1)`` (int64; obs = ``[:, :S]``, next_obs = ``[:, 1:]``), the
        frames where ``padding`` ``(B, S + 1)`` is True zeroed (None: none are)."""
        batch, width = positions.shape
        index = torch.from_numpy(np.ascontiguousarray(positions, dtype=np.int64).reshape(-1))
        out = self.frames.index_select(0, index.to(self.device, non_blocking=True))
        out = out.view(batch, width, *self.frames.shape[1:])
        if padding is not None:
            mask = torch.from_numpy(np.ascontiguousarray(padding)).to(self.device, non_blocking=True)
            out.masked_fill_(mask.view(batch, width, *([1] * (self.frames.dim() - 1))), 0)
        return DeviceStacks(out[:, :-1], out[:, 1:])
