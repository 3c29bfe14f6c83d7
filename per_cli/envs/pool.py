"""``env.backend: envpool``: the classic-control envs of a run or a cohort stepped by EnvPool, in one call.

Env i of a pool made with seed s is seeded s + i. Dynamics, rewards, termination and truncation are Gymnasium's
(tests/envs/test_pool.py); the initial states are EnvPool's, so an envpool run is a run of its own (docs/cohorts.md)."""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

# the Gymnasium ids EnvPool implements with Gymnasium's dynamics, and the discrete action spaces per needs
SUPPORTED = ("CartPole-v0", "CartPole-v1", "Acrobot-v1", "MountainCar-v0")


def terminal(env_id: str, obs: np.ndarray) -> bool:
    """Gymnasium's termination condition of ``env_id``, on an observation (from its float32 rounding of the state: only
    a state within a rounding of the threshold could read otherwise)."""
    o = obs.astype(np.float64)
    if env_id.startswith("CartPole"):
        x, _, theta, _ = o
        return bool(abs(x) > 2.4 or abs(theta) > 12 * 2 * np.pi / 360)
    if env_id == "Acrobot-v1":  # -cos(θ1) - cos(θ1 + θ2) > 1
        cos1, sin1, cos2, sin2 = o[:4]
        return bool(-cos1 - (cos1 * cos2 - sin1 * sin2) > 1.0)
    if env_id == "MountainCar-v0":
        position, velocity = o
        return bool(position >= 0.5 and velocity >= 0.0)
    raise ValueError(f"no termination condition for {env_id}")


MIN_ENVPOOL = (1, 2)  # the envpool extra's floor (pyproject.toml): EnvPool 0.8.4 returns wrong arrays under NumPy 2


def import_envpool():
    """The envpool module; ConfigError with the fix when it is not installed or older than :data:`MIN_ENVPOOL`."""
    try:
        import envpool
    except ImportError:
        from per_cli.errors import ConfigError

        raise ConfigError(
            "env.backend envpool: EnvPool is not installed; pip install envpool (or -e '.[envpool]' in a clone), "
            "or use env.backend: gymnasium"
        ) from None
    check_envpool_version(envpool.__version__)
    return envpool


def check_envpool_version(version: str) -> None:
    """ConfigError naming the fix for an EnvPool release older than :data:`MIN_ENVPOOL`: EnvPool 0.8.4 under NumPy 2
    returns every observation's row filled with its first value and every env id 0, and no step raises."""
    release = tuple(int(part) if part.isdigit() else 0 for part in version.split("+")[0].split(".")[:2])
    if release < MIN_ENVPOOL:
        from per_cli.errors import ConfigError

        floor = ".".join(map(str, MIN_ENVPOOL))
        raise ConfigError(
            f"env.backend envpool: EnvPool {version} is installed and per needs {floor} or newer (EnvPool 0.8.4 "
            f"steps wrongly under NumPy 2); pip install -U 'envpool>={floor}', or use env.backend: gymnasium"
        )


class _Pool:
    """One EnvPool batch of ``size`` envs, env i seeded ``seed + i``."""

    def __init__(self, env_id: str, seed: int, size: int, max_episode_steps: int | None):
        kwargs: dict[str, Any] = {"env_type": "gymnasium", "num_envs": size, "batch_size": size, "seed": seed}
        if max_episode_steps is not None:
            kwargs["max_episode_steps"] = max_episode_steps
        self.env_id, self.max_episode_steps = env_id, max_episode_steps
        with warnings.catch_warnings():  # EnvPool builds its Box spaces from float64 bounds; Gymnasium warns
            warnings.filterwarnings("ignore", message=".*precision lowered by casting to float32")
            self.envs = import_envpool().make(env_id, **kwargs)
            self.observation_space, self.action_space = self.envs.observation_space, self.envs.action_space

    def step(self, ids: np.ndarray, actions: np.ndarray) -> tuple:
        """(obs, reward, terminated, truncated) of envs ``ids`` after ``actions``, in the order of ``ids``;
        ``terminated`` as Gymnasium sets it, also on a step that reaches the step limit (:func:`terminal`)."""
        sent = ids.astype(np.int32)
        obs, reward, terminated, truncated, info = self.envs.step(actions.astype(np.int32), sent)
        order = _order(info, sent)
        if order is not None:
            obs, reward, terminated, truncated = obs[order], reward[order], terminated[order], truncated[order]
        if np.count_nonzero(truncated):  # (a step limit reached; a step that reaches none has nothing to check)
            for k in np.flatnonzero(truncated & ~terminated):
                terminated[k] = terminal(self.env_id, obs[k])
        return obs, reward, terminated, truncated

    def reset_many(self, ids: np.ndarray) -> np.ndarray:
        """The first observations of envs ``ids``' next episodes (reset in one EnvPool call), in the order of
        ``ids``."""
        sent = ids.astype(np.int32)
        obs, info = self.envs.reset(sent)
        order = _order(info, sent)
        return obs if order is None else obs[order]


