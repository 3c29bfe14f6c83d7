"""What the loop reports: each finished episode's scalars and metrics.csv row, the updates' measures at a log
point, an evaluation's scalars, the progress line's numbers, and the results part of summary.json. The
functions over a :class:`~per_cli.train.loop.member_data.MemberData` write that member's; the others are pure."""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from per_cli.rundir.logger import EPISODE_REPLAY_COLUMNS, EPISODE_UPDATE_COLUMNS
from per_cli.train.loop.evaluation import Evaluator
from per_cli.train.loop.loop_state import LoopState
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


def log_updates(d: MemberData, step: int, beta: float) -> None:
    """A log point: the means of the updates' measures since the last one, β and the memory's stats."""
    flush_window(d)
    scalars = d.log_means.pop()
    scalars["replay/beta"] = beta
    scalars.update({f"replay/{k}": v for k, v in d.memory.stats().items()})
    d.logger.scalars(scalars, step)


def replay_state_of(d: MemberData, steps: int) -> dict[str, float]:
    """:func:`replay_state` of ``d``'s memory after ``steps`` env steps."""
    storage = d.memory.storage
    return replay_state(d.agent.updates, steps, storage.added, storage.oldest_sampleable_id())


def log_episode(d: MemberData, info: dict[str, Any], epsilon: float) -> bool:
    """Log the episode that just ended (counted in ``d.state``); False (nothing logged) for an Atari life lost,
    not a game over."""
    s = d.state
    if d.env_reports_episodes:
        if "episode" not in info:  # a life lost, not a game over: keep counting
            return False
        ep_return, ep_length = float(info["episode"]["r"]), int(info["episode"]["l"])
    else:
        ep_return, ep_length = s.episode_return, s.episode_length
    success = info.get("is_success")
    s.finish_episode(ep_return, success)
    wall = time.time() - d.start_time
    flush_window(d)
    means, replay = d.episode_means.pop(), replay_state_of(d, s.step + 1)
    scalars, row = episode_record(s, ep_return, ep_length, epsilon, success, wall, means, replay)
    d.logger.scalars(scalars, s.step + 1)
    d.logger.episode(row)
    return True


def end_episode(d: MemberData, info: dict[str, Any]) -> None:
    """``d``'s episode ended at this step (the loop counted the step in ``d.state`` already): logged
    (``state.ended``: False for an Atari life lost, not a game over); the loop then resets the env for the next
    one."""
    d.state.ended = log_episode(d, info, d.state.epsilon)


def log_point(d: MemberData) -> None:
    """The window's measures logged where the update just made is a log point (every ``log.every`` updates; the
    learning phases call it for the members at one)."""
    if d.agent.updates % d.cfg.log.every == 0:
        log_updates(d, d.state.step + 1, d.replay_beta())


def evaluate(d: MemberData, log_step: int) -> None:
    """An evaluation of ``d``'s agent, its scalars logged at ``log_step``."""
    d.logger.scalars(d.evaluator.run(d.agent, d.state.step, d.stop), log_step)


def progress_of(d: MemberData, epsilon: float, final: bool = False) -> dict[str, Any]:
    """:func:`progress_info` of ``d`` now, at ε ``epsilon``."""
    return progress_info(d.state, d.evaluator, epsilon, time.time() - d.start_time, final)


def results_of(d: MemberData) -> dict[str, Any]:
    """:func:`run_results` of ``d`` now."""
    wall = time.time() - d.start_time
    return run_results(d.state, d.evaluator, d.agent.updates, wall, replay_state_of(d, d.state.step))


def replay_state(updates: int, steps: int, added: int, oldest: int) -> dict[str, float]:
    """The replay's state after ``steps`` env steps (Fedus et al. 2020): the replay ratio (gradient updates per
    env transition so far), the age of the oldest sampleable transition (transitions added since: ``added`` ids
    so far, the oldest sampleable ``oldest``) and of the oldest policy (updates since it was added, at the
    ratio so far: their "age of the oldest policy", capacity × ratio once the memory is full)."""
    ratio = updates / max(steps, 1)
    age = max(added - 1 - oldest, 0)
    return {"replay/replay_ratio": ratio, "replay/oldest_age": age, "replay/oldest_policy_age": age * ratio}


def episode_record(
    s: LoopState, ep_return: float, ep_length: int, epsilon: float, success: Any, wall: float,
    update_means: dict[str, float], replay: dict[str, float] | None = None,
) -> tuple[dict[str, float], dict[str, Any]]:  # fmt: skip
    """TensorBoard scalars and the metrics.csv row of the episode just counted in ``s`` (at ``s.step + 1``).
    ``update_means``: the means of the update scalars since the previous episode (blank without updates);
    ``replay``: :func:`replay_state` at the episode's end."""
    step = s.step + 1
    scalars = {
        "charts/episodic_return": ep_return,
        "charts/episodic_length": ep_length,
        "charts/epsilon": epsilon,
        "charts/SPS": step / max(wall, 1e-9),
    }
    if success is not None:
        scalars["charts/success_rate"] = float(success)
    row = {
        "step": step,
        "episode": s.episode,
        "return": ep_return,
        "length": ep_length,
        "wall_time": round(wall, 3),
        "epsilon": round(epsilon, 6),
        "success": None if success is None else int(bool(success)),
    }
    row.update({col: update_means.get(tag) for tag, col in EPISODE_UPDATE_COLUMNS.items()})
    if replay:
        scalars.update(replay)
        row.update({col: round(replay[tag], 6) for tag, col in EPISODE_REPLAY_COLUMNS.items()})
    return scalars, row


def progress_info(s: LoopState, evaluator: Evaluator, epsilon: float, wall: float, final: bool = False) -> dict:
    """The numbers of a progress line; ``final``: the run's last line, after its final evaluation."""
    return {
        "sps": s.step / max(wall, 1e-9),
        "epsilon": epsilon,
        "episodes": s.episode,
        "recent_return": s.recent_return_mean,
        "eval_return": evaluator.return_mean,
        "success_rate": s.recent_success_rate,
        "final": final,
    }


def run_results(
    s: LoopState, evaluator: Evaluator, updates: int, wall: float, replay: dict[str, float] | None = None
) -> dict[str, Any]:
    """summary.json's results: budgets used, speed, the replay's final state (:func:`replay_state`), the last
    training episodes, the whole run's (auc, peak, drop) and the last evaluation."""
    recent = list(s.recent_returns)
    replay = replay or {}
    return {
        "replay_ratio": replay.get("replay/replay_ratio"),
        "oldest_age": replay.get("replay/oldest_age"),
        "oldest_policy_age": replay.get("replay/oldest_policy_age"),
        "total_steps": s.step,
        "episodes": s.episode,
        "updates": updates,
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
