"""The one training loop every replay kind and env shares: act, step, store, learn, update priorities,
evaluate, log. It never branches on the replay kind: every memory has the same face."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from per_cli.config import Config, ConfigError
from per_cli.envs import frame_stack_of, make_env
from per_cli.replay import Batch, ReplayMemory, make_replay, resolve_config
from per_cli.replay.storage.frames import mirror_frames
from per_cli.rl.agent import DQNAgent, UpdateResult
from per_cli.rl.losses import TDLoss
from per_cli.rl.networks import resolve_network
from per_cli.rl.schedules import BatchBeta, LinearSchedule, beta_schedule, epsilon_schedule
from per_cli.rundir.logger import RunLogger
from per_cli.train.loop.evaluation import Evaluator
from per_cli.train.loop.failures import Alive
from per_cli.train.loop.lockstep import run_members
from per_cli.train.loop.loop_state import LoopState
from per_cli.train.loop.periodic import Periodic
from per_cli.train.loop.reporting import episode_record, replay_state
from per_cli.train.loop.run_record import RunRecord
from per_cli.train.loop.setup import NoProgress, ProgressSink, reports_episodes, resolve_device
from per_cli.train.loop.steps import Steps
from per_cli.train.loop.stopping import check_logged, check_update, diverged
from per_cli.train.loop.trainer_state import Checkpointed
from per_cli.train.loop.transitions import StoreRule
from per_cli.train.measures.metrics import RunningMeans, totals
from per_cli.train.measures.update_window import UpdateWindow


class Trainer(Checkpointed, RunRecord):
    """Builds env, agent and memory from a config (before any run directory exists, so bad input leaves
    nothing behind), then ``run(run_dir)`` trains and logs."""

    def __init__(self, cfg: Config, device: str | None = None, progress: ProgressSink | None = None, env: Any = None):
        """``env``: the training env, when a cohort made it (its seed's EnvPool env); else ``make_env``'s."""
        self.cfg = cfg = resolve_config(cfg)  # (the kind's α, β0 and params filled in: what config.yaml shows)
        self.device = resolve_device(device or cfg.device)
        self.progress = progress or NoProgress()
        self.periodic = Periodic(cfg)
        torch.manual_seed(cfg.seed)
        self.env = env if env is not None else make_env(cfg.env, cfg.seed)
        if not isinstance(self.env.action_space, gym.spaces.Discrete):
            raise ConfigError(
                f"env.id: {cfg.env.id} has a {type(self.env.action_space).__name__} action space; "
                "DQN needs a Discrete one"
            )
        obs_space = self.env.observation_space
        if resolve_network(cfg.agent.network, obs_space.shape) != "cnn":
            # small networks (MLPs, MinAtar's): thread hand-offs cost more than they save (2 threads made a
            # MinAtar forward pass 40x slower on a busy 2-core machine)
            torch.set_num_threads(1)
        self.td_loss = TDLoss.from_config(cfg)  # agent.loss, or LAP's or PAL's for those replay kinds
        self.agent = DQNAgent(cfg.agent, obs_space.shape, int(self.env.action_space.n), self.device, self.td_loss)
        self.memory: ReplayMemory = make_replay(
            cfg, obs_space.shape, obs_space.dtype, cfg.seed, env=self.env, frame_stack=frame_stack_of(cfg.env)
        )
        if cfg.replay.device_frames:  # the frames on the training device too: batches gathered there
            mirror_frames(self.memory.storage, self.device)
        self.action_rng = np.random.default_rng(np.random.SeedSequence([cfg.seed, 0xAC7]))
        t = cfg.train
        self.epsilon = (
            epsilon_schedule(t.eps_start, t.eps_end, t.eps_fraction, t.total_steps)
            if t.eps_decay_steps is None
            else LinearSchedule(t.eps_start, t.eps_end, t.eps_decay_steps)
        )
        self.beta = beta_schedule(cfg.replay.beta0, cfg.replay.beta_end_step, t.total_steps)
        # β per sampled batch (replay.beta_increment), else None: β by step (the loop's ``due``: beta_step)
        self.batch_beta = (
            None if cfg.replay.beta_increment is None else BatchBeta(cfg.replay.beta0, cfg.replay.beta_increment)
        )
        self.store_rule = StoreRule.from_config(cfg.env)  # what the memory stores of a step (env.done_reward, ...)
        self.learn_from = max(t.learning_starts, cfg.replay.batch_size)
        self.state = LoopState()
        self._env_reports_episodes = reports_episodes(self.env)
        self.evaluator = Evaluator(cfg)
        self._window = UpdateWindow(
            cfg.metrics.correlation_threshold if cfg.metrics.correlation else None,
            iid=cfg.metrics.iid,
            loss=self.td_loss,
            refresh_every=cfg.log.every,
            seed=cfg.seed,
        )
        self._log_means = RunningMeans()
        self._episode_means = RunningMeans()
        self.logger: RunLogger | None = None
        self.run_dir: Path | None = None  # set first thing in begin(), so a failure there is still recorded
        self._obs: Any = None  # the observation in hand (``obs``)
        self._held: tuple[np.ndarray, int] | None = None  # (the loop's array of observations, this member's row)
        self._start_time = time.time()
        self._initial_td = cfg.replay.initial_priority == "td_error"
        self.done = False  # the budget is spent (end_step)
        self.error: BaseException | None = None  # why the run failed (record_failure)
        self.alive = (Alive(1), 0)  # (the mask of the loop that runs it, its row: lockstep.run_members sets them)
        self.summary: dict[str, Any] = {}
        self._base: dict[str, Any] = {}
        self._closed = False
        # set by resume (per train --resume)
        self._resumed_from: int | None = None
        self._elapsed_before = 0.0
        self._min_fill = 0  # transitions the memory must hold before learning (refill after a resume)

    # ------------------------------------------------------------------------------------------------------
    # the run

    def run(self, run_dir: Path) -> dict[str, Any]:
        """Train until the budget is spent; always leaves a ``summary.json``: completed; failed (re-raised; a
        divergence names its likely cause); or interrupted by Ctrl-C or SIGTERM (raised as RunInterrupted,
        resumable from the latest checkpoint). A cohort of one: :func:`~per_cli.train.loop.lockstep.run_members`
        runs the loop's phases (:class:`~per_cli.train.loop.steps.Steps`) over a list of one, so ``--seed 1`` and
        ``--seeds 1`` run the same code."""
        summary = run_members([self], [run_dir], Steps([self]))[0]
        if self.error is not None:
            raise self.error
        return summary

    # collecting one env step at ``state.step``, in phases that the loop runs for all members at once
    # (:class:`~per_cli.train.loop.steps.Steps`: ε's draw, the greedy actions, the env steps, the counters); a
    # member's own calls: step_env where the loop does not step the envs itself, [set_insertion_priority], and
    # end_episode where its episode ended

    @property
    def obs(self) -> Any:
        """The observation in hand (begin, end_collects, a resume): this member's row of the loop's array of
        them where the loop holds one (``hold_obs``)."""
        return self._obs if self._held is None else self._held[0][self._held[1]]

    @obs.setter
    def obs(self, value: Any) -> None:
        if self._held is None:
            self._obs = value
            return
        rows, k = self._held
        if type(value) is not np.ndarray or value.dtype != rows.dtype or value.shape != rows.shape[1:]:
            raise TypeError(f"an observation of {getattr(value, 'dtype', type(value))} {np.shape(value)} where the "
                            f"loop holds {rows.dtype} {rows.shape[1:]}: one env's observations must keep their type")
        rows[k] = value

    def hold_obs(self, rows: np.ndarray, k: int) -> None:
        """The observation in hand is row ``k`` of ``rows`` from now on (a cohort's observations, one array that
        its phases read and write whole), starting from the one in hand."""
        rows[k] = self._obs
        self._held = (rows, k)

    def greedy_action(self) -> int:
        """The greedy action for the observation in hand (a member's own engine; a cohort batches these)."""
        return self.agent.greedy_action(self.obs)

    def step_env(self, action: int) -> tuple:
        """Step the env with ``action`` and store the transition; returns what the env returned (``next_obs``,
        ``reward``, ``terminated``, ``truncated``, ``info``)."""
        stepped = self.env.step(action)
        next_obs, reward, terminated, truncated, _ = stepped
        stored_reward, stored_end = self.stored(reward, terminated, truncated)
        self.memory.add(self.obs, action, stored_reward, next_obs, stored_end, truncated)
        return stepped

    def stored(self, reward: float, terminated: bool, truncated: bool) -> tuple[float, bool]:
        """(reward, terminated) as the memory stores this step's (``env.done_reward``,
        ``env.truncation_terminates``: :mod:`per_cli.train.loop.transitions`); the episode's return stays the env's."""
        if self.store_rule.identity:
            return reward, terminated
        return self.store_rule.one(reward, terminated, truncated, self.state.episode_return)

    @property
    def inserts_by_td(self) -> bool:
        """``replay.initial_priority: td_error``: a new transition's priority is its own TD error."""
        return self._initial_td

    def insertion_td(self) -> np.ndarray:
        """δ of the transition stored last (a member's own engine; a cohort batches these)."""
        return self.agent.td_errors(self.memory.latest())

    def set_insertion_priority(self, td_errors: np.ndarray) -> None:
        """The new transition's priority from its TD error (``insertion_td``): the seed notebook's scheme, one
        extra forward pass per step."""
        self.memory.update_priorities(self.memory.latest_ids(), td_errors)

    def end_episode(self, info: dict[str, Any]) -> None:
        """The episode ended at this step (the loop counted the step in ``state`` already): logged, and the env
        reset for the next one (``state.ended``: False for an Atari life lost, not a game over)."""
        self.state.ended = self._end_episode(info, self.state.epsilon)
        self.obs, _ = self.env.reset()

    def learning(self) -> bool:
        """Whether learning has begun at this step (hindsight stores transitions when their episode ends, so
        the memory can lag the step count). Once True it stays True: the step and the memory's length only grow
        (the loop stops asking)."""
        step = self.state.step
        return step + 1 >= self.learn_from and len(self.memory) >= self.min_fill

    def sample(self) -> Batch:
        return self.memory.sample(self.cfg.replay.batch_size, self.beta_now)

    @property
    def beta_now(self) -> float:
        """β of the next batch (a cohort draws them with it): this step's, which the loop's ``due`` sets; under
        ``replay.beta_increment`` the next batch's own, from the batches sampled so far (one per update:
        ``agent.updates``, which a checkpoint carries)."""
        if self.batch_beta is not None:
            return self.batch_beta(self.agent.updates + 1)
        return self.state.beta

    @property
    def min_fill(self) -> int:
        """Transitions the memory must hold before ``learning`` (the batch, or a resumed run's refill)."""
        return max(self._min_fill, self.cfg.replay.batch_size)

    @property
    def beta_by_step(self) -> bool:
        """Whether β's position is the step alone (else it may follow the episode count: ``beta_step``)."""
        return self.cfg.train.total_episodes is None or self.cfg.replay.beta_end_step is not None

    # after the agent learned from a batch: check_result, [update_priorities], record_update

    def check_result(self, result: UpdateResult) -> None:
        """The update's loss and mean Q must be finite (else the run diverged)."""
        check_update(result.loss, result.q_mean, self.state.step + 1, self.cfg.agent)

    def update_priorities(self, batch: Batch, result: UpdateResult) -> None:
        """The batch's new priorities from the update's TD errors (a cohort batches these)."""
        try:
            self.memory.update_priorities(batch.indices, result.td_errors)
        except FloatingPointError:  # the memory checks every TD error
            raise diverged("a TD error became non-finite", self.state.step + 1, self.cfg.agent) from None

    @property
    def window(self) -> UpdateWindow:
        """The updates' measures since the last log or episode end."""
        return self._window

    def record_update(self, batch: Batch, result: UpdateResult) -> None:
        """The update measured into the window (``UpdateWindow.add``); logged every ``log.every`` updates."""
        self._window.add(batch, result, self.memory)
        self.log_point()

    def log_point(self) -> None:
        """The window's measures logged where the update just made is a log point (every ``log.every``
        updates). A cohort that keeps its members' measured updates itself calls it for those at a log point."""
        if self.agent.updates % self.cfg.log.every == 0:
            beta = self.state.beta if self.batch_beta is None else self.batch_beta(self.agent.updates)  # (this batch's)
            self._log_updates(self.state.step + 1, beta)

    def end_step(self, learning: bool) -> None:
        """The rest of a step: target syncs (by period once ``learning``, at an episode's end), the budget check
        (``done``), periodic evaluation, progress and checkpoint; then the step counter moves on. The loop calls
        it where a task may fall (``state.quiet_until``, an episode's end) and moves the others' steps itself."""
        s = self.state
        step = s.step
        after = step + 1
        cfg, t, due = self.cfg, self.cfg.train, self.periodic
        s.quiet_until = due.next_due(after + 1)  # (the steps before it carry no task: the loop moves them on)
        if learning and due.syncs(after):
            self._sync_target()
        if s.ended and cfg.agent.target_update_on_episode_end:
            self._sync_target()
        if due.ends(after) or (t.total_episodes is not None and s.episode >= t.total_episodes):
            s.step, self.done = after, True  # the final evaluation, progress line and checkpoint: finish()
            return
        if due.evaluates(after):
            self._evaluate(after)
        if due.reports(after):
            self.progress.update(after, self._progress_info(self.epsilon(step)))
        s.step = after  # the step to run next
        if due.checkpoints(after):
            self._checkpoint(self.logger.run_dir)

    def checkpoints_now(self) -> bool:
        """Whether this step's ``end_step`` writes a checkpoint (under ``train.priority_lag`` the loop reads the
        last update's results first)."""
        return self.periodic.checkpoints(self.state.step + 1)

    # ------------------------------------------------------------------------------------------------------
    # phases

    def _sync_target(self) -> None:
        self.agent.sync_target()
        self.state.target_syncs += 1

    def beta_step(self, step: int | np.ndarray, episode: int | np.ndarray | None = None) -> int | np.ndarray:
        """The position on β's schedule at ``step`` with ``episode`` episodes finished (this run's count by
        default; both may be int64 arrays: the loop's, for all members at once). It is defined over total_steps;
        under an episode budget the run may end sooner, so the schedule follows whichever budget is further along
        and β reaches 1 at the end."""
        t = self.cfg.train
        if self.beta_by_step:
            return step
        episode = self.state.episode if episode is None else episode
        return np.maximum(step, episode * t.total_steps // t.total_episodes)

    def _flush_window(self) -> None:
        values = self._window.pop(self.memory)
        if values:
            sums = totals(values)  # once for both means
            if not all(math.isfinite(total) for total, _ in sums.values()):  # finite sums: all values finite
                check_logged(values, self.state.step + 1, self.cfg.agent)
            self._log_means.add_totals(sums)
            self._episode_means.add_totals(sums)

    def _log_updates(self, step: int, beta: float) -> None:
        self._flush_window()
        scalars = self._log_means.pop()
        scalars["replay/beta"] = beta
        scalars.update({f"replay/{k}": v for k, v in self.memory.stats().items()})
        self.logger.scalars(scalars, step)

    def replay_state(self, steps: int) -> dict[str, float]:
        """The replay ratio after ``steps`` env steps and the oldest transition's age now (``reporting``)."""
        storage = self.memory.storage
        return replay_state(self.agent.updates, steps, storage.added, storage.oldest_sampleable_id())

    def _end_episode(self, info: dict[str, Any], epsilon: float) -> bool:
        """Log the episode that just ended; False (nothing logged) for an Atari life lost, not a game over."""
        s = self.state
        if self._env_reports_episodes:
            if "episode" not in info:  # a life lost, not a game over: keep counting
                return False
            ep_return, ep_length = float(info["episode"]["r"]), int(info["episode"]["l"])
        else:
            ep_return, ep_length = s.episode_return, s.episode_length
        success = info.get("is_success")
        s.finish_episode(ep_return, success)
        wall = time.time() - self._start_time
        self._flush_window()
        means, replay = self._episode_means.pop(), self.replay_state(s.step + 1)
        scalars, row = episode_record(s, ep_return, ep_length, epsilon, success, wall, means, replay)
        self.logger.scalars(scalars, s.step + 1)
        self.logger.episode(row)
        return True

    def _evaluate(self, log_step: int) -> None:
        self.logger.scalars(self.evaluator.run(self.agent, seed_step=self.state.step), log_step)
