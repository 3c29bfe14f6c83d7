"""Hindsight Experience Replay (Andrychowicz et al. 2017): goal relabelling for goal-conditioned envs.

Under ``replay.her_strategy`` an episode waits in a buffer; at its end each transition is stored as it happened and
with ``replay.her_k`` copies whose desired goal is one the agent achieved (``final``, ``future``, ``episode``,
``random``: docs/hindsight.md), reward and terminal flag recomputed by the env. Every copy gets its own priority.
The env gives its goals' places through ``env.unwrapped.goal_layout()`` (:class:`GoalLayout`), so replay needs
nothing of envs."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, Protocol

import numpy as np

from per_cli.errors import ConfigError
from per_cli.replay.storage.rows import Rows, joined
from per_cli.replay.writers.base import Writer


class GoalLayout(Protocol):
    """Where the goals sit in a flat observation, and the env's reward for any goal (vectorised over leading axes,
    goals along the last one); with ``terminate_on_success`` a relabelled transition that reaches its new goal is
    terminal, as the env's own episodes are."""

    achieved: slice
    desired: slice
    compute_reward: Callable[[np.ndarray, np.ndarray], np.ndarray]
    terminate_on_success: bool
    compute_success: Callable[[np.ndarray, np.ndarray], np.ndarray]


class _Step(NamedTuple):
    """A transition of the episode in progress, buffered until the episode ends."""

    obs: np.ndarray
    action: int
    reward: float
    next_obs: np.ndarray
    terminated: bool
    truncated: bool


def goal_layout_of(env) -> GoalLayout:
    """The env's :class:`GoalLayout`, or a ``ConfigError`` naming what is missing."""
    layout = getattr(getattr(env, "unwrapped", env), "goal_layout", None)
    if layout is None:
        name = getattr(getattr(env, "spec", None), "id", type(env).__name__)
        raise ConfigError(
            f"replay.her_strategy: relabelling needs a goal-conditioned env with goal_layout() (e.g. bitflip); "
            f"{name} has none (set replay.her_strategy: off)"
        )
    return layout()


