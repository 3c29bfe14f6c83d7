"""A member's data: everything one seed's run holds, as one dataclass that its collaborators take explicitly.

The collaborators are functions over it, one concern each (run_record, trainer_state, reporting, tasks,
learning_rules under :mod:`per_cli.train.loop`); :mod:`~per_cli.train.loop.trainer` builds it and runs it."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch

from per_cli.config import Config
from per_cli.replay import ReplayMemory
from per_cli.rl.agent import DQNAgent
from per_cli.rl.schedules import BatchBeta
from per_cli.rundir.logger import RunLogger
from per_cli.train.loop.alive import Alive, AliveRow
from per_cli.train.loop.evaluation import Evaluator
from per_cli.train.loop.loop_state import LoopState
from per_cli.train.loop.periodic import Periodic
from per_cli.train.loop.progress import ProgressSink
from per_cli.train.loop.stopping import SignalStop
from per_cli.train.loop.transitions import StoreRule
from per_cli.train.measures.metrics import RunningMeans
from per_cli.train.measures.update_window import UpdateWindow


class ObsRow(NamedTuple):
    """Where a member's observation in hand lies: row ``k`` of ``rows``."""

    rows: np.ndarray
    k: int


@dataclass(eq=False, repr=False)  # (identity: the loop keys members by it; its repr would print every buffer)
class MemberData:
    """One seed's run. Built before any run directory exists (``setup.build_member``); the fields after
    ``episode_means`` are its life in the loop: set by ``run_record.begin``, a resume, the loop's phases."""

    cfg: Config  # resolved: the kind's α, β0 and params filled in (what config.yaml shows)
    device: torch.device
    progress: ProgressSink
    periodic: Periodic  # which steps carry a periodic task
    env: Any  # the training env
    agent: DQNAgent
    memory: ReplayMemory
    action_rng: np.random.Generator  # ε-greedy's draws
    epsilon: Any  # ε's schedule: epsilon(step)
    beta: Any  # β's schedule by step
    batch_beta: BatchBeta | None  # β per sampled batch (replay.beta_increment), else None
    store_rule: StoreRule  # what the memory stores of a step (env.done_reward, ...)
    learn_from: int  # the step from which it learns (learning_starts, at least a batch)
    evaluator: Evaluator
    window: UpdateWindow  # the updates' measures since the last log or episode end
    env_reports_episodes: bool  # a RecordEpisodeStatistics wrapper counts the episodes (setup.reports_episodes)
    log_means: RunningMeans = field(default_factory=RunningMeans)  # the window's measures since the last log
    episode_means: RunningMeans = field(default_factory=RunningMeans)  # and since the last episode's end
    state: LoopState = field(default_factory=LoopState)  # the counters: its row of the loop's
    alive: AliveRow = field(default_factory=lambda: AliveRow(Alive(1), 0))  # (the loop's mask, its row: lockstep's)
    stop: SignalStop = field(default_factory=SignalStop)  # (the loop's: the signal its evaluation and failures see)
    run_dir: Path | None = None  # set first thing in begin(), so a failure there is still recorded
    logger: RunLogger | None = None
    start_time: float = field(default_factory=time.time)
    done: bool = False  # the budget is spent (end_step)
    error: BaseException | None = None  # why the run failed (run_record.record_failure)
    summary: dict[str, Any] = field(default_factory=dict)  # the final summary.json
    base: dict[str, Any] = field(default_factory=dict)  # the summary's fields from its start
    closed: bool = False
    resumed_from: int | None = None  # the step of the checkpoint it continues (per train --resume)
    elapsed_before: float = 0.0  # wall time before that checkpoint
    refill: int = 0  # transitions the memory must hold before learning after a resume without its replay
    held: ObsRow | None = None  # the observation in hand: a row of an array (its own, or the loop's: hold_obs)

    @property
    def obs(self) -> np.ndarray | None:
        """The observation in hand (begin, end_collects, a resume; None before the first): a row of the loop's
        array of them once the loop holds it (``hold_obs``), written in place."""
        return None if self.held is None else self.held.rows[self.held.k]

    @obs.setter
    def obs(self, value: Any) -> None:
        if self.held is None:
            self.held = ObsRow(np.array(value)[None], 0)
            return
        rows, k = self.held
        if np.shape(value) != rows.shape[1:]:
            raise ValueError(f"an observation of shape {np.shape(value)} where the env's are {rows.shape[1:]}: one "
                             f"env's observations must keep their shape")  # fmt: skip
        rows[k] = value

    def hold_obs(self, rows: np.ndarray, k: int) -> None:
        """The observation in hand is row ``k`` of ``rows`` from now on (the loop's observations, one array that
        its phases read and write whole; row ``k`` holds this member's already)."""
        self.held = ObsRow(rows, k)
