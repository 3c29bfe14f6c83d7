"""ε-greedy's draws, for one member or several in ONE compiled call, each on the member's own generator.

:func:`explore_kernel` defines the draw: ``g.random() < ε``, then ``g.integers(0, n_actions)`` on numba's
``Generator`` (its state saved with it). A solo agent uses the same kernel (:class:`OneMember`), so a solo run and
a cohort member draw the same actions by construction."""

from __future__ import annotations

import numba
import numpy as np
from numba.typed import List

from per_cli.replay.integers import uniform_integer


@numba.njit(cache=True, nogil=True)
def explore_kernel(generators, which, steps, start, end, duration, n_actions, eps_out, out):
    """For k in range(len(which)): ε of member ``which[k]`` at ``steps[k]`` (``LinearSchedule(start, end,
    duration)``) into ``eps_out[k]``, then its draw on ``generators[which[k]]`` (a ``numba.typed.List`` of
    ``np.random.Generator``) into ``out[k]``: a random action in ``0 .. n_actions - 1``, or -1 (act greedily)."""
    for k in range(which.shape[0]):
        step = steps[k]
        eps = end if duration <= 0 or step >= duration else start + (end - start) * (step / duration)
        eps_out[k] = eps
        generator = generators[which[k]]
        if generator.random() < eps:
            out[k] = uniform_integer(generator, 0, n_actions)
        else:
            out[k] = -1


class OneMember:
    """:func:`explore_kernel` for one generator ``rng`` (its typed list and the call's arrays built once): what a
    solo agent draws, the draw a cohort member makes in the batched call."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng  # (held: the typed list refers to its bit generator)
        self._generators = List([rng])
        self._which, self._steps = np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
        self._eps, self._out = np.empty(1), np.empty(1, dtype=np.int64)

    def __call__(self, epsilon: float, n_actions: int) -> int:
        """A random action with probability ``epsilon``, else -1 (act greedily)."""
        epsilon = float(epsilon)
        explore_kernel(
            self._generators, self._which, self._steps, epsilon, epsilon, 0, int(n_actions), self._eps, self._out
        )
        return int(self._out[0])