def _order(info: dict, sent: np.ndarray) -> np.ndarray | None:
    """The rows that put an EnvPool call's results back in the order of the env ids ``sent`` (int32): EnvPool
    returns envs as they finish (``info["env_id"]``); None where they came in that order. The ids are compared as
    bytes, exact for arrays of one dtype (EnvPool's int32; another dtype only takes the reorder, right for any
    order)."""
    got = np.asarray(info["env_id"])
    if got.dtype == sent.dtype and got.tobytes() == sent.tobytes():
        return None
    return np.argsort(got)[np.searchsorted(np.sort(got), sent)]


class PooledEnv:
    """One seed's env in an EnvPool batch, with Gymnasium's ``step``/``reset`` contract (stepping it alone); a
    cohort's envs step and reset in one call per pool instead (:func:`step_arrays`, :func:`reset_arrays`).
    ``reset(seed=s)`` restarts its stream as Gymnasium does."""

    metadata: dict[str, Any] = {}
    spec = None

    def __init__(self, pool: _Pool, index: int, seed: int):
        self.pool, self.index, self.seed = pool, index, seed
        self.observation_space, self.action_space = pool.observation_space, pool.action_space
        self._first_obs: np.ndarray | None = None  # the first episode's observation until the first step
        self._stepped = False

    @property
    def unwrapped(self) -> PooledEnv:
        return self

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        if seed is not None and (seed != self.seed or self._stepped):  # a new stream, as Gymnasium reseeds
            self.pool, self.index, self.seed = _Pool(self.pool.env_id, seed, 1, self.pool.max_episode_steps), 0, seed
            self._first_obs, self._stepped = None, False
        if not self._stepped:
            if self._first_obs is None:
                self._first_obs = self.pool.reset_many(np.array([self.index]))[0]
            return self._first_obs.copy(), {}
        return self.pool.reset_many(np.array([self.index]))[0], {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        if not self._stepped and self._first_obs is None:
            raise RuntimeError("PooledEnv.step before reset")
        self._stepped = True
        obs, reward, terminated, truncated = self.pool.step(np.array([self.index]), np.array([int(action)]))
        return obs[0], float(reward[0]), bool(terminated[0]), bool(truncated[0]), {}

    def close(self) -> None:
        pass


def make_pooled(env_id: str, seeds: Sequence[int], max_episode_steps: int | None = None) -> list[PooledEnv]:
    """One :class:`PooledEnv` per seed; seeds that follow each other (5, 6, 7) share one pool."""
    envs: list[PooledEnv] = []
    for _, run in itertools.groupby(enumerate(map(int, seeds)), key=lambda ks: ks[1] - ks[0]):  # (consecutive seeds)
        run_seeds = [seed for _, seed in run]
        pool = _Pool(env_id, run_seeds[0], len(run_seeds), max_episode_steps)
        envs += [PooledEnv(pool, i, seed) for i, seed in enumerate(run_seeds)]
    return envs


def step_arrays(envs: Sequence[PooledEnv], actions: np.ndarray) -> tuple[np.ndarray, ...]:
    """Step ``envs`` (each already reset) with ``actions`` (int64, one per env) in one EnvPool call per pool and
    return their results as arrays in the order of ``envs``: (obs, reward, terminated, truncated), as each env's
    own ``step`` would give them row by row (its info is always empty)."""
    if not all([env._stepped or env._first_obs is not None for env in envs]):
        raise RuntimeError("PooledEnv.step before reset")
    stepped = _per_pool(envs, lambda pool, ids, rows: pool.step(ids, actions[rows]))
    for env in envs:
        env._stepped = True
    return stepped


def reset_arrays(envs: Sequence[PooledEnv]) -> np.ndarray:
    """The next episodes' first observations of ``envs`` (each stepped, its episode over), reset in one EnvPool
    call per pool, in the order of ``envs``: what each env's own ``reset()`` would give, row by row."""
    return _per_pool(envs, lambda pool, ids, rows: (pool.reset_many(ids),))[0]


def _per_pool(envs: Sequence[PooledEnv], call) -> tuple[np.ndarray, ...]:
    """``call(pool, ids, rows)``'s arrays for ``envs`` (``rows``: their positions in ``envs``), one call per pool,
    their rows put together in the order of ``envs``."""
    pool = envs[0].pool
    if [env.pool for env in envs].count(pool) == len(envs):  # one pool (a cohort of consecutive seeds): one call
        return call(pool, np.array([env.index for env in envs], dtype=np.int64), slice(None))
    by_pool: dict[int, list[int]] = {}
    for k, env in enumerate(envs):
        by_pool.setdefault(id(env.pool), []).append(k)
    groups = [np.array(ks) for ks in by_pool.values()]
    results = [call(envs[rows[0]].pool, np.array([envs[k].index for k in rows]), rows) for rows in groups]
    back = np.argsort(np.concatenate(groups))  # (each env's row among the pools' rows, one pool after another)
    return tuple(np.concatenate(arrays)[back] for arrays in zip(*results, strict=True))
