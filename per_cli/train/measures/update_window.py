"""The window of updates between two log points: each update's arrays (or its measures, already computed) kept
until the window is logged, then measured together in one vectorized pass (the measures themselves:
:mod:`per_cli.train.measures.metrics` and :mod:`per_cli.train.measures.iid`)."""

from __future__ import annotations

import numpy as np

from per_cli.rl.engines.cohort import stack  # np.stack of equal-shaped arrays, without its per-array cost
from per_cli.rl.losses import TDLoss
from per_cli.train.measures.iid import (
    MAX_RAW_FEATURES,
    diversity_from_variances,
    episode_diversity,
    raw_state_diversity,
    state_diversity,
    state_view,
)
from per_cli.train.measures.metrics import batched_correlation_counts, td_measures
from per_cli.train.measures.reference import drawn_reference_variance


def row_layout(correlation: bool, iid: bool) -> tuple[tuple[str, type], ...]:
    """The per-update measures of a measured update (``UpdateWindow.add_measured``), as (tag, dtype) in the
    order ``UpdateWindow.pop`` returns them; ``per_cli.train.measures.update_measures`` computes such rows."""
    layout = (
        ("losses/td_loss", np.float64), ("losses/td_loss_unweighted", np.float64), ("losses/q_values", np.float64),
        ("td_error/mean", np.float32), ("td_error/median", np.float32), ("td_error/max", np.float32),
        ("td_error/std", np.float32), ("replay/sample_age", np.float64), ("replay/is_weight_mean", np.float32),
    )  # fmt: skip
    layout += (("replay/correlation_count", np.int64),) * correlation
    return layout + (("iid/episode_diversity", np.float64),) * iid


