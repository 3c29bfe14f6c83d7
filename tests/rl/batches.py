"""Building a replay Batch in tests: fields a test does not care about (indices, ages, episode ids, ...) are
filled with zeros, so the tests keep working when the replay layer adds bookkeeping fields."""

from __future__ import annotations

import dataclasses

import numpy as np

from per_cli.replay import Batch


def batch(obs, actions, rewards, next_obs, terminated, weights=None) -> Batch:
    n = len(actions)
    given = {
        "obs": np.asarray(obs),
        "actions": np.asarray(actions, np.int64),
        "rewards": np.asarray(rewards, np.float32),
        "next_obs": np.asarray(next_obs),
        "terminated": np.asarray(terminated, np.float32),
        "weights": np.ones(n, np.float32) if weights is None else np.asarray(weights, np.float32),
        "indices": np.arange(n),
    }
    rest = {f.name: np.zeros(n, np.int64) for f in dataclasses.fields(Batch) if f.name not in given}
    return Batch(**given, **rest)
