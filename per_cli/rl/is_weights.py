"""The importance-sampling weights the loss applies (``replay.is_weights``), derived from the sampler's.

Every sampler returns the paper's weights, (N·P(i))^-β over the memory's largest; a batch-wide factor cancels, so
every other rule is applied here, once: ``memory_max`` (as drawn), ``batch_max``, ``batch_mean``, ``off`` (ones).
The logged weights and weighted loss are the applied ones. Why each rule: docs/replay.md."""

from __future__ import annotations

import numba
import numpy as np

IS_WEIGHT_RULES = ("memory_max", "batch_max", "batch_mean", "off")


def apply_rule(weights: np.ndarray, rule: str) -> None:
    """Rewrite ``weights`` in place (shape (..., B): one batch per row, float32) by ``rule`` (one of
    :data:`IS_WEIGHT_RULES`: the config schema's ``replay.is_weights``). The sampler's
    weights are positive and finite, so the divisors are too; an all-zero row (never drawn by a sampler) is left
    as it is rather than divided by zero."""
    if rule == "memory_max":
        return
    if rule == "off":
        weights.fill(1.0)
        return
    rows = np.ascontiguousarray(weights).reshape(-1, weights.shape[-1])  # (a view where the batches are C-contiguous)
    _scale_rows(rows, rule == "batch_mean")
    if not np.shares_memory(rows, weights):
        weights[...] = rows.reshape(weights.shape)


@numba.njit(cache=True, nogil=True)
def _scale_rows(rows, mean):
    """Each row divided by its max, or by its mean (summed in float64 in order, rounded to float32 once)."""
    for r in range(rows.shape[0]):
        row = rows[r]
        if mean:
            total = 0.0
            for j in range(row.shape[0]):
                total += row[j]
            scale = np.float32(total / row.shape[0])
        else:
            scale = row[0]
            for j in range(1, row.shape[0]):
                scale = max(scale, row[j])
        if scale > 0:
            for j in range(row.shape[0]):
                row[j] = row[j] / scale
