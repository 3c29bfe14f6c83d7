"""What a store takes and gives back, whatever the storage: transitions as rows over the members, and the kind's
events (its ``add_members``) in the order they happened. Every storage class has ONE store over a list of members
(a solo memory's list holds one), chosen once per run, as it has one gather."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import NamedTuple

import numpy as np

NO_ERRORS: Mapping[int, Exception] = MappingProxyType({})  # (read-only: a store where every row was stored)


class Rows(NamedTuple):
    """Transitions to store: row k by member ``which[k]`` (a member's rows in the order it stores them)."""

    which: np.ndarray  # int64 (n,)
    obs: np.ndarray  # (n, *obs_shape), the states as the env gives them
    actions: np.ndarray  # int64 (n,)
    rewards: np.ndarray  # float32 (n,)
    next_obs: np.ndarray  # (n, *obs_shape)
    terminated: np.ndarray  # bool (n,)
    truncated: np.ndarray  # bool (n,)
    ends: np.ndarray  # bool (n,): the member's next stored transition starts an episode


class Events(NamedTuple):
    """The kind's ``add_members`` events, in order: member ``which[e]``'s slot ``slots[e]`` was written with a
    sampleable transition (``entering[e]``) or became unsampleable (a frame storage overwrote its history)."""

    which: np.ndarray  # int64
    slots: np.ndarray  # int64
    entering: np.ndarray  # bool


def no_events() -> Events:
    """Events of a store that stored nothing."""
    return Events(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.bool_))


class Stored(NamedTuple):
    """A store's outcome: the events of the rows it stored, and per refused row k why (the others were stored)."""

    events: Events
    errors: Mapping[int, Exception] = NO_ERRORS


def joined(parts: Sequence[Rows], like: Rows) -> Rows:
    """The ``parts`` one after another as one :class:`Rows` (none: ``like``'s columns with no row)."""
    if not parts:
        return Rows(*(column[:0] for column in like))
    return Rows(*(np.concatenate(column) for column in zip(*parts, strict=True)))


def rows_of(which, obs, actions, rewards, next_obs, terminated, truncated, ends=None) -> Rows:
    """:class:`Rows` of 1-D ``which``, ``actions``, ``rewards`` and flags (arrays or sequences) in their dtypes
    (``ends`` None: terminated or truncated), states as given."""
    terminated = np.asarray(terminated, dtype=np.bool_)
    truncated = np.asarray(truncated, dtype=np.bool_)
    ends = np.logical_or(terminated, truncated) if ends is None else np.asarray(ends, dtype=np.bool_)
    return Rows(
        np.asarray(which, dtype=np.int64), np.asarray(obs), np.asarray(actions, dtype=np.int64),
        np.asarray(rewards, dtype=np.float32), np.asarray(next_obs), terminated, truncated, ends,
    )  # fmt: skip
