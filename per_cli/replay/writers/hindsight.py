"""Hindsight Experience Replay (Andrychowicz et al. 2017): goal relabelling for goal-conditioned envs.

``replay.kind: hindsight`` keeps the memory's face (``add(obs, action, reward, next_obs, terminated,
truncated)``, ``sample``, ``update_priorities``) and works at the level of episodes: transitions wait in an
episode buffer, and when the episode ends (terminated or truncated) each one is stored as it happened and,
next to it, ``replay.her_k`` copies whose desired goal is replaced by a goal the agent did achieve
(Algorithm 1 of the paper). The reward and the terminal flag of a copy are recomputed for its new goal by the
env's own reward function. Which goals (``replay.her_strategy``), for the transition at step ``t`` of an
episode of ``T`` steps, with ``s_1 .. s_T`` the states reached after each step:

- ``final``: ``s_T``, the state the episode ended in (one copy: k identical copies would add nothing);
- ``future``: k states drawn uniformly from ``s_{t+1} .. s_T`` (those reached at or after this step);
- ``episode``: k states drawn uniformly from ``s_1 .. s_T``;
- ``random``: k achieved states drawn uniformly from everything stored so far and the current episode.

The stored transitions go through an ordinary storage + sampler (``replay.her_sampler``: ``uniform``,
``prioritized``, ``rank``, ... any registered kind), so HER + PER is the prioritized sampler under this
memory: every copy gets its own priority, entering at the maximum.

The env says where the goals sit in its flat observation through ``env.unwrapped.goal_layout()``, a
:class:`GoalLayout` (bit flipping has one; see ``per_cli/envs/bitflip.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from per_cli.replay.memory import ReplayMemory
from per_cli.replay.samplers import Sampler

HER_STRATEGIES = ("final", "future", "episode", "random")


def _all_equal(achieved: np.ndarray, desired: np.ndarray) -> np.ndarray:
    return np.all(achieved == desired, axis=-1)


@dataclass(frozen=True)
class GoalLayout:
    """Where the goals sit in a flat observation, and the env's reward for any goal.

    ``compute_reward(achieved, desired)`` and ``compute_success(achieved, desired)`` are vectorised over
    leading axes (goals along the last one). With ``terminate_on_success`` a relabelled transition that
    reaches its new goal is terminal, as the env's own episodes are."""

    achieved: slice  # the achieved goal inside an observation (for bit flipping: the state)
    desired: slice  # the desired goal inside an observation
    compute_reward: Callable[[np.ndarray, np.ndarray], np.ndarray]
    terminate_on_success: bool = True
    compute_success: Callable[[np.ndarray, np.ndarray], np.ndarray] = _all_equal


def goal_layout_of(env) -> GoalLayout:
    """The env's :class:`GoalLayout`, or a ``ValueError`` naming what is missing."""
    layout = getattr(getattr(env, "unwrapped", env), "goal_layout", None)
    if layout is None:
        name = getattr(getattr(env, "spec", None), "id", type(env).__name__)
        raise ValueError(
            f"replay.kind: hindsight needs a goal-conditioned env with goal_layout() (e.g. bitflip); {name} has none"
        )
    return layout()


