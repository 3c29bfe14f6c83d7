"""The Atari pipeline: ALE games through Gymnasium's own preprocessing, plus the few wrappers it lacks."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from per_cli.config import ConfigError, EnvConfig

# FrameStackObservation pads the first stack of an episode; "zero" keeps episodes apart (a stack never
# repeats the reset frame as if it had been seen before), and it is what the frame storage reproduces.
STACK_PADDING = "zero"
# ALE's minimal action sets begin NOOP, then FIRE in the games that have it (and another action after it)
NOOP, FIRE = 0, 1


class LifeLossTerminal(gym.Wrapper):
    """End an episode when a life is lost, without resetting the game (Mnih et al. 2015)."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.lives = 0
        self.game_over = True

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.game_over = terminated or truncated
        lives = self.env.unwrapped.ale.lives()
        if 0 < lives < self.lives:
            terminated = True
        self.lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if self.game_over or seed is not None or options:
            obs, info = self.env.reset(seed=seed, options=options)
        else:
            obs, _, terminated, truncated, info = self.env.step(0)  # step past the lost life
            if terminated or truncated:
                obs, info = self.env.reset()
        self.game_over = False
        self.lives = self.env.unwrapped.ale.lives()
        return obs, info


class UnitRewardClip(gym.RewardWrapper):
    """Rewards clipped to [-1, 1] (Mnih et al. 2015), as a plain float."""

    def reward(self, reward):
        return float(min(max(reward, -1.0), 1.0))


class FireOnReset(gym.Wrapper):
    """Press FIRE (then the next action) after every reset, for games that wait for it to start (those with FIRE
    as action 1: :func:`has_fire_action`, which ``make_atari_env`` asks before wrapping)."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        for action in (FIRE, FIRE + 1):
            obs, _, terminated, truncated, info = self.env.step(action)
            if terminated or truncated:  # a game that ends while starting: start over, without firing
                return self.env.reset()
        return obs, info


def has_fire_action(env: gym.Env) -> bool:
    meanings = env.unwrapped.get_action_meanings()
    return len(meanings) > FIRE + 1 and meanings[FIRE] == "FIRE"


def make_atari_env(env_id: str, cfg: EnvConfig, *, evaluation: bool = False) -> gym.Env:
    """Build the pipeline above for any ALE id (``ALE/<Game>-v5`` or ``<Game>NoFrameskip-v4``)."""
    a = cfg.atari
    kwargs: dict[str, Any] = {
        "frameskip": 1,  # AtariPreprocessing skips frames (and max-pools the last two)
        "repeat_action_probability": a.sticky_actions,
        "full_action_space": a.full_action_space,
        "obs_type": "grayscale",  # AtariPreprocessing reads the screen itself; this only saves an RGB copy
        **cfg.kwargs,
    }
    try:
        env = gym.make(env_id, **kwargs)
    except TypeError as exc:
        raise ConfigError(f"env.kwargs: {env_id} rejected {sorted(cfg.kwargs)} ({exc})") from None
    if a.noop_max > 0 and env.unwrapped.get_action_meanings()[NOOP] != "NOOP":
        raise ConfigError(f"env.atari.noop_max: {env_id} has no NOOP action {NOOP}; set env.atari.noop_max=0")
    env = gym.wrappers.AtariPreprocessing(
        env,
        noop_max=a.noop_max,
        frame_skip=a.frame_skip,
        screen_size=a.screen_size,
        terminal_on_life_loss=False,  # ours keeps the game going after a lost life; Gymnasium's resets it
        grayscale_obs=True,
        scale_obs=False,  # uint8 frames; the network scales them on the device
    )
    if cfg.max_episode_steps is not None:
        env = gym.wrappers.TimeLimit(env, max_episode_steps=cfg.max_episode_steps)
    env = gym.wrappers.RecordEpisodeStatistics(env)
    if a.terminal_on_life_loss and not evaluation:
        env = LifeLossTerminal(env)
    if a.fire_reset and has_fire_action(env):
        env = FireOnReset(env)
    if a.clip_rewards and not evaluation:
        env = UnitRewardClip(env)
    return gym.wrappers.FrameStackObservation(env, a.frame_stack, padding_type=STACK_PADDING)
