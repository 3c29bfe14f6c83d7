"""The env step of members whose transitions the cohort's compiled store cannot take (``Steps.step_envs``): each
member steps its own env and stores its own transition, EnvPool envs still stepped in one call per pool."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from per_cli.envs.pool import PooledEnv, step_together
from per_cli.train.loop.failures import guard, interrupt_behind

if TYPE_CHECKING:
    from per_cli.train.loop.member import Member

_FAILED = (None, 0.0, False, False, {})  # a failed member's step: its row, which end_collects leaves out


class Stepped(NamedTuple):
    """What the envs returned at this step, row k ``members[k]``'s, for ``end_collects``; ``infos`` None where
    the batched step took none; ``ended`` the rows whose episode ended."""

    members: Sequence[Member]
    next_obs: Sequence[Any] | np.ndarray
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    infos: Sequence[dict] | None
    ended: list[int]


def step_each(members: Sequence[Member], actions: Sequence[Any]) -> Stepped:
    """Each member steps its own env and stores the transition (``Member.step_env``); a member that fails here
    has a row all the same (``end_collects`` takes only the members alive)."""
    results = [guard(m, m.step_env, a) or _FAILED for m, a in zip(members, actions, strict=True)]
    next_obs, rewards, terminated, truncated, infos = zip(*results, strict=True) if results else [()] * 5
    ends = np.array(terminated, bool), np.array(truncated, bool)
    ended = np.flatnonzero(np.logical_or(*ends)).tolist()
    return Stepped(members, next_obs, np.array(rewards, dtype=np.float64), *ends, infos, ended)


def step_pooled(members: Sequence[Member], actions: Sequence[Any]) -> None:
    """The members whose env is an EnvPool env (``env.backend: envpool``) step in one call per pool; each
    member's ``step_env`` then takes its result. Should the call raise, nothing is left and each member steps
    its own env (its own error, if any, is its own)."""
    pooled = [k for k, m in enumerate(members) if isinstance(m.env, PooledEnv)]
    if len(pooled) < 2:  # (a solo run steps its env itself)
        return
    try:
        step_together([members[k].env for k in pooled], [actions[k] for k in pooled])
    except Exception as exc:  # noqa: BLE001 - each member's own step reports its own error
        for k in pooled:
            members[k].env.drop_pending()
        interrupt = interrupt_behind(exc)
        if interrupt is not None:
            raise interrupt from None
