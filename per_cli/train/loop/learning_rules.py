"""When a member learns and the β its batches are drawn with: pure reads of a
:class:`~per_cli.train.loop.member_data.MemberData`'s config, counters and agent, which the learning phases
(:mod:`~per_cli.train.loop.learning`) and the loop (:mod:`~per_cli.train.loop.lockstep`) call."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from per_cli.config import Config

if TYPE_CHECKING:
    from per_cli.train.loop.member_data import MemberData


def learning(d: MemberData) -> bool:
    """Whether ``d`` learns at this step: from its ``learn_from`` step, once its memory holds a batch (or a resumed
    run's refill; hindsight stores transitions when their episode ends, so the memory can lag the step count).
    Once True it stays True: the step and the memory's length only grow (the loop stops asking)."""
    return d.state.step + 1 >= d.learn_from and len(d.memory) >= max(d.refill, d.cfg.replay.batch_size)


def beta_position(cfg: Config) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """The position on β's schedule as a function of (step, episodes finished) (int64 arrays: the loop's, for all
    members at once), chosen once per run. β's schedule is defined over total_steps; under an episode budget
    (without ``replay.beta_end_step``) the run may end sooner, so the position follows whichever budget is further
    along and β reaches 1 at the end; else it is the step."""
    total_steps, total_episodes = cfg.train.total_steps, cfg.train.total_episodes
    if total_episodes is None or cfg.replay.beta_end_step is not None:
        return lambda step, _episode: step
    return lambda step, episode: np.maximum(step, episode * total_steps // total_episodes)
