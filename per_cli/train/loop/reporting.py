"""What the loop reports: each finished episode's scalars and metrics.csv row, the updates' measures at a log
point, an evaluation's scalars, the progress line's numbers, and the results part of summary.json: functions over
a :class:`~per_cli.train.loop.member_data.MemberData`, each writing or reading that member's."""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from per_cli.rundir.logger import EPISODE_REPLAY_COLUMNS, EPISODE_UPDATE_COLUMNS
from per_cli.train.loop.stopping import check_logged
from per_cli.train.measures.metrics import totals

if TYPE_CHECKING:
    from per_cli.train.loop.member_data import MemberData


def flush_window(d: MemberData) -> None:
    """The window's measures since its last pop into the running means of the next log point and episode row
    (checked finite first: a non-finite one is a divergence)."""
    values = d.window.pop(d.memory)
    if values:
        sums = totals(values)  # once for both means
        if not all(math.isfinite(total) for total, _ in sums.values()):  # finite sums: all values finite
            check_logged(values, d.state.step + 1, d.cfg.agent)
        d.log_means.add_totals(sums)
        d.episode_means.add_totals(sums)


def replay_state_of(d: MemberData, steps: int) -> dict[str, float]:
    """The replay's state after ``steps`` env steps (Fedus et al. 2020): the replay ratio (gradient updates per
    env transition so far), the age of the oldest sampleable transition (ids added since it) and of the oldest
    policy (updates since it was added, at the ratio so far: their "age of the oldest policy", capacity × ratio
    once the memory is full)."""
    storage = d.memory.storage
    ratio = d.agent.updates / max(steps, 1)
    age = max(storage.added - 1 - storage.oldest_sampleable_id(), 0)
    return {"replay/replay_ratio": ratio, "replay/oldest_age": age, "replay/oldest_policy_age": age * ratio}


def end_episode(d: MemberData, info: dict[str, Any]) -> None:
    """``d``'s episode ended at this step (the loop counted the step in ``d.state`` already): counted and logged
    (TensorBoard scalars and the metrics.csv row at ``state.step + 1``, with the means of the update scalars since
    the previous episode, blank without updates), ``state.ended`` True; for an Atari life lost, not a game over,
    nothing is logged and ``state.ended`` is False. The loop then resets the env for the next one."""
    s = d.state
    if d.env_reports_episodes:
        if "episode" not in info:  # a life lost, not a game over: keep counting
            s.ended = False
            return
        ep_return, ep_length = float(info["episode"]["r"]), int(info["episode"]["l"])
    else:
        ep_return, ep_length = s.episode_return, s.episode_length
    success = info.get("is_success")
    s.finish_episode(ep_return, success)
    wall = time.time() - d.start_time
    flush_window(d)
    means, replay = d.episode_means.pop(), replay_state_of(d, s.step + 1)
    step, epsilon = s.step + 1, s.epsilon
    scalars = {
        "charts/episodic_return": ep_return,
        "charts/episodic_length": ep_length,
        "charts/epsilon": epsilon,
        "charts/SPS": step / max(wall, 1e-9),
    }
    if success is not None:
        scalars["charts/success_rate"] = float(success)
    scalars.update(replay)
    row = {
        "step": step,
        "episode": s.episode,
        "return": ep_return,
        "length": ep_length,
        "wall_time": round(wall, 3),
        "epsilon": round(epsilon, 6),
        "success": None if success is None else int(bool(success)),
    }
    row.update({col: means.get(tag) for tag, col in EPISODE_UPDATE_COLUMNS.items()})
    row.update({col: round(replay[tag], 6) for tag, col in EPISODE_REPLAY_COLUMNS.items()})
    d.logger.scalars(scalars, step)
    d.logger.episode(row)
    s.ended = True


def log_point(d: MemberData) -> None:
    """A log point (the update just made is one: every ``log.every`` updates; the learning phases call it for the
    members at one): the means of the updates' measures since the last one, β and the memory's stats."""
    flush_window(d)
    scalars = d.log_means.pop()
    # β of the batch sampled last: this step's, or the batch's own under replay.beta_increment
    scalars["replay/beta"] = d.state.beta if d.batch_beta is None else d.batch_beta(d.agent.updates)
    scalars.update({f"replay/{k}": v for k, v in d.memory.stats().items()})
    d.logger.scalars(scalars, d.state.step + 1)


def evaluate(d: MemberData, log_step: int) -> None:
    d.logger.scalars(d.evaluator.run(d.agent, d.state.step, d.stop), log_step)


def progress_of(d: MemberData, epsilon: float, final: bool = False) -> dict[str, Any]:
    """The numbers of ``d``'s progress line now, at ε ``epsilon``; ``final``: the run's last line, after its final
    evaluation."""
    s = d.state
    return {
        "sps": s.step / max(time.time() - d.start_time, 1e-9),
        "epsilon": epsilon,
        "episodes": s.episode,
        "recent_return": s.recent_return_mean,
        "eval_return": d.evaluator.return_mean,
        "success_rate": s.recent_success_rate,
        "final": final,
    }


def results_of(d: MemberData) -> dict[str, Any]:
    """summary.json's results of ``d`` now: budgets used, speed, the replay's final state (:func:`replay_state_of`),
    the last training episodes, the whole run's (auc, peak, drop) and the last evaluation."""
    s, evaluator = d.state, d.evaluator
    wall = time.time() - d.start_time
    replay = replay_state_of(d, s.step)
    recent = list(s.recent_returns)
    return {
        "replay_ratio": replay["replay/replay_ratio"],
        "oldest_age": replay["replay/oldest_age"],
        "oldest_policy_age": replay["replay/oldest_policy_age"],
        "total_steps": s.step,
        "episodes": s.episode,
        "updates": d.agent.updates,
        "target_syncs": s.target_syncs,
        "wall_time_s": round(wall, 3),
        "steps_per_second": round(s.step / max(wall, 1e-9), 2),
        "final_return_mean": float(np.mean(recent)) if recent else None,
        "final_return_episodes": len(recent),  # what the mean is over: the last 20, or every episode if fewer
        "final_return_std": float(np.std(recent)) if recent else None,
        **s.return_measures(),  # return_auc, return_peak, return_drop (loop_state.return_measures)
        "final_success_rate": s.recent_success_rate,
        "eval_return_mean": evaluator.return_mean,
        "eval_return_std": evaluator.return_std,
        "eval_success_rate": evaluator.success_rate,
    }
