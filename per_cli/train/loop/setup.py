"""What a run needs before its loop: its member's data built from the config (:func:`build_member`), the device,
the run's default name, and whether the env reports its own episodes."""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from per_cli.config import Config
from per_cli.envs import env_label, frame_stack_of, make_env
from per_cli.errors import ConfigError
from per_cli.replay import make_replay, replay_label, resolve_config
from per_cli.replay.storage.frames import mirror_frames
from per_cli.rl.engines import make_agent
from per_cli.rl.losses import TDLoss
from per_cli.rl.networks import resolve_network
from per_cli.rl.schedules import BatchBeta, LinearSchedule
from per_cli.train.loop.evaluation import Evaluator
from per_cli.train.loop.member_data import MemberData
from per_cli.train.loop.periodic import Periodic
from per_cli.train.loop.progress import ProgressSink, SilentProgress
from per_cli.train.loop.transitions import StoreRule
from per_cli.train.measures.update_window import UpdateWindow


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device: cuda was asked for but no CUDA GPU is visible; use --device cpu or auto")
    return torch.device(name)


def default_run_name(cfg: Config) -> str:
    return f"{env_label(cfg.env.id)}__{replay_label(cfg.replay)}__s{cfg.seed}__{time.strftime('%Y%m%d-%H%M%S')}"


def reports_episodes(env: gym.Env) -> bool:
    """True when a RecordEpisodeStatistics wrapper sits in the chain (Atari: under the life-loss wrapper,
    so only whole games are reported); otherwise the loop counts returns itself."""
    while isinstance(env, gym.Wrapper):
        if isinstance(env, gym.wrappers.RecordEpisodeStatistics):
            return True
        env = env.env
    return False


def build_member(
    cfg: Config, device: str | None = None, progress: ProgressSink | None = None, env: Any = None
) -> MemberData:
    """A member's data from its config: env, agent, memory, generators, schedules, evaluator and window, before any
    run directory exists (bad input leaves nothing behind). ``env``: the training env, when a cohort made it (its
    seed's EnvPool env); else ``make_env``'s. torch is seeded first: what the agent and memory draw follows from the
    seed alone."""
    cfg = resolve_config(cfg)
    device_ = resolve_device(device or cfg.device)
    torch.manual_seed(cfg.seed)
    env = env if env is not None else make_env(cfg.env, cfg.seed)  # (a Discrete action space: preflight's probe_env)
    obs_space = env.observation_space
    if resolve_network(cfg.agent.network, obs_space.shape) != "cnn":
        # small networks (MLPs, MinAtar's): thread hand-offs cost more than they save
        torch.set_num_threads(1)
    td_loss = TDLoss.from_config(cfg)  # agent.loss, or LAP's or PAL's for those replay kinds (the agent keeps it)
    agent = make_agent(cfg.agent, obs_space.shape, int(env.action_space.n), device_, td_loss)
    memory = make_replay(cfg, obs_space.shape, obs_space.dtype, cfg.seed, env=env, frame_stack=frame_stack_of(cfg.env))
    if cfg.replay.device_frames:  # the frames on the training device too: batches gathered there
        mirror_frames(memory.storage, device_)
    t, r = cfg.train, cfg.replay
    eps_steps = int(t.eps_fraction * t.total_steps) if t.eps_decay_steps is None else t.eps_decay_steps
    return MemberData(
        cfg=cfg,
        device=device_,
        progress=progress or SilentProgress(),
        periodic=Periodic(cfg),
        env=env,
        agent=agent,
        memory=memory,
        action_rng=np.random.default_rng(np.random.SeedSequence([cfg.seed, 0xAC7])),
        epsilon=LinearSchedule(t.eps_start, t.eps_end, eps_steps),
        # β anneals from β0 to 1 by replay.beta_end_step, the end of training by default (Schaul et al. 2016)
        beta=LinearSchedule(r.beta0, 1.0, t.total_steps if r.beta_end_step is None else r.beta_end_step),
        batch_beta=None if r.beta_increment is None else BatchBeta(r.beta0, r.beta_increment),
        store_rule=StoreRule(cfg.env.done_reward, cfg.env.done_reward_except_return, cfg.env.truncation_terminates),
        learn_from=max(t.learning_starts, cfg.replay.batch_size),
        evaluator=Evaluator(cfg),
        window=UpdateWindow(
            cfg.metrics.correlation_threshold if cfg.metrics.correlation else None,
            iid=cfg.metrics.iid,
            refresh_every=cfg.log.every,
            seed=cfg.seed,
        ),
        env_reports_episodes=reports_episodes(env),
    )
