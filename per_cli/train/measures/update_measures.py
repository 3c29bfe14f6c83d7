"""The per-update measures, computed in one place: :func:`measure_table`, over (S, B) arrays.

Every update is measured here once, when it is made: the loop's step measures its S members together (a solo
run's S = 1; ``LearningPhases.measure``). Each row's values are a function of that row alone, so an update's
measures do not depend on which others it was measured with. State diversity needs the reference drawn at the
window's pop, so only its reference-free part, the feature variances (``iid.feature_variances``), is computed here.

The measures themselves are :mod:`per_cli.train.measures.metrics`' and :mod:`per_cli.train.measures.iid`'s. They
read what the engine's update returned (δ, each sample's loss, the loss, mean Q: ``UpdateResults``) and never
recompute the TD target or the loss.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numba
import numpy as np

from per_cli.train.measures.iid import _episode_diversity, episode_diversity, feature_variances, variances_apply
from per_cli.train.measures.metrics import TD_TAGS, _td_kernel, batched_correlation_counts, exact_td, td_measures


class MeasuredBy(Protocol):
    """What decides an update's measures: a window's settings (``UpdateWindow`` has them)."""

    threshold: float | None  # the correlation count's |r| threshold; None: not counted
    iid: bool  # episode diversity measured (and state diversity at the pop)


# Every per-update measure, keyed by its TensorBoard tag, with the dtype it has for the engines' float32 TD errors
# and IS weights: the registry a row's columns come from (COLUMN). The correlation count and episode diversity
# follow where the windows measure them (row_layout).
MEASURES: tuple[tuple[str, type], ...] = (
    ("losses/td_loss", np.float64), ("losses/td_loss_unweighted", np.float64), ("losses/q_values", np.float64),
    ("td_error/mean", np.float32), ("td_error/median", np.float32), ("td_error/max", np.float32),
    ("td_error/std", np.float32), ("replay/sample_age", np.float64), ("replay/is_weight_mean", np.float32),
)  # fmt: skip
CORRELATION, EPISODE_DIVERSITY = "replay/correlation_count", "iid/episode_diversity"
COLUMN = {tag: j for j, (tag, _) in enumerate(MEASURES)} | {CORRELATION: len(MEASURES)}  # (diversity: the last)
# the columns _compiled_columns writes, in its order: the TD measures', then the mean age (a compiled kernel takes
# their numbers, not the tags)
COMPILED_COLUMNS = np.array([COLUMN[tag] for tag in (*TD_TAGS, "replay/sample_age")], dtype=np.int64)


def row_layout(correlation: bool, iid: bool) -> tuple[tuple[str, type], ...]:
    """The per-update measures of a row of :func:`measure_table`, as (tag, dtype) in the row's order (and the
    order ``UpdateWindow.pop`` returns them in): each value is held as float64 in the row and popped as its
    dtype (every float32 value is a float64 exactly, so the round trip keeps its bits)."""
    return MEASURES + ((CORRELATION, np.int64),) * correlation + ((EPISODE_DIVERSITY, np.float64),) * iid


def measure_table(
    window: MeasuredBy, td: np.ndarray, losses: np.ndarray, weights: np.ndarray, ages: np.ndarray,
    obs: np.ndarray | None, episodes: np.ndarray | None, held: Sequence[int] | np.ndarray | None,
    loss: Sequence[float], q_means: Sequence[float],
) -> tuple[np.ndarray, np.ndarray | None]:  # fmt: skip
    """Per update k (row k of the (S, B) arrays: TD errors ``td``, each sample's loss without IS weight ``losses``
    (``UpdateResults.losses``), IS ``weights``, ``ages``, states ``obs`` (S, B, ...), episode ids ``episodes``;
    ``held``: the episodes its memory held then; ``loss``, ``q_means``: its loss and mean Q) measured as
    ``window`` measures (its settings: every update's): row k of the (U,
    row_layout) float64 table, and row k of its states' feature variances (U, features), float64 (None without
    iid, or where ``iid.variances_apply`` does not serve the states).

    Each measure's static rule (dtype and shape) picks its compiled pass or numpy's reductions, bit for bit the
    same values; where ``metrics.exact_td`` serves and the ages are int64, the TD measures, mean age and episode
    diversity come from one compiled call (:func:`_compiled_columns`). ``obs`` is needed where the windows count
    correlations or measure iid, ``episodes`` and ``held`` with iid (a ValueError without them)."""
    threshold, iid = window.threshold, window.iid
    if (threshold is not None or iid) and obs is None:
        raise ValueError("measure_table: the correlation count and the i.i.d. measures need the states (obs)")
    if iid and (episodes is None or held is None):
        raise ValueError("measure_table: the i.i.d. measures need the episode ids and the episodes held")
    td, losses, weights, ages = (np.ascontiguousarray(a) for a in (td, losses, weights, ages))
    u = len(td)
    table = np.empty((u, len(MEASURES) + (threshold is not None) + iid), dtype=np.float64)
    table[:, COLUMN["losses/td_loss"]], table[:, COLUMN["losses/q_values"]] = loss, q_means
    # the column the compiled pass writes episode diversity into where iid.episode_diversity's own rule would count
    # these in its compiled pass (-1: no iid, or not served: numpy's count, here)
    episode_column = -1
    if iid:
        episodes, held = np.ascontiguousarray(episodes), np.asarray(held, dtype=np.int64)
        if episodes.dtype == np.int64 and held.dtype == np.int64 and episodes.ndim == 2 and episodes.shape[1]:
            episode_column = table.shape[1] - 1
        else:
            table[:, -1] = episode_diversity(episodes, held)
    if exact_td(td, losses, weights) and ages.dtype == np.int64 and ages.ndim == 2:
        ordered = np.abs(td)
        ordered.sort(axis=1)  # (metrics.td_measures' sort)
        if episode_column < 0:
            episodes, held = _NO_EPISODES, _NO_HELD
        _compiled_columns(table, COMPILED_COLUMNS, td, ordered, losses, weights, ages, episodes, held, episode_column)
    else:
        for tag, values in td_measures(td, losses, weights).items():
            table[:, COLUMN[tag]] = values
        table[:, COLUMN["replay/sample_age"]] = np.add.reduce(ages, axis=1, dtype=np.float64) / ages.shape[1]
        if episode_column >= 0:
            table[:, episode_column] = episode_diversity(episodes, held)
    if threshold is not None:
        table[:, COLUMN[CORRELATION]] = batched_correlation_counts(obs, threshold)
    variances = None
    if iid:
        obs = np.ascontiguousarray(obs)
        if variances_apply(obs):
            variances = feature_variances(obs)
    return table, variances


_NO_EPISODES, _NO_HELD = np.zeros((0, 0), dtype=np.int64), np.zeros(0, dtype=np.int64)


@numba.njit(cache=True, nogil=True)  # no fastmath: the kernels' arithmetic is numpy's
def _compiled_columns(table, columns, td, ordered, losses, weights, ages, episodes, held, episode_column):
    """The ``columns`` (:data:`COMPILED_COLUMNS`, in its order) of ``table`` (U, row_layout) for C float32 TD
    errors ``td`` (U, B), ``losses`` and ``weights`` (``metrics.exact_td``), ``ordered`` (each row of |δ| sorted)
    and int64 ``ages``: ``metrics._td_kernel``'s values (``metrics.td_measures``' compiled pass), the mean age;
    and, where ``episode_column`` >= 0, that column's episode diversity (``iid._episode_diversity``, for int64
    ``episodes`` and ``held``). The ages' float64 sum is exact (counts below 2⁵³ / B), so it is numpy's."""
    mean, median, top, std, unweighted, weight_mean = _td_kernel(td, ordered, losses, weights)
    u, b = ages.shape
    for k in range(u):
        total = 0.0
        for j in range(b):
            total += np.float64(ages[k, j])
        f64 = np.float64  # (every value a float64 exactly, as the table holds it)
        values = (f64(mean[k]), f64(median[k]), f64(top[k]), f64(std[k]), f64(unweighted[k]), f64(weight_mean[k]),
                  total / b)  # fmt: skip (COMPILED_COLUMNS' order)
        for j in range(len(values)):
            table[k, columns[j]] = values[j]
    if episode_column >= 0:
        diversity = _episode_diversity(episodes, held)
        for k in range(u):
            table[k, episode_column] = diversity[k]
