"""What the loop's phases ask of a member: the face :mod:`~per_cli.train.loop.steps` and
:mod:`~per_cli.train.loop.updates` see, as a Protocol in a leaf module (of the loop only the leaf ``failures``
imported), so that the phases type their members without importing the trainer that runs them (no import cycle,
TYPE_CHECKING ones included). :class:`~per_cli.train.loop.trainer.Trainer` is the one implementation."""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from per_cli.config import Config
from per_cli.replay import ReplayMemory
from per_cli.rl.agent import DQNAgent
from per_cli.rl.schedules import BatchBeta
from per_cli.train.loop.failures import AliveRow
from per_cli.train.measures.update_window import UpdateWindow


class Member(Protocol):
    """One seed's run as the phases see it: its data (config, env, memory, agent, generator, schedules, counters
    row, window, error/done) and its own calls at its events."""

    cfg: Config
    env: Any
    memory: ReplayMemory
    agent: DQNAgent
    action_rng: np.random.Generator
    epsilon: Any  # ε's schedule: epsilon(step)
    beta: Any  # β's schedule by step: beta(step), beta.many(steps)
    batch_beta: BatchBeta | None
    store_rule: Any  # StoreRule (per_cli.train.loop.transitions)
    state: Any  # LoopState: this member's row of the loop's counters
    window: UpdateWindow
    error: BaseException | None
    done: bool
    alive: AliveRow  # the loop's alive mask and this member's row
    obs: np.ndarray | None  # the observation in hand: its row of the loop's array (hold_obs)

    @property
    def beta_now(self) -> float: ...
    def hold_obs(self, rows: np.ndarray, k: int) -> None: ...
    def end_episode(self, info: dict[str, Any]) -> None: ...
    def learning(self) -> bool: ...
    def beta_step(self, step: Any, episode: Any = None) -> Any: ...
    def log_point(self) -> None: ...
    def end_step(self, learning: bool) -> None: ...
    def record_failure(self, exc: BaseException) -> None: ...
    def close(self) -> None: ...
