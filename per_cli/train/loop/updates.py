"""How the members' networks act and learn in the loop: the one part of a step that depends on the engine.

The loop's phases (:class:`~per_cli.train.loop.steps.Steps`) are written once, over S >= 1 members; what they ask
of the networks (greedy actions, the TD errors of new transitions, an update from each member's batch) goes
through one of these, chosen by the members' engine (``agent.engine``):

* :class:`CompiledUpdates` (numba): ONE compiled call over the members
  (:class:`~per_cli.rl.engines.cohort.CohortEngine`), running the solo kernels on each member's own buffers, so
  every value is the one the member's own engine computes;
* :class:`TorchUpdates` (torch: CNNs, CUDA, ``engine: torch``): one stacked torch update over two members or more
  (:class:`~per_cli.rl.engines.stacked.StackedEngine`, equal to their own updates to float32 rounding) where that
  path serves them, else each member's own agent; acting and insertion TD errors are each member's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from per_cli.replay import Batch
from per_cli.replay.cohort import CohortSampling, stacked_rows
from per_cli.replay.storage.ring import BatchArrays
from per_cli.rl.engines.cohort import CohortEngine
from per_cli.rl.engines.stacked import StackedEngine
from per_cli.rl.results import Pending, Scores, UpdateResults
from per_cli.train.loop.failures import guard

if TYPE_CHECKING:
    from per_cli.train.loop.member import Member as Trainer  # (the face of a member the phases use)

_TRANSITION = ("obs", "actions", "rewards", "next_obs", "terminated")  # the engine's argument order
_FIELDS = (*_TRANSITION, "weights")  # an update's


def updates_for(members: Sequence[Trainer], stacked: bool = True) -> CompiledUpdates | TorchUpdates:
    """The members' networks: :class:`CompiledUpdates` under the numba engine, else :class:`TorchUpdates`
    (``stacked``: the stacked torch update serves them, where there are two or more)."""
    if members[0].agent.engine == "numba":
        return CompiledUpdates(members)
    return TorchUpdates(members, stacked and len(members) > 1)


class CompiledUpdates:
    """The members' numba engines, each call ONE compiled call over them (members by position: ``which``)."""

    def __init__(self, members: Sequence[Trainer]):
        self.engine = CohortEngine([m.agent.numba_engine for m in members])

    def greedy(self, which: list[int], members: Sequence[Trainer], obs: np.ndarray | None = None) -> list[int | None]:
        """The members' greedy actions for their observations in hand (``obs``: those, where the loop holds them
        as one array)."""
        return self.engine.greedy(which, [m.obs for m in members] if obs is None else obs).tolist()

    def insertion_td(self, which: list[int], members: Sequence[Trainer], sampling: CohortSampling | None) -> tuple:
        """(δ of each member's newest transition: row k member k's, a 1-row array; their ids where ``sampling``
        gathered the transitions in one call, else None)."""
        if sampling is not None:
            *rows, ids = sampling.latest(which)
            return self.engine.td_errors(which, *rows).reshape(len(members), 1), ids
        rows = [m.memory.latest_rows() for m in members]
        td = self.engine.td_errors(which, *([r[key] for r in rows] for key in _TRANSITION))
        return [td[k : k + 1] for k in range(len(members))], None

    def score(self, which: list[int], members: Sequence[Trainer], arrays: BatchArrays) -> Scores:
        """The networks' opinion of the members' stacked batches, nothing learnt: one compiled call."""
        return self.engine.score(which, arrays.obs, arrays.actions, arrays.rewards, arrays.next_obs, arrays.terminated)

    def learn(self, which: list[int], members: Sequence[Trainer], batches: Sequence[Batch]) -> UpdateResults:
        """One update call; the batches of a cohort draw go in as its stacked arrays, any others are stacked."""
        stacked = stacked_rows(batches)
        if stacked is not None:
            b = Batch(*stacked)  # (the draw's arrays, named)
            results = self.engine.update_stacked(which, b.obs, b.actions, b.rewards, b.next_obs, b.terminated,
                                                 b.weights)  # fmt: skip
        else:
            results = self.engine.update(which, *([getattr(b, f) for b in batches] for f in _FIELDS))
        for member in members:
            member.agent.updates += 1
        return results


class TorchUpdates:
    """The members' torch agents: acting and insertion TD errors each member's own; the update one stacked call
    (``stacked``) or each member's own."""

    def __init__(self, members: Sequence[Trainer], stacked: bool):
        self.engine = StackedEngine([m.agent for m in members]) if stacked else None
        self._wait = members[0].cfg.train.priority_lag == 0  # (lagged: each result read an update later)

    def greedy(self, which: list[int], members: Sequence[Trainer], obs: np.ndarray | None = None) -> list[int | None]:
        return [guard(m, m.greedy_action) for m in members]

    def insertion_td(self, which: list[int], members: Sequence[Trainer], sampling: CohortSampling | None) -> tuple:
        return [guard(m, m.insertion_td) for m in members], None

    def score(self, which: list[int], members: Sequence[Trainer], arrays: BatchArrays) -> Scores:
        """The networks' opinion of the members' stacked batches, nothing learnt: each agent's own ``score`` of
        its row, stacked."""
        rows = [m.agent.score(Batch(*(a[k] for a in arrays))) for k, m in enumerate(members)]
        return Scores(*(np.concatenate([getattr(r, f) for r in rows]) for f in Scores._fields))

    def learn(self, which: list[int], members: Sequence[Trainer], batches: Sequence[Batch]) -> UpdateResults | Pending:
        """The members' results; under ``train.priority_lag`` each agent's own update is read when first asked
        (:class:`~per_cli.rl.results.Pending`)."""
        if self.engine is not None:
            return self.engine.learn(which, batches)
        own = [m.agent.learn(b, self._wait) for m, b in zip(members, batches, strict=True)]
        return UpdateResults.rows(own) if self._wait else Pending(own)
