"""A cohort step's update measures, computed once for the members that updated, while the draw's stacked
(members, batch) arrays are in cache.

Each member's :class:`~per_cli.train.measures.update_window.UpdateWindow` would keep its update's arrays and measure
them at its next pop (an episode's end, a log), stacking ~30 rows five times per pop from memory long since evicted.
:func:`measure_rows` computes the same per-update measures (``metrics.row_layout``) over the step's stacked
arrays with the window's own kernels (each of them computes a row from that row alone, so the values are the
ones the window's pop computes), and each window keeps only its member's floats (``add_measured``). State
diversity needs the reference variance drawn at the pop, so only its reference-free part, the feature
variances (``iid.feature_variances``), is computed here. Fail closed: a step whose arrays these kernels do not
serve gives None, and the members' windows take their updates raw.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from per_cli.train.measures.iid import episode_diversity, feature_variances, variances_apply
from per_cli.train.measures.metrics import batched_correlation_counts, exact_td, td_measures
from per_cli.train.measures.update_window import UpdateWindow, row_layout


def measure_rows(
    windows: Sequence[UpdateWindow], td: np.ndarray, weights: np.ndarray, ages: np.ndarray, obs: np.ndarray,
    episodes: np.ndarray, held: Sequence[int] | None, losses: Sequence[float], q_means: Sequence[float],
) -> list[tuple[np.ndarray, np.ndarray | None]] | None:  # fmt: skip
    """Per member k (row k of the stacked arrays of its update: TD errors ``td`` (U, B), IS ``weights``,
    ``ages``, states ``obs`` (U, B, ...), ``episodes``; ``held``: the episodes its memory held then, needed
    with iid) its window's measured row and its feature variances (None where not computed), float64 rows of
    one table each; None where these arrays or windows are not served (the windows then take the updates
    raw)."""
    first = windows[0]
    config = (first.threshold, first.iid, first.loss)
    if any((w.threshold, w.iid, w.loss) != config for w in windows) or not exact_td(td, weights, first.loss):
        return None
    if ages.ndim != 2 or not ages.flags.c_contiguous or (first.iid and held is None):
        return None
    measures = td_measures(td, weights, first.loss)
    columns = [
        losses, measures["unweighted"], q_means, measures["mean"], measures["median"], measures["max"],
        measures["std"], np.add.reduce(ages, axis=1, dtype=np.float64) / ages.shape[1], measures["weight_mean"],
    ]  # fmt: skip
    if first.threshold is not None:
        columns.append(batched_correlation_counts(obs, first.threshold))
    variances = None
    if first.iid:
        columns.append(episode_diversity(episodes, np.asarray(held, dtype=np.int64)))
        if obs.ndim == 3 and variances_apply(obs):
            variances = list(feature_variances(obs))
    if len(columns) != len(row_layout(first.threshold is not None, first.iid)):
        return None
    table = np.empty((len(td), len(columns)), dtype=np.float64)
    for j, column in enumerate(columns):
        table[:, j] = column
    rows = list(table)  # (views: iterating the array makes them cheaper than indexing it)
    return list(zip(rows, variances if variances is not None else [None] * len(rows), strict=True))
