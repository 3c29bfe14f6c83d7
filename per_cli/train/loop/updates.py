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
    from per_cli.train.loop.member import Member


def updates_for(
    members: Sequence[Member], sampling: CohortSampling, stacked: bool = True
) -> CompiledUpdates | TorchUpdates:
    """The members' networks: :class:`CompiledUpdates` under the numba engine, else :class:`TorchUpdates`
    (``stacked``: the stacked torch update serves them, where there are two or more)."""
    if members[0].agent.engine == "numba":
        return CompiledUpdates(members, sampling)
    return TorchUpdates(members, stacked and len(members) > 1)


class CompiledUpdates:
    """The members' numba engines, each call ONE compiled call over them (members by position: ``which``). The
    newest transitions come from ``sampling``'s one gather where the memories are rings, else from each memory
    (an MLP over other storages: ``agent.network: mlp`` on MinAtar's packed grids), chosen once."""

    def __init__(self, members: Sequence[Member], sampling: CohortSampling):
        self.engine = CohortEngine([m.agent.numba_engine for m in members])
        self._sampling = sampling
        self._insertion_td = self._gathered_td if sampling.rings else self._own_td

    def greedy(self, which: list[int], members: Sequence[Member], obs: np.ndarray | None = None) -> list[int | None]:
        """The members' greedy actions for their observations in hand (``obs``: those, where the loop holds them
        as one array)."""
        return self.engine.greedy(which, [m.obs for m in members] if obs is None else obs).tolist()

    def insertion_td(self, which: list[int], members: Sequence[Member]) -> tuple:
        """(δ of each member's newest transition: row k member k's, a 1-row array; their ids, or None where each
        memory keeps its own)."""
        return self._insertion_td(which, members)

    def _gathered_td(self, which: list[int], members: Sequence[Member]) -> tuple[np.ndarray, np.ndarray]:
        """(δ of each member's newest transition: row k member k's, a 1-row array; their ids), from one gather."""
        new = self._sampling.latest(which)
        td = self.engine.td_errors(which, new.obs, new.actions, new.rewards, new.next_obs, new.terminated)
        return td.reshape(len(members), 1), new.ids

    def _own_td(self, which: list[int], members: Sequence[Member]) -> tuple[list, None]:
        """(δ of each member's newest transition, each gathered by its memory; None: the ids are each memory's)."""
        rows = [m.memory.latest_rows() for m in members]
        fields = ("obs", "actions", "rewards", "next_obs", "terminated")  # (the engine's argument order)
        td = self.engine.td_errors(which, *([r[key] for r in rows] for key in fields))
        return [td[k : k + 1] for k in range(len(members))], None

    def score(self, which: list[int], members: Sequence[Member], arrays: BatchArrays) -> Scores:
        """The networks' opinion of the members' stacked batches, nothing learnt: one compiled call."""
        return self.engine.score(which, arrays.obs, arrays.actions, arrays.rewards, arrays.next_obs, arrays.terminated)

    def learn(self, which: list[int], members: Sequence[Member], batches: Sequence[Batch]) -> UpdateResults:
        """One update call over the draw's stacked arrays (those rows of it, where some members left)."""
        b = stacked_rows(batches)
        results = self.engine.update_stacked(which, b.obs, b.actions, b.rewards, b.next_obs, b.terminated, b.weights)
        for member in members:
            member.agent.updates += 1
        return results


class TorchUpdates:
    """The members' torch agents: acting and insertion TD errors each member's own; the update one stacked call
    (``stacked``) or each member's own, chosen once."""

    def __init__(self, members: Sequence[Member], stacked: bool):
        self.engine = StackedEngine([m.agent for m in members]) if stacked else None
        self._wait = members[0].cfg.train.priority_lag == 0  # (lagged: each result read an update later)
        self._learn = self._learn_stacked if stacked else self._learn_own

    def greedy(self, which: list[int], members: Sequence[Member], obs: np.ndarray | None = None) -> list[int | None]:
        return [guard(m, m.greedy_action) for m in members]

    def insertion_td(self, which: list[int], members: Sequence[Member]) -> tuple[list, None]:
        return [guard(m, m.insertion_td) for m in members], None

    def score(self, which: list[int], members: Sequence[Member], arrays: BatchArrays) -> Scores:
        """The networks' opinion of the members' stacked batches, nothing learnt: each agent's own ``score`` of
        its row, stacked."""
        rows = [m.agent.score(Batch(*(a[k] for a in arrays))) for k, m in enumerate(members)]
        return Scores(*(np.concatenate([getattr(r, f) for r in rows]) for f in Scores._fields))

    def learn(self, which: list[int], members: Sequence[Member], batches: Sequence[Batch]) -> UpdateResults | Pending:
        """The members' results, row k member k's."""
        return self._learn(which, members, batches)

    def _learn_stacked(self, which: list[int], members: Sequence[Member], batches: Sequence[Batch]) -> UpdateResults:
        return self.engine.learn(which, batches)

    def _learn_own(
        self, which: list[int], members: Sequence[Member], batches: Sequence[Batch]
    ) -> UpdateResults | Pending:
        """Each agent's own update; under ``train.priority_lag`` each is read when first asked
        (:class:`~per_cli.rl.results.Pending`)."""
        own = [m.agent.learn(b, self._wait) for m, b in zip(members, batches, strict=True)]
        return UpdateResults.rows(own) if self._wait else Pending(own)