class UpdateWindow:
    """Per-update data kept until ``pop``, which returns every update's scalars.

    An update comes in raw (``add``: its arrays, measured at ``pop`` in one vectorized pass with the others) or
    measured (``add_measured``: a cohort measured it with its members' updates of that step, while the arrays
    were in cache: only its floats are kept). The values are the same either way (each measure is a function of
    its own update's rows), and a window may hold both. With ``iid`` on, ``add`` and ``pop`` take the memory:
    ``add`` records how many episodes it holds (episode diversity's denominator at sampling time), and ``pop``
    draws a fresh reference sample of ``iid.REFERENCE_SIZE`` states from it
    (``reference.drawn_reference_variance``: one compiled call for a plain ring of vector states, else
    ``iid.reference_view``; with the window's own generator, so training is unaffected) at the first pop and
    then at the first pop after every ``refresh_every`` updates (``log.every``: once per log window). Only the
    reference's per-feature variance is kept, so the window's state is small (checkpoints hold it). State diversity
    needs that reference, so it is computed at ``pop``: from each update's feature variances where the update
    came with them, else from its states.

    ``state_dict`` gives the window as plain data (its settings, the updates held, the reference's variance and
    counters, its generator's ``bit_generator.state``) and ``from_state_dict`` rebuilds a window that pops what
    this one would have; checkpoints hold that, not the pickled object.
    """

    def __init__(
        self,
        correlation_threshold: float | None,
        *,
        iid: bool = True,
        loss: TDLoss | str = "huber",
        refresh_every: int = 100,
        seed: int = 0,
    ):
        self.threshold = correlation_threshold
        self.iid = iid
        self.loss = TDLoss.of(loss)  # the run's loss (a name: with the default κ and α), for the unweighted loss
        self.refresh_every = refresh_every
        self._rng = np.random.default_rng(np.random.SeedSequence([seed, 0x11D]))
        self._ref_var: np.ndarray | None = None
        self._since_refresh = 0
        self._obs_ndim = 1
        self._td: list[np.ndarray] = []
        self._obs: list[np.ndarray] = []  # every update's states (raw and measured)
        self._ages: list[np.ndarray] = []
        self._weights: list[np.ndarray] = []
        self._episodes: list[np.ndarray] = []
        self._held: list[int] = []
        self._loss: list[float] = []
        self._q: list[float] = []
        self._init_measured()

    def _init_measured(self) -> None:
        self._rows: list[np.ndarray | None] = []  # per update: its measures (row_layout), None if raw
        self._vars: list[np.ndarray | None] = []  # per update: its feature variances (iid.feature_variances)
        self._measured = 0  # updates added measured
        self._with_vars = 0  # updates added with their feature variances
        self._stacked: np.ndarray | None = None  # every update's states stacked, while pop computes

    # the per-update lists, by their state_dict keys (raw updates' arrays, then every update's rows and variances)
    _LISTS = {"td": "_td", "obs": "_obs", "ages": "_ages", "weights": "_weights", "episodes": "_episodes",
              "held": "_held", "losses": "_loss", "q_means": "_q", "rows": "_rows", "variances": "_vars"}  # fmt: skip

    def state_dict(self) -> dict:
        """The window as plain data (numpy arrays, lists of them, numbers, strings, None, and the generator's
        ``bit_generator.state``, a dict): what :meth:`from_state_dict` needs to continue it exactly. The lists are
        copies; the arrays in them are the window's own (it never writes into them)."""
        state = {
            "threshold": self.threshold,
            "iid": self.iid,
            "loss": self.loss.name,
            "loss_params": [self.loss.kappa, self.loss.alpha],
            "refresh_every": self.refresh_every,
            "rng": self._rng.bit_generator.state,
            "ref_var": self._ref_var,
            "since_refresh": self._since_refresh,
            "obs_ndim": self._obs_ndim,
            "measured": self._measured,
            "with_vars": self._with_vars,
        }
        for key, attribute in self._LISTS.items():
            state[key] = list(getattr(self, attribute))
        return state

    @classmethod
    def from_state_dict(cls, state: dict) -> UpdateWindow:
        """The window :meth:`state_dict` described: its settings (those of the run that saved it), the updates it
        held and the reference and generator as they were, so its pops are the saved window's."""
        # (a state saved before LAP and PAL has no loss_params: its huber or mse loss does not use them)
        loss = TDLoss(state["loss"], *state.get("loss_params", ()))
        window = cls(state["threshold"], iid=state["iid"], loss=loss, refresh_every=state["refresh_every"])
        rng = state["rng"]
        window._rng = np.random.Generator(getattr(np.random, rng["bit_generator"])())
        window._rng.bit_generator.state = rng
        window._ref_var = state["ref_var"]
        window._since_refresh = int(state["since_refresh"])
        window._obs_ndim = int(state["obs_ndim"])
        window._measured, window._with_vars = int(state["measured"]), int(state["with_vars"])
        for key, attribute in cls._LISTS.items():
            setattr(window, attribute, list(state[key]))
        return window

    def __setstate__(self, state: dict) -> None:  # a window pickled before measured updates existed: all raw
        self.__dict__.update(state)
        self.loss = TDLoss.of(self.loss)  # (format 2 pickled the loss's name)
        if "_rows" not in state:
            self._init_measured()
            self._rows.extend([None] * len(self._td))
            self._vars.extend([None] * len(self._td))

    def add(self, batch, result, memory=None) -> None:
        self._td.append(result.td_errors)
        self._add_states(batch.obs)
        if self.iid:
            if memory is None:
                raise ValueError("UpdateWindow(iid=True).add needs the memory (episodes held)")
            self._episodes.append(batch.episodes)
            self._held.append(memory.episodes_held())
        self._ages.append(batch.ages)
        self._weights.append(batch.weights)
        self._loss.append(result.loss)
        self._q.append(result.q_mean)
        self._rows.append(None)
        self._vars.append(None)

    def add_measured(self, row: np.ndarray, variances: np.ndarray | None, obs: np.ndarray) -> None:
        """An update measured already: ``row`` its values (float64) in ``row_layout(threshold is not None,
        iid)``'s order, ``variances`` its states' feature variances (or None), ``obs`` its states (for what
        ``pop`` measures from them)."""
        self._add_states(obs)
        self._rows.append(row)
        self._vars.append(variances)
        self._measured += 1
        self._with_vars += variances is not None

    def _add_states(self, obs: np.ndarray) -> None:
        if self.threshold is not None or self.iid:
            self._obs.append(obs)
            self._obs_ndim = obs.ndim - 1

    def pop(self, memory=None) -> dict[str, np.ndarray]:
        """Per-update values (one array entry per update) of every logged tag; empty if no updates."""
        n = len(self._rows)
        if not n:
            return {}
        if self.iid and memory is None:
            raise ValueError("UpdateWindow(iid=True).pop needs the memory (the reference sample)")
        values = self._raw_values(None) if not self._measured else self._merged_values()
        if self.iid:
            diversity = self._state_diversity(memory, n)
            if not np.isnan(diversity).any():  # undefined while the memory holds one state value: not logged
                values["iid/state_diversity"] = diversity
        for buffer in (self._td, self._obs, self._ages, self._weights, self._episodes, self._held, self._loss, self._q):
            buffer.clear()
        self._init_measured()
        return values

    def _merged_values(self) -> dict[str, np.ndarray]:
        """The measured updates' values from their rows, the raw ones' computed, in the order they came."""
        layout = row_layout(self.threshold is not None, self.iid)
        table = stack([row for row in self._rows if row is not None]).astype(np.float64, copy=False).T
        values = {key: table[j].astype(dtype) for j, (key, dtype) in enumerate(layout)}  # (contiguous copies)
        if self._measured == len(self._rows):
            return values
        raw = np.array([k for k, row in enumerate(self._rows) if row is None], dtype=np.int64)
        measured = np.ones(len(self._rows), dtype=bool)
        measured[raw] = False
        raw_values = self._raw_values(raw)
        for key, array in values.items():
            if raw_values[key].dtype != array.dtype:
                raise ValueError(f"{key}: raw updates measured as {raw_values[key].dtype}, measured ones {array.dtype}")
            merged = np.empty(len(self._rows), dtype=array.dtype)
            merged[raw], merged[measured] = raw_values[key], array
            values[key] = merged
        return values

    def _raw_values(self, raw: np.ndarray | None) -> dict[str, np.ndarray]:
        """The raw updates' values (``raw``: their places among all updates; None: all are raw)."""
        td = td_measures(stack(self._td), stack(self._weights), self.loss)
        values = {
            "losses/td_loss": np.asarray(self._loss),
            "losses/td_loss_unweighted": td["unweighted"],
            "losses/q_values": np.asarray(self._q),
            "td_error/mean": td["mean"],
            "td_error/median": td["median"],
            "td_error/max": td["max"],
            "td_error/std": td["std"],
            # (ndarray.mean's own reduction and division, without its Python wrapper)
            "replay/sample_age": np.add.reduce(stack(self._ages), axis=1, dtype=np.float64) / len(self._ages[0]),
            "replay/is_weight_mean": td["weight_mean"],
        }
        if self.threshold is not None:
            obs = stack(self._obs if raw is None else [self._obs[k] for k in raw])
            self._stacked = obs if raw is None else None  # (all states: state diversity's too)
            values["replay/correlation_count"] = batched_correlation_counts(obs, self.threshold)
        if self.iid:
            held = np.array(self._held, dtype=np.int64)
            values["iid/episode_diversity"] = episode_diversity(stack(self._episodes), held)
        return values

    def _state_diversity(self, memory, n: int) -> np.ndarray:
        self._since_refresh += n
        if self._ref_var is None or self._since_refresh >= self.refresh_every:
            self._ref_var = drawn_reference_variance(memory, self._obs_ndim, self._rng)
            self._since_refresh = 0
        keep = np.flatnonzero(~np.isnan(self._ref_var))
        if self._with_vars == n and len(keep) >= 2 and self._ref_var.dtype == np.float64:
            variances = np.ascontiguousarray(stack(self._vars), dtype=np.float64)
            return diversity_from_variances(variances, self._ref_var, keep)
        obs = self._stacked if self._stacked is not None else stack(self._obs)
        if self._obs_ndim == 1 and obs.shape[2] <= MAX_RAW_FEATURES:  # states measured as they are
            return raw_state_diversity(obs, self._ref_var)
        return state_diversity(state_view(obs, self._obs_ndim), self._ref_var)
