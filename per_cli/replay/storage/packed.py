"""Ring storage for boolean observations, eight states' bits to a byte (``np.packbits``): MinAtar's bool grids would
take a byte per bool. A gather unpacks its rows in one ``np.unpackbits`` call (:func:`unpack_rows`); everything
else is the plain ring's (:class:`~per_cli.replay.storage.ring.TransitionStorage`). Only ``bool`` observations
reach it (docs/minatar.md)."""

from __future__ import annotations

import math

import numpy as np

from per_cli.replay.storage.budget import ensure_memory_fits
from per_cli.replay.storage.ring import TransitionStorage


def packed_row_bytes(obs_shape: tuple[int, ...]) -> int:
    """Bytes one packed state takes: its bits rounded up to whole bytes."""
    return math.ceil(math.prod(obs_shape) / 8)


def unpack_rows(rows: np.ndarray, obs_shape: tuple[int, ...]) -> np.ndarray:
    """Packed states ``rows`` (..., row bytes) as ``bool`` states (..., *obs_shape), in one ``np.unpackbits``."""
    bits = np.unpackbits(rows, axis=-1, count=math.prod(obs_shape))  # uint8 0/1, one row per state
    return bits.view(np.bool_).reshape(*rows.shape[:-1], *obs_shape)


def packed_rows(states, obs_shape: tuple[int, ...]) -> np.ndarray:
    """``bool`` states (n, *obs_shape) as packed rows (n, row bytes), in one ``np.packbits``; ValueError for
    states of another shape or dtype."""
    states = np.asarray(states)
    if states.shape[1:] != obs_shape or states.dtype != np.bool_:
        raise ValueError(f"expected bool observations of shape {obs_shape}, got {states.dtype} {states.shape[1:]}")
    return np.packbits(states.reshape(states.shape[0], -1), axis=1)


class PackedTransitionStorage(TransitionStorage):
    """:class:`TransitionStorage` for ``bool`` observations, kept bit-packed (same face, same batches)."""

    def __init__(self, capacity: int, obs_shape: tuple[int, ...], obs_dtype: np.dtype = np.bool_, *, check_memory=True):
        if np.dtype(obs_dtype) != np.bool_:
            raise ValueError(f"PackedTransitionStorage packs bool observations, got {np.dtype(obs_dtype)}")
        self.obs_shape = tuple(int(d) for d in obs_shape)
        if check_memory:  # here, to name the states' real shape (the plain ring would name the packed rows)
            need = self.bytes_needed(capacity, self.obs_shape)
            what = f"a replay memory of {capacity:,} bit-packed transitions {self.obs_shape}"
            ensure_memory_fits(need, what, per_unit=need // capacity)
        # obs / next_obs: (capacity, row) packed bytes
        super().__init__(capacity, (packed_row_bytes(self.obs_shape),), np.uint8, check_memory=False)

    @staticmethod
    def bytes_needed(capacity: int, obs_shape: tuple[int, ...], obs_dtype: np.dtype = np.bool_) -> int:
        """Bytes the storage allocates for ``capacity`` transitions: the plain ring's, with packed rows as states."""
        return TransitionStorage.bytes_needed(capacity, (packed_row_bytes(obs_shape),), np.uint8)

    def observations(self, slots: np.ndarray) -> np.ndarray:
        return unpack_rows(super().observations(slots), self.obs_shape)

    def gather(self, slots: np.ndarray, next_slots: np.ndarray | None = None) -> dict[str, np.ndarray]:
        batch = super().gather(slots, next_slots)
        batch["obs"] = unpack_rows(batch["obs"], self.obs_shape)
        batch["next_obs"] = unpack_rows(batch["next_obs"], self.obs_shape)
        return batch
