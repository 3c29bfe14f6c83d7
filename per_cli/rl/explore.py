"""ε-greedy's draws of several members in ONE compiled call, each on its member's own generator.

:meth:`~per_cli.rl.agent.DQNAgent.explore` draws ``rng.random() < ε`` and, when it explores,
``rng.integers(n_actions)``. :func:`explore_kernel` makes both draws for every member of a cohort with the C
functions of each member's own bit generator (numba's bindings, as :mod:`per_cli.replay.choice` does for the
batches): ``next_double`` for ``random()`` and numpy's bounded-integer method (Lemire's, on ``next_uint32``:
:func:`~per_cli.replay.choice.bounded`) for ``integers``, so every generator ends where the solo draw leaves it
and every member gets its solo run's action. ε itself is the member's ``LinearSchedule`` at its step, by the same
float operations. :func:`usable` checks once per process that this numpy still draws that way (fail closed: else
each member draws with numpy itself).
"""

from __future__ import annotations

from functools import lru_cache

import numba
import numpy as np

from per_cli.replay.choice import AVAILABLE, bounded

if AVAILABLE:
    from numba.np.random.generator_core import next_double


@numba.njit(cache=True, nogil=True)
def explore_kernel(generators, which, steps, start, end, duration, n_actions, eps_out, out):
    """For k in range(len(which)): ε of member ``which[k]`` at ``steps[k]`` (``LinearSchedule(start, end,
    duration)``) into ``eps_out[k]``, then its draw into ``out[k]``: a random action, or -1 (act greedily)."""
    for k in range(which.shape[0]):
        step = steps[k]
        eps = end if duration <= 0 or step >= duration else start + (end - start) * (step / duration)
        eps_out[k] = eps
        bitgen = generators[which[k]].bit_generator
        if next_double(bitgen) < eps:
            out[k] = np.int64(bounded(bitgen, n_actions - 1))
        else:
            out[k] = -1


# (seed, ε, actions) probes of usable(): exploring and not, two and several actions
_PROBES = ((0, 0.5, 2), (1, 0.9, 3), (2, 0.05, 18), (3, 1.0, 2))


@lru_cache(maxsize=1)
def usable() -> bool:
    """Whether :func:`explore_kernel` draws what ``DQNAgent.explore`` draws with this numpy (same actions, same
    generator state after, over a few hundred draws per probe)."""
    if not AVAILABLE:
        return False
    from numba.typed import List

    for seed, eps, n_actions in _PROBES:
        ours, theirs = np.random.default_rng(seed), np.random.default_rng(seed)
        generators, which = List([ours]), np.zeros(1, dtype=np.int64)
        eps_out, out = np.empty(1), np.empty(1, dtype=np.int64)
        for _ in range(300):
            explore_kernel(generators, which, np.zeros(1, dtype=np.int64), eps, eps, 0, n_actions, eps_out, out)
            want = int(theirs.integers(n_actions)) if theirs.random() < eps else -1
            if int(out[0]) != want:
                return False
        if ours.bit_generator.state != theirs.bit_generator.state:
            return False
    return True
