"""A run's or a cohort's training envs as ONE batch over the seed axis: ``step(which, actions)`` and ``reset(which)``
take and return arrays (row k: env ``which[k]``). :func:`env_batch` picks once, by the envs' class, between
:class:`PooledBatch` (EnvPool: one call per pool) and :class:`EachEnv` (any Gymnasium env: one call per env). An env
that raises fails only its own row (``errors``); the caller decides what that means (the loop fails its member)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np

from per_cli.envs.pool import MIN_ENVPOOL, PooledEnv, reset_arrays, step_arrays

NO_ERRORS: Mapping[int, Exception] = MappingProxyType({})  # (read-only: every step without a failed env shares it)


class EnvStep(NamedTuple):
    """What the envs returned at a step, row k env ``which[k]``'s: ``obs`` the next observations, ``rewards``
    (the env's, exact in float64 or float32), ``terminated``, ``truncated`` (bool), ``infos`` (dicts), and
    ``errors``: the rows whose env raised, with what it raised."""

    obs: np.ndarray
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    infos: Sequence[dict]
    errors: Mapping[int, Exception]

    def take(self, rows: list[int]) -> EnvStep:
        """These rows of the step (their errors left out)."""
        index = np.asarray(rows, dtype=np.int64)
        infos = [self.infos[k] for k in rows]
        return EnvStep(self.obs[index], self.rewards[index], self.terminated[index], self.truncated[index], infos,
                       NO_ERRORS)  # fmt: skip


class Reset(NamedTuple):
    """The first observations of the envs' next episodes (row k env ``which[k]``'s), and the rows whose reset
    raised."""

    obs: np.ndarray
    errors: Mapping[int, Exception]


class EachEnv:
    """Gymnasium envs, each stepped and reset by its own call. ``like``: an observation (its dtype and shape are
    those of the arrays returned; each env's observation is cast to them)."""

    def __init__(self, envs: Sequence[Any], like: np.ndarray):
        self.envs = list(envs)
        self.dtype, self.shape = like.dtype, like.shape

    def step(self, which: Sequence[int], actions: np.ndarray) -> EnvStep:
        """Each env's own ``step`` with its action, as rows; an env that raises leaves its row as it is."""
        n = len(which)
        obs, rewards = np.zeros((n, *self.shape), dtype=self.dtype), np.zeros(n, dtype=np.float64)
        terminated, truncated = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        infos: list[dict] = [{}] * n
        errors: dict[int, Exception] = {}
        for k, (i, action) in enumerate(zip(which, actions.tolist(), strict=True)):
            try:
                next_obs, rewards[k], terminated[k], truncated[k], infos[k] = self.envs[i].step(action)
                _put(obs, k, next_obs)
            except Exception as exc:  # noqa: BLE001 - this env's row fails, the others go on
                errors[k] = exc
        return EnvStep(obs, rewards, terminated, truncated, infos, errors)

    def reset(self, which: Sequence[int]) -> Reset:
        """Each env's own ``reset()``, as rows; an env that raises leaves its row as it is."""
        obs = np.zeros((len(which), *self.shape), dtype=self.dtype)
        errors: dict[int, Exception] = {}
        for k, i in enumerate(which):
            try:
                first_obs, _info = self.envs[i].reset()
                _put(obs, k, first_obs)
            except Exception as exc:  # noqa: BLE001 - this env's row fails, the others go on
                errors[k] = exc
        return Reset(obs, errors)


class PooledBatch(EachEnv):
    """EnvPool envs (:class:`~per_cli.envs.pool.PooledEnv`), stepped and reset in one call per pool. Should that
    call raise, ``interrupt(exc)`` says whether a signal is behind it (then raised: the loop stops); else each
    env steps alone (:class:`EachEnv`'s calls) and only the envs that raise fail. Where none raises alone, the
    batched call itself is broken, and every row fails with why (:func:`_unless_broken`) rather than go on at one
    call per env."""

    def __init__(self, envs: Sequence[PooledEnv], like: np.ndarray, interrupt: Callable[[BaseException], Any]):
        super().__init__(envs, like)
        self._interrupt = interrupt

    def step(self, which: Sequence[int], actions: np.ndarray) -> EnvStep:
        envs = [self.envs[i] for i in which]
        try:
            obs, rewards, terminated, truncated = step_arrays(envs, actions)
        except Exception as exc:  # noqa: BLE001 - each env's own step reports its own error
            self._raise_interrupt(exc)
            return _unless_broken(super().step(which, actions), exc)
        return EnvStep(obs, rewards, terminated, truncated, [{}] * len(envs), NO_ERRORS)  # (EnvPool reports none)

    def reset(self, which: Sequence[int]) -> Reset:
        try:
            return Reset(reset_arrays([self.envs[i] for i in which]), NO_ERRORS)
        except Exception as exc:  # noqa: BLE001 - each env's own reset reports its own error
            self._raise_interrupt(exc)
            return _unless_broken(super().reset(which), exc)

    def _raise_interrupt(self, exc: Exception) -> None:
        interrupt = self._interrupt(exc)
        if interrupt is not None:
            raise interrupt from None


def _unless_broken(alone: EnvStep | Reset, exc: Exception) -> EnvStep | Reset:
    """``alone``: what the envs gave by their own calls after their batched call raised ``exc``. Where one of them
    raised too, their errors explain it; where none did, the batched call is broken (an EnvPool release that does
    not fit this NumPy, say), and every row fails with that."""
    if alone.errors:
        return alone
    broken = RuntimeError(
        f"EnvPool's batched call raised {type(exc).__name__}: {exc}, and each env's own call did not: the batched "
        f"call is broken (is EnvPool {'.'.join(map(str, MIN_ENVPOOL))} or newer installed?)"
    )
    return alone._replace(errors={k: broken for k in range(len(alone.obs))})


def env_batch(
    envs: Sequence[Any], like: np.ndarray, interrupt: Callable[[BaseException], Any]
) -> EachEnv | PooledBatch:
    """The batch of ``envs`` (one config's: all EnvPool envs or none), chosen once. ``like``: an observation;
    ``interrupt``: the signal behind an exception, if any (EnvPool's batched call: see :class:`PooledBatch`)."""
    if all(type(env) is PooledEnv for env in envs):
        return PooledBatch(envs, like, interrupt)
    return EachEnv(envs, like)


def _put(rows: np.ndarray, k: int, obs: Any) -> None:
    """Row ``k`` of ``rows`` is ``obs`` (cast to their dtype); ValueError for an observation of another shape."""
    if np.shape(obs) != rows.shape[1:]:
        raise ValueError(f"an observation of shape {np.shape(obs)} where the env's are {rows.shape[1:]}: one env's "
                         f"observations must keep their shape")  # fmt: skip
    rows[k] = obs
