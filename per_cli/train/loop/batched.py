"""The loop's batched steps over S >= 1 members: what runs ONE call for all of them, for a cohort and for a solo run
alike (a solo run is a cohort of one: :func:`learner_for`).

:class:`NumbaBatched` (the numba engine): one compiled call over the members for the update, the greedy actions and
the insertion TD errors (:class:`~per_cli.rl.engines.cohort.CohortEngine`), and for memories of vector states the
batches and priority updates (:class:`~per_cli.replay.cohort.CohortSampling`), each member on its own buffers and
generators, so its values do not depend on who else is in the call. :class:`StackedTorch` (the torch engine, two
members or more): one stacked torch update; acting and insertion TD errors stay each member's own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from per_cli.replay import Batch
from per_cli.replay.cohort import CohortSampling, stacked_rows, supports
from per_cli.rl.agent import UpdateResult
from per_cli.rl.engines.cohort import CohortEngine
from per_cli.rl.engines.stacked import StackedEngine
from per_cli.rl.is_weights import apply_rule
from per_cli.train.loop.cohort_steps import StackedResults, VectorSteps
from per_cli.train.loop.lockstep import Solo, _guard
from per_cli.train.measures.update_measures import measure_rows

if TYPE_CHECKING:
    from per_cli.train.loop.trainer import Trainer

_TRANSITION = ("obs", "actions", "rewards", "next_obs", "terminated")  # the engine's argument order


def learner_for(members: Sequence[Trainer], stacked: bool = True) -> Solo:
    """The batched steps of ``members``: :class:`NumbaBatched` under the numba engine (for a solo run too: the
    same calls over a list of one), :class:`StackedTorch` for two torch members or more (``stacked``: that path
    serves them), else each member's own (:class:`~per_cli.train.loop.lockstep.Solo`)."""
    if members[0].agent.engine == "numba":
        return NumbaBatched(members)
    return StackedTorch(members) if stacked and len(members) > 1 else Solo()


