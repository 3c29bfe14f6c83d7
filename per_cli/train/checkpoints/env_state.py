"""Env snapshots for checkpoints: an env (with its wrappers) pickled so that it continues exactly.

Gymnasium envs written in Python (classic control, the research envs here) pickle exactly; ALE games are
restored from the emulator's own state with its RNG (``clone_state(include_rng=True)``) plus the env's
``np_random``, so sticky actions and noop starts continue exactly too. An env that cannot be pickled gives
no snapshot (None): a resumed run then starts a new episode.
"""

from __future__ import annotations

import pickle
from typing import Any

from per_cli.train.checkpoints.unpickling import unpickle_bytes


def snapshot_env(env) -> bytes | None:
    """Pickle an env (with its wrappers) so that it continues exactly; None if it cannot be pickled."""
    if env is None:
        return None
    base = env.unwrapped
    extra: dict[str, Any] = {}
    if hasattr(base, "ale") and hasattr(base, "clone_state"):  # ale_py pickles only its constructor arguments
        extra["ale_state"] = base.clone_state(include_rng=True)
        extra["np_random"] = base.np_random.bit_generator.state
    try:
        return pickle.dumps((env, extra))
    except Exception:  # noqa: BLE001 - envs holding sockets, simulators, ...: resume starts a new episode
        return None


def restore_env(blob: bytes):
    """The env of a :func:`snapshot_env` blob, in the state it was taken."""
    env, extra = unpickle_bytes(blob)
    if "ale_state" in extra:
        base = env.unwrapped
        base.restore_state(extra["ale_state"])
        base.np_random.bit_generator.state = extra["np_random"]
    return env
