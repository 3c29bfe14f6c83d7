"""A cohort: S runs of one config that differ only in the seed, trained in lockstep in one process.

Each seed is a :class:`~per_cli.train.loop.trainer.Trainer` of its own (env, memory, agent, RNG streams, schedules,
counters, evaluation, run directory), built exactly as its solo run would be; :mod:`per_cli.train.loop.lockstep`
runs them through the one training loop. What the cohort adds (:class:`NumbaBatched`, with the numba engine) is
ONE compiled call over the members for each batched step: the update, the greedy actions and the insertion TD
errors (:class:`~per_cli.rl.engines.cohort.CohortEngine`), and for prioritized and uniform memories the batches
and the priority updates (:class:`~per_cli.replay.cohort.CohortSampling`).
Each member's RNG streams are seeded from its own seed only, and each runs the solo kernel on its own buffers, so
a member of a cohort computes what its solo run computes (tests/train/loop/test_cohort.py checks it bit for bit).

The engine is chosen as for a solo run (``agent.engine: auto`` is numba wherever
:func:`~per_cli.rl.engines.supports` accepts the config). Under the torch engine (CUDA, CNNs, ``engine: torch``)
the members update in one stacked torch call (:class:`~per_cli.rl.engines.stacked.StackedEngine`; equal to their
solo updates to float32 rounding); where that path does not run or does not pay, the members update one after
another, still in lockstep, and :attr:`Cohort.note` says so.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from per_cli.config import Config, ConfigError, to_dict
from per_cli.envs import check_backend, resolve_env_id
from per_cli.envs.pool import make_pooled
from per_cli.replay import Batch
from per_cli.replay.cohort import CohortSampling, stacked_rows, supports
from per_cli.rl.agent import UpdateResult
from per_cli.rl.engines.cohort import CohortEngine
from per_cli.rl.engines.stacked import StackedEngine, stacked_refusal
from per_cli.rl.is_weights import apply_rule
from per_cli.train.loop.cohort_steps import VectorSteps
from per_cli.train.loop.lockstep import Solo, _guard, run_members
from per_cli.train.loop.setup import ProgressSink
from per_cli.train.loop.trainer import Trainer
from per_cli.train.measures.update_measures import measure_rows

_TRANSITION = ("obs", "actions", "rewards", "next_obs", "terminated")  # the engine's argument order
# seeds in one cohort: each member holds an env, a network and a memory, checked against RAM by preflight; past
# this many, the process's own overhead per member (generators, buffers) decides, which nothing checks
MAX_COHORT = 10_000
_SEEDS = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$")


def parse_seeds(text: str) -> list[int]:
    """``1-100``, ``1,5,9`` or a mix (``1-3,7``) as a list of distinct seeds in the order given."""
    compact = text.replace(" ", "")
    if not _SEEDS.match(compact):
        raise ConfigError(f"--seeds: {text!r} is not a seed list; write e.g. 1-100 or 1,5,9")
    parts = [(int(low), int(high or low)) for low, _, high in (part.partition("-") for part in compact.split(","))]
    for low, high in parts:
        if high < low:
            raise ConfigError(f"--seeds: the range {low}-{high} is empty; write LOW-HIGH with LOW <= HIGH")
    count = sum(high - low + 1 for low, high in parts)  # counted before any list is made (1-10^12 is one line)
    if count > MAX_COHORT:
        raise ConfigError(
            f"--seeds: {text!r} names {count:,} seeds; a cohort trains at most {MAX_COHORT:,} in one process "
            "(train several cohorts, or use per grid)"
        )
    seeds: list[int] = []
    for low, high in parts:
        seeds.extend(range(low, high + 1))
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"--seeds: {text!r} names a seed twice; each seed is one run")
    return seeds


def cohort_configs(cfg: Config, seeds: Sequence[int]) -> list[Config]:
    """One config per seed, identical otherwise."""
    return [dataclasses.replace(cfg, seed=int(seed)) for seed in seeds]


def _check_same_but_seed(cfgs: Sequence[Config]) -> None:
    if not cfgs:
        raise ConfigError("--seeds: a cohort needs at least one seed")
    first = {**to_dict(cfgs[0]), "seed": None}
    for cfg in cfgs[1:]:
        other = {**to_dict(cfg), "seed": None}
        if other != first:
            keys = sorted(k for k in first if first[k] != other.get(k))
            raise ConfigError(f"a cohort's runs differ only in the seed; seed {cfg.seed} differs in {', '.join(keys)}")
    seeds = [c.seed for c in cfgs]
    if len(set(seeds)) != len(seeds):
        raise ConfigError("--seeds: each seed of a cohort is one run; a seed appears twice")


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
        self._last = (members, loss, q_mean, td)
        # (rows of td by iteration, the floats of loss and q_mean in one call each: cheaper per member)
        return [UpdateResult(*row) for row in zip(td, loss.tolist(), q_mean.tolist(), strict=True)]

    def measure(self, members: Sequence[Trainer], batches: Sequence[Batch], results) -> list:
        """The members' update measures in one pass over the update's stacked arrays
        (:func:`~per_cli.train.measures.update_measures.measure_rows`) where they are a cohort draw's and the last
        update's; else (or should it raise) each member's window measures its own."""
        stacked, last = stacked_rows(batches), self._last
        if stacked is None or last is None or last[0] is not members:
            return super().measure(members, batches, results)
        windows = [m.window for m in members]
        held = self._episodes_held(members) if windows[0].iid else None
        try:
            arrays = (stacked[6], stacked[7], stacked[0], stacked[8])  # weights, ages, obs, episodes
            rows = measure_rows(windows, last[3], *arrays, held, last[1], last[2])
        except Exception:  # noqa: BLE001 - each window measures its own updates (and reports its own error)
            rows = None
        return rows if rows is not None else super().measure(members, batches, results)

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
        last = self._last
        if last is not None and last[0] is members:  # the update's stacked TD errors; the draw's stacked ids
            ids, tds = lambda: _stacked_ids(batches), last[3]  # noqa: E731
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


class Cohort:
    """S members built from ``cfgs`` (one config per seed, equal but for the seed), before any run directory
    exists; ``run(run_dirs)`` trains them and returns their summaries. ``progress`` follows the first member."""

    def __init__(self, cfgs: Sequence[Config], device: str | None = None, progress: ProgressSink | None = None):
        _check_same_but_seed(cfgs)
        envs: list = [None] * len(cfgs)
        if cfgs[0].env.backend == "envpool":  # one EnvPool for the seeds, each member its own env in it
            check_backend(cfgs[0].env)
            envs = make_pooled(resolve_env_id(cfgs[0].env.id), [c.seed for c in cfgs], cfgs[0].env.max_episode_steps)
        self.members = [
            Trainer(cfg, device, progress if i == 0 else None, envs[i]) for i, cfg in enumerate(cfgs)
        ]
        self.note: str | None = None
        if self.members[0].agent.engine != "numba" and len(self.members) > 1:
            refusal = stacked_refusal([m.agent for m in self.members])
            if refusal is not None:
                reason = self.members[0].agent.engine_note or "agent.engine is torch"
                self.note = f"the cohort's members update one at a time with the torch engine ({reason}; {refusal})"

    def resume(self, run_dirs: Sequence[Path]) -> None:
        """Load each member's latest checkpoint from its run directory (ConfigError if one cannot continue)."""
        for member, run_dir in zip(self.members, run_dirs, strict=True):
            member.resume(run_dir)

    def learner(self) -> Solo:
        """The batched steps over the members (numba, or the stacked torch update), else each member's own."""
        if self.note is not None:
            return Solo()
        if self.members[0].agent.engine != "numba":  # (a torch cohort of one: its own update, bit for bit)
            return StackedTorch(self.members) if len(self.members) > 1 else Solo()
        return NumbaBatched(self.members)

    def run(self, run_dirs: Sequence[Path]) -> list[dict[str, Any]]:
        """Train every member into its run directory; a member that fails is recorded ``failed`` in its own
        summary while the others go on. Ctrl-C or SIGTERM: every unfinished member is recorded ``interrupted``
        and RunInterrupted is raised."""
        if len(run_dirs) != len(self.members):
            raise ValueError(f"{len(self.members)} members but {len(run_dirs)} run directories")
        return run_members(self.members, run_dirs, self.learner())
