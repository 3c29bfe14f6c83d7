"""Test helpers over the replay framework's calls."""

from __future__ import annotations

import numpy as np

from per_cli.replay.memory import ReplayMemory


def leave(memory: ReplayMemory, slots: np.ndarray) -> None:
    """Slots ``slots`` of ``memory`` become unsampleable (the kind's leaving events, as a frame storage's add
    makes them): its ``add_members`` over this member alone."""
    slots = np.asarray(slots, dtype=np.int64)
    which = np.zeros(slots.shape[0], dtype=np.int64)
    type(memory.sampler).add_members(memory.lists, which, slots, np.zeros(slots.shape[0], dtype=np.bool_))
