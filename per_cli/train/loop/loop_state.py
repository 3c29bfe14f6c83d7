"""The training loop's counters: what a checkpoint carries so that a resumed run continues exactly, and
the per-episode bookkeeping behind the progress line and the summary.

The per-step counters are columns of :class:`Counters`, arrays over the seed axis that the loop's phases move for
every member at once; a member's :class:`LoopState` reads and writes its own row (one row outside a loop)."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from per_cli.rundir.returns import FINAL_RETURN_WINDOW


def _window(items: Iterable[float] = ()) -> deque:
    """The last FINAL_RETURN_WINDOW of ``items``."""
    return deque(items, maxlen=FINAL_RETURN_WINDOW)


class Counters:
    """The per-step counters of ``size`` members, one row each: ``step`` (env steps: the ε and β schedules' position),
    ``episode``, the running episode's ``episode_return`` and ``episode_length``, this step's ``epsilon``, ``beta`` and
    ``ended`` (an episode was counted), and ``quiet_until``: the step before which no periodic task falls (0: not known
    yet), so that until then a step without an episode's end only moves ``step`` on."""

    def __init__(self, size: int):
        self.step = np.zeros(size, dtype=np.int64)
        self.episode_return = np.zeros(size, dtype=np.float64)
        self.episode_length = np.zeros(size, dtype=np.int64)
        self.epsilon = np.ones(size, dtype=np.float64)
        self.ended = np.zeros(size, dtype=bool)
        self.quiet_until = np.zeros(size, dtype=np.int64)
        self.beta = np.ones(size, dtype=np.float64)
        self.episode = np.zeros(size, dtype=np.int64)

    @classmethod
    def over(cls, states: Sequence[LoopState]) -> Counters:
        """One counters for ``states`` (row k: the k-th's), holding their values; each state reads and writes
        its row from now on."""
        counters = cls(len(states))
        for k, state in enumerate(states):
            for name, column in vars(counters).items():
                column[k] = getattr(state, name)
            state._counters, state._row = counters, k
        return counters


class _Column:
    """A LoopState attribute kept in its row of the loop's :class:`Counters` (as a Python number)."""

    def __init__(self, cast):
        self.cast = cast

    def __set_name__(self, _owner, name: str) -> None:
        self.name = name

    def __get__(self, state: LoopState, _owner=None):
        return self.cast(getattr(state._counters, self.name)[state._row])

    def __set__(self, state: LoopState, value) -> None:
        getattr(state._counters, self.name)[state._row] = value


class LoopState:
    step = _Column(int)  # env steps taken (the position of the ε and β schedules)
    episode = _Column(int)  # episodes finished
    episode_return = _Column(float)  # of the episode in progress
    episode_length = _Column(int)
    epsilon = _Column(float)  # ε of this step (not checkpointed: each step draws its own)
    ended = _Column(bool)  # an episode was counted at this step (not checkpointed: a step's own)
    beta = _Column(float)  # β of this step's batches (not checkpointed: set where a step trains)
    quiet_until = _Column(int)  # (not checkpointed: 0 after a load, and tasks.end_step asks Periodic)

    def __init__(self) -> None:
        self._counters, self._row = Counters(1), 0
        self.recent_returns: deque = _window()
        self.recent_successes: deque = _window()  # goal envs (info["is_success"]) only
        self.target_syncs = 0  # target-network copies (period and episode-end syncs alike)
        self.return_sum = 0.0  # of every episode's return
        self.return_peak: float | None = None  # best mean of FINAL_RETURN_WINDOW consecutive episodes so far

    def finish_episode(self, ep_return: float, success: float | None) -> None:
        """Count a finished episode and start the next one."""
        self.episode += 1
        self.recent_returns.append(ep_return)
        self.return_sum += ep_return
        if len(self.recent_returns) == FINAL_RETURN_WINDOW:
            mean = float(np.mean(self.recent_returns))
            self.return_peak = mean if self.return_peak is None else max(self.return_peak, mean)
        if success is not None:
            self.recent_successes.append(float(success))
        self.episode_return, self.episode_length = 0.0, 0

    @property
    def recent_return_mean(self) -> float | None:
        return float(np.mean(self.recent_returns)) if self.recent_returns else None

    def return_measures(self) -> dict[str, float | None]:
        """:func:`return_measures` of every episode so far, from the running sum and peak (None each before the
        first episode ends)."""
        if not self.episode:
            return {"return_auc": None, "return_peak": None, "return_drop": None}
        final = float(np.mean(self.recent_returns))
        peak = self.return_peak if self.episode >= FINAL_RETURN_WINDOW else final
        return {"return_auc": self.return_sum / self.episode, "return_peak": peak, "return_drop": peak - final}

    @property
    def recent_success_rate(self) -> float | None:
        return float(np.mean(self.recent_successes)) if self.recent_successes else None

    def state_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "episode": self.episode,
            "episode_return": self.episode_return,
            "episode_length": self.episode_length,
            "recent_returns": list(self.recent_returns),
            "recent_successes": list(self.recent_successes),
            "target_syncs": self.target_syncs,
            "return_sum": self.return_sum,
            "return_peak": self.return_peak,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.step, self.episode = int(state["step"]), int(state["episode"])
        self.episode_return, self.episode_length = state["episode_return"], state["episode_length"]
        self.recent_returns = _window(state["recent_returns"])
        self.recent_successes = _window(state["recent_successes"])
        self.target_syncs = int(state["target_syncs"])
        self.return_sum = float(state["return_sum"])
        self.return_peak = None if state["return_peak"] is None else float(state["return_peak"])