class HindsightWriter(Writer):
    """Buffers an episode and stores it, with relabelled copies, at its end (``add`` is the memory's).

    ``strategy`` and ``k`` are ``replay.her_strategy`` (not ``off``) and ``replay.her_k`` as the config schema checks
    them; ``storage`` is read only by the ``random`` strategy (achieved goals of stored transitions); ``pending``
    counts the running episode's transitions, which are not sampleable yet."""

    def __init__(
        self,
        layout: GoalLayout,
        strategy: str = "future",
        k: int = 4,
        rng: np.random.Generator | None = None,
        storage=None,
    ):
        self.layout = layout
        self.strategy = strategy
        self.k = k
        self.her_rng = rng if rng is not None else np.random.default_rng()
        self.storage = storage
        self._episode: list[_Step] = []
        self.episodes = 0
        self.relabelled = 0

    @property
    def pending(self) -> int:
        """Transitions of the running episode: received, not stored yet."""
        return len(self._episode)

    def add(self, rows: Rows) -> Rows:
        """Buffer the transitions ``rows`` (this writer's member's); at an episode's end, the rows to store: the
        episode as it happened, each step followed by its relabelled copies (none before its end)."""
        out = []
        for k in range(rows.which.shape[0]):
            step = _Step(
                np.array(rows.obs[k], copy=True),
                int(rows.actions[k]),
                float(rows.rewards[k]),
                np.array(rows.next_obs[k], copy=True),
                bool(rows.terminated[k]),
                bool(rows.truncated[k]),
            )
            self._episode.append(step)
            if step.terminated or step.truncated:
                out.append(self.end_episode(int(rows.which[k])))
        return joined(out, rows)

    def end_episode(self, member: int) -> Rows:
        """The buffered episode's rows to store (``which``: ``member``), each step followed by its relabelled
        copies; the episode's last row (its last copy) ends it."""
        obs, actions, rewards, next_obs, terminated, truncated = map(np.array, zip(*self._episode, strict=True))
        goals = self.relabel_goals(next_obs[:, self.layout.achieved])  # (T, copies, G)
        t_len, copies = goals.shape[:2]
        # the copies: the same transition with the desired goal swapped, reward and terminal flag recomputed;
        # column 0 of each step is the step as it happened
        new_obs, new_next, new_terminated, new_truncated = (
            np.repeat(column[:, None], copies + 1, axis=1) for column in (obs, next_obs, terminated, truncated)
        )
        new_obs[:, 1:, self.layout.desired] = goals
        new_next[:, 1:, self.layout.desired] = goals
        achieved_next = next_obs[:, None, self.layout.achieved]
        new_rewards = np.empty((t_len, copies + 1), dtype=np.float32)
        new_rewards[:, 0] = rewards
        new_rewards[:, 1:] = np.broadcast_to(self.layout.compute_reward(achieved_next, goals), (t_len, copies))
        if self.layout.terminate_on_success:
            success = np.broadcast_to(self.layout.compute_success(achieved_next, goals), (t_len, copies))
            new_terminated[:, 1:] = success
        new_truncated[:, 1:] &= ~new_terminated[:, 1:]
        ends = np.zeros((t_len, copies + 1), dtype=np.bool_)
        ends[-1, -1] = True
        n = t_len * (copies + 1)
        self.relabelled += t_len * copies
        self.episodes += 1
        self._episode.clear()
        states = (n, *obs.shape[1:])
        return Rows(np.full(n, member, dtype=np.int64), new_obs.reshape(states),
                    np.repeat(actions, copies + 1).astype(np.int64), new_rewards.reshape(n), new_next.reshape(states),
                    new_terminated.reshape(n), new_truncated.reshape(n), ends.reshape(n))  # fmt: skip

    def relabel_goals(self, achieved: np.ndarray) -> np.ndarray:
        """Goals for each step of an episode whose achieved goals after each step are ``achieved`` (T, G):
        returns (T, copies, G)."""
        t_len = achieved.shape[0]
        rng = self.her_rng
        if self.strategy == "final":
            return np.repeat(achieved[-1][None, None], t_len, axis=0)
        if self.strategy == "future":
            # step t may take s_{t+1} .. s_T: achieved rows t .. T-1
            idx = np.arange(t_len)[:, None] + (rng.random((t_len, self.k)) * (t_len - np.arange(t_len))[:, None])
            return achieved[idx.astype(np.int64)]
        if self.strategy == "episode":
            return achieved[rng.integers(0, t_len, (t_len, self.k))]
        # random: achieved goals anywhere in the memory so far, or in this episode
        stored = self.storage.size
        picks = rng.integers(0, stored + t_len, (t_len, self.k))
        out = np.empty((t_len, self.k, achieved.shape[1]), dtype=achieved.dtype)
        from_memory = picks < stored
        out[~from_memory] = achieved[picks[~from_memory] - stored]
        if from_memory.any():
            out[from_memory] = self.storage.next_obs[picks[from_memory]][:, self.layout.achieved]
        return out

    def stats(self) -> dict[str, float]:
        return {"her_relabelled": float(self.relabelled)}

    def state_dict(self) -> dict:
        return {
            "episode": [tuple(e) for e in self._episode],  # (plain tuples: the checkpoint's reader takes them)
            "her_rng": self.her_rng.bit_generator.state,
            "episodes": self.episodes,
            "relabelled": self.relabelled,
        }

    def load_state_dict(self, state: dict) -> None:
        self._episode = [_Step(*e) for e in state["episode"]]
        self.her_rng.bit_generator.state = state["her_rng"]
        self.episodes, self.relabelled = int(state["episodes"]), int(state["relabelled"])


def make_hindsight(replay_cfg, storage, env, seed: int) -> HindsightWriter:
    """The relabelling writer of ``replay_cfg`` (``her_strategy`` not ``off``); ``env`` supplies the goal
    layout."""
    if env is None:
        raise ConfigError("replay.her_strategy: relabelling needs the env's goal layout (make_replay(..., env=env))")
    layout = goal_layout_of(env)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x4E12]))
    return HindsightWriter(layout, replay_cfg.her_strategy, replay_cfg.her_k, rng, storage)