class HindsightMemory(ReplayMemory):
    """A ``ReplayMemory`` whose ``add`` buffers an episode and stores it, with relabelled copies, at its end.

    Sampling, priority updates and statistics are the underlying memory's; ``len`` counts stored transitions
    (an episode still running is not sampleable yet)."""

    def __init__(
        self,
        storage,
        sampler: Sampler,
        layout: GoalLayout,
        strategy: str = "future",
        k: int = 4,
        rng: np.random.Generator | None = None,
    ):
        super().__init__(storage, sampler)
        if strategy not in HER_STRATEGIES:
            raise ValueError(f"replay.her_strategy: {strategy!r} is not one of {', '.join(HER_STRATEGIES)}")
        if k < 1:
            raise ValueError(f"replay.her_k: {k} must be >= 1")
        self.layout = layout
        self.strategy = strategy
        self.k = k
        self.her_rng = rng if rng is not None else np.random.default_rng()
        self._episode: list[tuple] = []
        self.episodes = 0
        self.relabelled = 0

    @property
    def copies(self) -> int:
        """Relabelled copies stored per transition."""
        return 1 if self.strategy == "final" else self.k

    @property
    def pending(self) -> int:
        """Transitions of the running episode, not stored yet."""
        return len(self._episode)

    def add(self, obs, action, reward, next_obs, terminated: bool, truncated: bool) -> None:
        self._episode.append(
            (np.array(obs, copy=True), int(action), float(reward), np.array(next_obs, copy=True),
             bool(terminated), bool(truncated))
        )
        if terminated or truncated:
            self.end_episode()

    def end_episode(self) -> None:
        """Store the buffered episode and its relabelled copies (called by ``add`` at the episode's end)."""
        if not self._episode:
            return
        obs = np.stack([e[0] for e in self._episode])
        actions = [e[1] for e in self._episode]
        rewards = [e[2] for e in self._episode]
        next_obs = np.stack([e[3] for e in self._episode])
        terminated = [e[4] for e in self._episode]
        truncated = [e[5] for e in self._episode]
        goals = self.relabel_goals(next_obs[:, self.layout.achieved])  # (T, copies, G)
        t_len, copies = goals.shape[:2]
        # the copies: the same transition with the desired goal swapped, reward and terminal flag recomputed
        new_obs = np.repeat(obs[:, None], copies, axis=1)
        new_next = np.repeat(next_obs[:, None], copies, axis=1)
        new_obs[..., self.layout.desired] = goals
        new_next[..., self.layout.desired] = goals
        achieved_next = next_obs[:, None, self.layout.achieved]
        new_rewards = np.broadcast_to(self.layout.compute_reward(achieved_next, goals), (t_len, copies))
        success = np.broadcast_to(self.layout.compute_success(achieved_next, goals), (t_len, copies))
        for t in range(t_len):  # the episode's last stored transition (its last copy) ends it
            self._store(obs[t], actions[t], rewards[t], next_obs[t], terminated[t], truncated[t], False)
            for j in range(copies):
                term = bool(success[t, j]) if self.layout.terminate_on_success else terminated[t]
                last = t == t_len - 1 and j == copies - 1
                self._store(new_obs[t, j], actions[t], float(new_rewards[t, j]), new_next[t, j], term,
                            truncated[t] and not term, last)
        self.relabelled += t_len * copies
        self.episodes += 1
        self._episode.clear()

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
        stored = len(self)
        picks = rng.integers(0, stored + t_len, (t_len, self.k))
        out = np.empty((t_len, self.k, achieved.shape[1]), dtype=achieved.dtype)
        from_memory = picks < stored
        out[~from_memory] = achieved[picks[~from_memory] - stored]
        if from_memory.any():
            out[from_memory] = self.storage.next_obs[picks[from_memory]][:, self.layout.achieved]
        return out

    def stats(self) -> dict[str, float]:
        return {**super().stats(), "her_relabelled": float(self.relabelled)}

    def state_dict(self) -> dict:
        state = super().state_dict()
        state["hindsight"] = {
            "episode": list(self._episode),
            "her_rng": self.her_rng.bit_generator.state,
            "episodes": self.episodes,
            "relabelled": self.relabelled,
        }
        return state

    def load_state_dict(self, state: dict) -> None:
        her = state.get("hindsight")
        super().load_state_dict({k: v for k, v in state.items() if k != "hindsight"})
        if her is not None:
            self._episode = [tuple(e) for e in her["episode"]]
            self.her_rng.bit_generator.state = her["her_rng"]
            self.episodes, self.relabelled = int(her["episodes"]), int(her["relabelled"])


def make_hindsight(cfg, storage, sampler: Sampler, env, seed: int) -> HindsightMemory:
    """The hindsight memory for ``cfg`` (the whole run config) over ``storage`` and the sampler of
    ``cfg.replay.her_sampler``; ``env`` supplies the goal layout."""
    from per_cli.config import ConfigError

    if env is None:
        raise ConfigError("replay.kind: hindsight needs the env's goal layout; build it with make_replay(..., env=env)")
    try:
        layout = goal_layout_of(env)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x4E12]))
    r = cfg.replay
    return HindsightMemory(storage, sampler, layout, r.her_strategy, r.her_k, rng)
