"""The window of updates between two log points: each update measured (the loop's one pass,
:func:`per_cli.train.measures.update_measures.measure_table`) and kept as its row of floats (and its states'
feature variances, with iid) until ``pop``; state diversity is computed at the pop, against a reference sample of
the memory drawn then."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from per_cli.rl.engines.cohort import stack  # np.stack of equal-shaped arrays, without its per-array cost
from per_cli.train.measures.iid import batch_variances, state_diversity, state_view
from per_cli.train.measures.reference import drawn_reference_variance
from per_cli.train.measures.update_measures import row_layout

if TYPE_CHECKING:
    from per_cli.replay.memory import ReplayMemory


class UpdateWindow:
    """Per-update measures kept until ``pop``, which returns every update's scalars. With ``iid``, ``pop`` draws a
    reference on the window's own generator (so training is unaffected) at the first pop and every ``refresh_every``
    updates, and scores each update's state diversity against it. ``state_dict``/``from_state_dict`` save and restore
    it as plain data, to pop what this one would have."""

    def __init__(
        self,
        correlation_threshold: float | None,
        *,
        iid: bool = True,
        refresh_every: int = 100,
        seed: int = 0,
    ):
        self.threshold = correlation_threshold
        self.iid = iid
        self.refresh_every = refresh_every
        self._rng = np.random.default_rng(np.random.SeedSequence([seed, 0x11D]))
        self._ref_var: np.ndarray | None = None
        self._since_refresh = 0
        self._pull: Callable[[], None] = _nothing_kept  # hands this window the updates a cohort keeps for it
        self._clear()

    def _clear(self) -> None:
        self._rows: list[np.ndarray] = []  # per update: its measures (row_layout), float64
        self._vars: list[np.ndarray] = []  # per update, with iid: its states' feature variances (batch_variances)

    def attach(self, pull: Callable[[], None]) -> None:
        """``pull()`` hands this window, through :meth:`add_block`, the updates a cohort measured for it and
        keeps until then (:class:`~per_cli.train.measures.cohort_rows.CohortRows`); the window calls it before it
        reads or adds updates, so its updates stay in the order they came (attached again, it first takes what
        the earlier one kept)."""
        self._pull()
        self._pull = pull

    def state_dict(self) -> dict:
        """The window as plain data (numpy arrays, lists of them, numbers, strings, None, and the generator's
        ``bit_generator.state``, a dict): what :meth:`from_state_dict` needs to continue it exactly. The lists are
        copies; the arrays in them are the window's own (it never writes into them)."""
        self._pull()
        return {
            "threshold": self.threshold,
            "iid": self.iid,
            "refresh_every": self.refresh_every,
            "rng": self._rng.bit_generator.state,
            "ref_var": self._ref_var,
            "since_refresh": self._since_refresh,
            "rows": list(self._rows),
            "variances": list(self._vars),
        }

    @classmethod
    def from_state_dict(cls, state: dict) -> UpdateWindow:
        """The window :meth:`state_dict` described: its settings (those of the run that saved it), the updates it
        held and the reference and generator as they were, so its pops are the saved window's."""
        window = cls(state["threshold"], iid=state["iid"], refresh_every=state["refresh_every"])
        window._rng.bit_generator.state = state["rng"]  # (a window's generator is always PCG64: default_rng's)
        window._ref_var = state["ref_var"]
        window._since_refresh = int(state["since_refresh"])
        window._rows = list(state["rows"])
        saved, states = state["variances"], state.get("obs") or [None] * len(state["variances"])
        window._vars = [_variances(v, o, state) for v, o in zip(saved, states, strict=True)] if window.iid else []
        return window

    def add_measured(self, row: np.ndarray, variances: np.ndarray | None) -> None:
        """An update measured already (``measure_table``): ``row`` its values (float64) in ``row_layout(threshold
        is not None, iid)``'s order, ``variances`` its states' feature variances (needed with iid, else None)."""
        self._pull()
        self._rows.append(row)
        if self.iid:
            self._vars.append(variances)

    def add_block(self, rows: np.ndarray, variances: np.ndarray | None) -> None:
        """Updates measured already, in order: row k of each array one update's, as :meth:`add_measured` takes
        it."""
        self._rows.extend(rows)
        if self.iid:
            self._vars.extend(variances)

    def pop(self, memory: ReplayMemory | None = None) -> dict[str, np.ndarray]:
        """Per-update values (one array entry per update, in the order they came) of every logged tag, in
        ``row_layout``'s order and dtypes, then ``iid/state_diversity`` with iid (left out while the memory holds
        one state value: undefined); empty if no updates. With ``iid``, ``memory`` is needed (the reference)."""
        self._pull()
        n = len(self._rows)
        if not n:
            return {}
        layout = row_layout(self.threshold is not None, self.iid)
        table = stack(self._rows).astype(np.float64, copy=False).T
        values = {key: table[j].astype(dtype) for j, (key, dtype) in enumerate(layout)}  # (contiguous copies)
        if self.iid:
            self._since_refresh += n
            if self._ref_var is None or self._since_refresh >= self.refresh_every:
                self._ref_var = drawn_reference_variance(memory, self._rng)
                self._since_refresh = 0
            diversity = state_diversity(stack(self._vars), self._ref_var)
            if not np.isnan(diversity).any():  # undefined while the memory holds one state value: not logged
                values["iid/state_diversity"] = diversity
        self._clear()
        return values


def _variances(variances: np.ndarray | None, obs: np.ndarray | None, state: dict) -> np.ndarray:
    """An update's feature variances as a saved window holds them; a format-5 window saved before every update's
    were measured holds its states instead (image states, more than 7 features, batches over 128)."""
    if variances is not None:
        return variances
    return batch_variances(state_view(obs[None], int(state["obs_ndim"])))[0]


def _nothing_kept() -> None:
    """A window's ``pull`` while no cohort keeps updates for it."""