class NumbaBatched(VectorSteps):
    """The loop's batched steps for members under the numba engine: each ONE compiled call over the members
    (:class:`~per_cli.rl.engines.cohort.CohortEngine`), running the solo kernels on each member's own buffers,
    so every value is the one the member's own engine computes."""

    def __init__(self, members: Sequence[Trainer]):
        self.engine = CohortEngine([m.agent.numba_engine for m in members])
        memories = [m.memory for m in members]  # prioritized or uniform: one compiled draw (else each its own)
        super().__init__(members, CohortSampling(memories) if all(map(supports, memories)) else None)
        self._inserted: tuple | None = None  # (how many members, ids, δ) of the last insertion_td's gather

    def weigh(self, members: Sequence[Trainer], batches: Sequence[Batch]) -> None:
        """The loss's IS-weight rule on the cohort draw's stacked weights in one call (row by row, the same values
        as each batch's own), where the batches are that draw's own arrays; else batch by batch."""
        rule = members[0].cfg.replay.is_weights
        stacked = stacked_rows(batches) if rule != "memory_max" else None
        if stacked is not None and stacked is batches[0].rows[0]:  # (the draw's arrays, not a gathered copy)
            apply_rule(stacked[6], rule)
        else:
            super().weigh(members, batches)

    def learn(self, members: Sequence[Trainer], batches: Sequence[Batch]) -> list[UpdateResult]:
        """One update call; the batches of a cohort draw go in as its stacked arrays (no per-member stacking),
        any others are stacked."""
        stacked = stacked_rows(batches)
        if stacked is not None:
            td, loss, q_mean = self.engine.update_stacked(self._which(members), *stacked[:5], stacked[6])
        else:
            td, loss, q_mean = self.engine.update(
                self._which(members),
                [b.obs for b in batches], [b.actions for b in batches], [b.rewards for b in batches],
                [b.next_obs for b in batches], [b.terminated for b in batches], [b.weights for b in batches],
            )  # fmt: skip
        for member in members:
            member.agent.updates += 1
        # (rows of td by iteration, the floats of loss and q_mean in one call each: cheaper per member)
        rows = [UpdateResult(*row) for row in zip(td, loss.tolist(), q_mean.tolist(), strict=True)]
        return StackedResults(rows, loss, q_mean, td)

    def measure(self, members: Sequence[Trainer], batches: Sequence[Batch], results) -> list:
        """The members' update measures in one pass over the update's stacked arrays
        (:func:`~per_cli.train.measures.update_measures.measure_rows`) where the batches are a cohort draw's and
        ``results`` this learner's :class:`StackedResults`; else (or should it raise) None each: each member's
        window measures its own update with the same function (``UpdateWindow.add``), one update at a time."""
        stacked = stacked_rows(batches)
        if stacked is None or not isinstance(results, StackedResults):
            return super().measure(members, batches, results)
        windows = [m.window for m in members]
        held = self._episodes_held(members) if windows[0].iid else None
        try:
            arrays = (stacked[6], stacked[7], stacked[0], stacked[8])  # weights, ages, obs, episodes
            return measure_rows(windows, results.td, *arrays, held, results.loss, results.q_mean)
        except Exception:  # noqa: BLE001 - each window measures its own updates (and reports its own error)
            return super().measure(members, batches, results)

    def _episodes_held(self, members: Sequence[Trainer]) -> list[int] | np.ndarray:
        """Each member's ``memory.episodes_held()``: in one call where the cohort sampling holds the memories."""
        if self.sampling is None:
            return [m.memory.episodes_held() for m in members]
        return self.sampling.episodes_held(self._which(members))

    def sample(self, members: Sequence[Trainer]) -> list[Batch | None]:
        """The batches of the members whose memory the cohort sampling draws, in one call; the others' (and
        any whose draw raised: the error is its own) from each member's memory."""
        sampling = self.sampling
        if sampling is None:
            return super().sample(members)
        which, size = self._which(members), members[0].cfg.replay.batch_size
        drawn = sampling.sample(which, size, [m.beta_now for m in members])
        out: list[Batch | None] = list(drawn)
        for k, batch in enumerate(drawn):
            if batch is None:  # the draw raised: repeated alone to raise the member's error
                out[k] = _guard(members[k], sampling.repeat_failed, which[k])
        return out

    def insert_priorities(self, members: Sequence[Trainer], td_errors: Sequence[np.ndarray]) -> None:
        ids = lambda: [m.memory.latest_ids() for m in members]  # noqa: E731
        inserted, self._inserted = self._inserted, None
        if inserted is not None and inserted[0] == len(members):  # (a subset of those, in order: all of them)
            ids, td_errors = inserted[1], inserted[2]
        self._priorities(members, ids, td_errors, lambda m, k: _guard(m, m.set_insertion_priority, td_errors[k]))

    def update_priorities(self, members: Sequence[Trainer], batches: Sequence[Batch], results) -> None:
        ids, tds = lambda: [b.indices for b in batches], [r.td_errors for r in results]  # noqa: E731
        if isinstance(results, StackedResults):  # the update's stacked TD errors; the draw's stacked ids
            ids, tds = lambda: _stacked_ids(batches), results.td  # noqa: E731
        self._priorities(members, ids, tds, lambda m, k: _guard(m, m.update_priorities, batches[k], results[k]))

    def _priorities(self, members, ids: Callable[[], list], td_errors, own: Callable[[Trainer, int], None]) -> None:
        """New priorities of the members' transitions ``ids()`` in one compiled call; ``own(member, k)`` is the
        member's own update, run where the call cannot serve (its result: the member's own error)."""
        finite = None
        if self.sampling is not None and members:
            finite = self.sampling.update_priorities(self._which(members), ids, td_errors)
        for k, member in enumerate(members):
            if finite is None or not finite[k]:
                own(member, k)

    def greedy(self, members: Sequence[Trainer]) -> list[int]:
        return self.engine.greedy(self._which(members), [m.observation for m in members]).tolist()

    def insertion_td(self, members: Sequence[Trainer]) -> list[np.ndarray] | np.ndarray:
        """The δ of each member's newest transition (row k: member k's, a 1-row array). With a cohort sampling,
        the transitions come from one compiled gather and their ids are kept for ``insert_priorities``."""
        which = self._which(members)
        if self.sampling is not None:
            *rows, ids = self.sampling.latest(which)
            td = self.engine.td_errors(which, *rows).reshape(len(members), 1)
            self._inserted = (len(members), ids, td)
            return td
        rows = [m.memory.latest_rows() for m in members]
        td = self.engine.td_errors(which, *([r[key] for r in rows] for key in _TRANSITION))
        return [td[k : k + 1] for k in range(len(members))]


def _stacked_ids(batches: Sequence[Batch]) -> np.ndarray | list[np.ndarray]:
    """The batches' ids (``indices``) as one (members, batch) array where they are rows of one cohort draw."""
    stacked = stacked_rows(batches)
    return stacked[5] if stacked is not None else [b.indices for b in batches]


class StackedTorch(Solo):
    """The loop's update for members under the torch engine: ONE stacked torch call over the members
    (:class:`~per_cli.rl.engines.stacked.StackedEngine`); acting and insertion TD errors stay each member's own."""

    def __init__(self, members: Sequence[Trainer]):
        self.engine = StackedEngine([m.agent for m in members])
        self.index = {id(m): i for i, m in enumerate(members)}

    def learn(self, members: Sequence[Trainer], batches: Sequence[Batch]) -> list[UpdateResult]:
        return self.engine.learn([self.index[id(m)] for m in members], batches)
