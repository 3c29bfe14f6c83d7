"""The per-update measures: one registry keyed by tag (:data:`MEASURES`), computed in one place,
:func:`measure_table`, over (S, B) arrays.

Each row's values are a function of that row alone, so a member's measures do not depend on who it was measured
with. The measures read the engine's :class:`~per_cli.rl.results.UpdateResults` and never recompute the TD target
or the loss. State diversity needs the window's reference, so only its reference-free part is computed here."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Literal, NamedTuple, Protocol

import numpy as np

from per_cli.rl.engines.dense import c_array  # (the loop's own C arrays passed as they are, others converted)
from per_cli.train.measures.iid import batch_variances, episode_diversity, state_view
from per_cli.train.measures.metrics import batched_correlation_counts
from per_cli.train.measures.reductions import row_means, row_means64, row_stds, sorted_medians


class MeasuredBy(Protocol):
    """What decides an update's measures: a window's settings (``UpdateWindow`` has them)."""

    threshold: float | None  # the correlation count's |r| threshold; None: not counted
    iid: bool  # episode diversity measured (and state diversity at the pop)


class Updates:
    """One call's S updates as the measures read them: (S, B) arrays in the dtypes the measures are defined on (the
    engines' float32 TD errors, per-sample losses and IS weights; int64 ages: the loop's own dtypes, so for its
    arrays the conversions copy nothing), and the arrays the TD-error measures share: ``td_abs`` (|δ|) and
    ``td_sorted`` (|δ| with each row sorted by numpy: NaN last, so its last column is numpy's max)."""

    def __init__(self, window: MeasuredBy, td, losses, weights, ages, obs, episodes, held, loss, q_means) -> None:
        self.td, self.losses, self.weights, self.ages = (
            c_array(a, dtype, np.shape(a)) for a, dtype in ((td, KEPT_AS.td), (losses, KEPT_AS.losses),
                                                            (weights, KEPT_AS.weights), (ages, KEPT_AS.ages))
        )  # fmt: skip
        self.loss, self.q_means = np.asarray(loss, KEPT_AS.loss), np.asarray(q_means, KEPT_AS.q_means)
        self.obs, self.episodes, self.held, self.threshold = obs, episodes, held, window.threshold
        self.td_abs = np.abs(self.td)
        self.td_sorted = self.td_abs.copy()
        self.td_sorted.sort(axis=1)


_F32, _I64 = np.dtype(np.float32), np.dtype(np.int64)


class UpdateArrays(NamedTuple):
    """Updates as :func:`measure_table` reads them, row k update k's: the engine's TD errors and per-sample losses
    and the draw's IS weights and ages (U, B); the states (U, B, ...), episode ids (U, B) and episodes held (U,)
    where the window measures what needs them, else None; the update's loss and mean Q value (U,)."""

    td: np.ndarray
    losses: np.ndarray
    weights: np.ndarray
    ages: np.ndarray
    obs: np.ndarray | None
    episodes: np.ndarray | None
    held: np.ndarray | None
    loss: np.ndarray
    q_means: np.ndarray


# the dtype measure_table takes each field as, and so the one it is kept in until measured (None: the array's own)
KEPT_AS = UpdateArrays(_F32, _F32, _F32, _I64, None, None, _I64, np.dtype(np.float64), np.dtype(np.float64))


class Measure(NamedTuple):
    """A per-update measure: the dtype it is logged in (every value of that dtype is a float64 exactly, so the
    table's float64 rows keep its bits), its values over a call's updates (S,), and the window setting it comes
    with (None: every window; "correlation": a window with a threshold, reading the states; "iid": a window with
    the i.i.d. measures, reading the episode ids and the episodes held)."""

    dtype: type
    of: Callable[[Updates], np.ndarray]
    when: Literal["correlation", "iid"] | None = None


# Every per-update measure, keyed by its TensorBoard tag, in the order a row and a pop hold them (the only place a
# measure is defined: a new one is one more entry)
MEASURES: dict[str, Measure] = {
    "losses/td_loss": Measure(np.float64, lambda u: u.loss),
    "losses/td_loss_unweighted": Measure(np.float64, lambda u: row_means64(u.losses)),
    "losses/q_values": Measure(np.float64, lambda u: u.q_means),
    "td_error/mean": Measure(np.float32, lambda u: row_means(u.td_abs)),
    "td_error/median": Measure(np.float32, lambda u: sorted_medians(u.td_sorted)),
    "td_error/max": Measure(np.float32, lambda u: u.td_sorted[:, -1]),
    "td_error/std": Measure(np.float32, lambda u: row_stds(u.td_abs)),
    "replay/sample_age": Measure(np.float64, lambda u: row_means64(u.ages)),  # (exact: integer sums)
    "replay/is_weight_mean": Measure(np.float32, lambda u: row_means(u.weights)),
    "replay/correlation_count": Measure(
        np.int64, lambda u: batched_correlation_counts(u.obs, u.threshold), "correlation"
    ),
    "iid/episode_diversity": Measure(np.float64, lambda u: episode_diversity(u.episodes, u.held), "iid"),
}


@lru_cache(maxsize=4)
def row_plan(correlation: bool, iid: bool) -> tuple[tuple[str, Measure], ...]:
    """The (tag, entry) of :data:`MEASURES` that a row of :func:`measure_table` holds, in the row's order, for a
    window with (``correlation``) or without a correlation threshold, with or without ``iid`` (the entries whose
    ``when`` is None or on): looked up once per setting."""
    on = {None, *(("correlation",) if correlation else ()), *(("iid",) if iid else ())}
    return tuple((tag, m) for tag, m in MEASURES.items() if m.when in on)


def row_layout(correlation: bool, iid: bool) -> tuple[tuple[str, type], ...]:
    """The per-update measures of a row of :func:`measure_table` (:func:`row_plan`'s) as (tag, dtype) in the row's
    order (and the order ``UpdateWindow.pop`` returns them in): each value is held as float64 in the row and popped
    as its dtype."""
    return tuple((tag, m.dtype) for tag, m in row_plan(correlation, iid))


def measure_table(
    window: MeasuredBy, td: np.ndarray, losses: np.ndarray, weights: np.ndarray, ages: np.ndarray,
    obs: np.ndarray | None, episodes: np.ndarray | None, held: Sequence[int] | np.ndarray | None,
    loss: Sequence[float], q_means: Sequence[float],
) -> tuple[np.ndarray, np.ndarray | None]:  # fmt: skip
    """Measure U updates (row k of the (S, B) arrays) as ``window`` asks: the (U, row_layout) float64 table of
    :data:`MEASURES`, and the viewed states' feature variances (U, features) float64, or None without iid. Floats are
    taken as float32 (the engines' dtype), integers as int64. ``obs`` is needed for the correlation count or iid,
    ``episodes`` and ``held`` for iid: a ValueError without them."""
    threshold, iid = window.threshold, window.iid
    if (threshold is not None or iid) and obs is None:
        raise ValueError("measure_table: the correlation count and the i.i.d. measures need the states (obs)")
    if iid and (episodes is None or held is None):
        raise ValueError("measure_table: the i.i.d. measures need the episode ids and the episodes held")
    updates = Updates(window, td, losses, weights, ages, obs, episodes, held, loss, q_means)
    table = np.array([m.of(updates) for _, m in row_plan(threshold is not None, iid)], np.float64).T
    variances = batch_variances(state_view(obs, obs.ndim - 2)) if iid else None
    return table, variances
