"""How the members' networks act and learn in the loop: the one part of a step that depends on the engine.

One of these serves every call (greedy actions, insertion TD errors, updates), chosen by ``agent.engine``:
:class:`CompiledUpdates` (numba: one compiled call over the members' own buffers, so each value is what the
member's own engine computes), :class:`StackedUpdates` (torch, two members or more that the stacked engine serves:
one batched call, equal to their own calls up to float32 rounding), :class:`TorchUpdates` (each member's agent)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from per_cli.replay import Batch, kind_spec
from per_cli.replay.cohort import stacked_rows
from per_cli.replay.gather import Gathered
from per_cli.replay.storage.ring import BatchArrays
from per_cli.rl.engines.cohort import CohortEngine
from per_cli.rl.engines.stacked import StackedEngine
from per_cli.rl.results import Pending, Scores, UpdateResults
from per_cli.train.loop.failures import guard

if TYPE_CHECKING:
    from per_cli.train.loop.member_data import MemberData


def updates_for(members: Sequence[MemberData], stacked: bool = True) -> Updates:
    """The members' networks: :class:`CompiledUpdates` under the numba engine, else :class:`StackedUpdates`
    (``stacked``: the stacked torch engine serves them, where there are two or more) or :class:`TorchUpdates`. The
    members' agents share one engine (one config); the choice is made here, once."""
    engines = {m.agent.engine for m in members}
    if len(engines) != 1:
        raise ValueError(f"a cohort's members run one engine, not {sorted(engines)}")
    (engine,) = engines
    if engine == "numba":
        return CompiledUpdates(members)
    return StackedUpdates(members) if stacked and len(members) > 1 else TorchUpdates(members)


def reads_host_states(members: Sequence[MemberData], updates: Updates) -> bool:
    """Whether the loop reads a batch's states (``obs``, ``next_obs``) on the host; chosen once, before the gather is
    built. They go unread only where the frames live on the agent's device (``replay.device_frames``: setup mirrored
    them there), the agents learn from their batches' device stacks, the kind scores no batch, and no window
    measures states (correlation count, i.i.d. measures)."""
    on_device = all(m.cfg.replay.device_frames for m in members) and updates.reads_device_stacks
    scored = any(kind_spec(m.cfg.replay.kind).scores for m in members)
    measured = any(m.window.threshold is not None or m.window.iid for m in members)
    return not on_device or scored or measured


class CompiledUpdates:
    """The members' numba engines, each call ONE compiled call over them (members by position: ``which``)."""

    reads_device_stacks = False  # (its batches are host arrays)

    def __init__(self, members: Sequence[MemberData]):
        self.engine = CohortEngine([m.agent.numba_engine for m in members])

    def greedy(self, which: list[int], members: Sequence[MemberData], obs: np.ndarray) -> list[int | None]:
        """The members' greedy actions for their observations in hand (``obs``, row k member k's)."""
        return self.engine.greedy(which, obs).tolist()

    def insertion_td(self, which: list[int], members: Sequence[MemberData], latest: Gathered) -> np.ndarray:
        """δ of each member's newest transition (``latest``: one gather of them), row k member k's, a 1-row
        array."""
        new = latest.arrays
        td = self.engine.td_errors(which, new.obs, new.actions, new.rewards, new.next_obs, new.terminated)
        return td.reshape(len(members), 1)

    def score(self, which: list[int], members: Sequence[MemberData], arrays: BatchArrays) -> Scores:
        """The networks' opinion of the members' stacked batches, nothing learnt: one compiled call."""
        return self.engine.score(which, arrays.obs, arrays.actions, arrays.rewards, arrays.next_obs, arrays.terminated)

    def learn(self, which: list[int], members: Sequence[MemberData], batches: Sequence[Batch]) -> UpdateResults:
        """One update call over the draw's stacked arrays (those rows of it, where some members left)."""
        b = stacked_rows(batches)
        results = self.engine.update(which, b.obs, b.actions, b.rewards, b.next_obs, b.terminated, b.weights)
        for member in members:
            member.agent.updates += 1
        return results


class StackedUpdates:
    """The members' torch agents as one :class:`~per_cli.rl.engines.stacked.StackedEngine`: their greedy actions,
    insertion TD errors, scores and updates each ONE batched call over the members ``which`` (equal to each agent's
    own to float32 rounding)."""

    reads_device_stacks = False  # (it stacks the host arrays)

    def __init__(self, members: Sequence[MemberData]):
        self.engine = StackedEngine([m.agent for m in members])

    def greedy(self, which: list[int], members: Sequence[MemberData], obs: np.ndarray) -> list[int | None]:
        return self.engine.greedy(which, obs)

    def insertion_td(self, which: list[int], members: Sequence[MemberData], latest: Gathered) -> np.ndarray:
        return self.engine.td_errors(which, latest.arrays)

    def score(self, which: list[int], members: Sequence[MemberData], arrays: BatchArrays) -> Scores:
        return self.engine.score(which, arrays)

    def learn(self, which: list[int], members: Sequence[MemberData], batches: Sequence[Batch]) -> UpdateResults:
        return self.engine.learn(which, batches)


class TorchUpdates:
    """The members' torch agents, each its own (a run of one; members the stacked engine does not serve: the
    cohort's note says why): acting, insertion TD errors, scores and updates each agent's own call on its row."""

    reads_device_stacks = True  # (each agent's batch carries its frames' device stacks, where kept)

    def __init__(self, members: Sequence[MemberData]):
        self._wait = all(m.cfg.train.priority_lag == 0 for m in members)  # (lagged: each read an update later)

    def greedy(self, which: list[int], members: Sequence[MemberData], obs: np.ndarray) -> list[int | None]:
        """Each agent's greedy action for its row of ``obs`` (None for a member that failed)."""
        return [guard(m, m.agent.greedy_action, obs[k]) for k, m in enumerate(members)]

    def insertion_td(self, which: list[int], members: Sequence[MemberData], latest: Gathered) -> list:
        """Each agent's δ of its newest transition (its row of ``latest``, as ``memory.latest()``), a 1-row array
        (None for a member that failed)."""
        return [guard(m, m.agent.td_errors, _row_batch(latest, k)) for k, m in enumerate(members)]

    def score(self, which: list[int], members: Sequence[MemberData], arrays: BatchArrays) -> Scores:
        """The networks' opinion of the members' stacked batches, nothing learnt: each agent's own ``score`` of
        its row, stacked."""
        rows = [m.agent.score(Batch(*(a[k] for a in arrays))) for k, m in enumerate(members)]
        return Scores(*(np.concatenate([getattr(r, f) for r in rows]) for f in Scores._fields))

    def learn(
        self, which: list[int], members: Sequence[MemberData], batches: Sequence[Batch]
    ) -> UpdateResults | Pending:
        """Each agent's own update, row k member k's; under ``train.priority_lag`` each is read when first asked
        (:class:`~per_cli.rl.results.Pending`)."""
        own = [m.agent.learn(b, self._wait) for m, b in zip(members, batches, strict=True)]
        return UpdateResults.rows(own) if self._wait else Pending(own)


Updates = CompiledUpdates | StackedUpdates | TorchUpdates


def _row_batch(gathered: Gathered, k: int) -> Batch:
    """Row ``k`` of a gather over the seed axis as a member's own batch (its device stacks too, where kept)."""
    batch = Batch(*(array[k] for array in gathered.arrays))
    if gathered.device is not None:
        batch.device_stacks = gathered.device[k]
    return batch
