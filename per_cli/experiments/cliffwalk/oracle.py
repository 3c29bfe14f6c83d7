"""The Blind Cliffwalk's oracle: at each step, the transition whose update lowers the global loss (the MSE of
the Q-values against the true ones) the most."""

from __future__ import annotations

import math

import numpy as np

from per_cli.envs.cliffwalk import BlindCliffwalk
from per_cli.experiments.cliffwalk.learners import converged

ORACLE_STALL = 2_000


def run_oracle(mdp: BlindCliffwalk, learner, cap: int, sse_tol: float, step: float) -> int:
    """Greedy in the true loss: update the (distinct) transition whose update leaves the smallest MSE. The memory's
    duplicates are identical transitions, so choosing among the 2n distinct ones is the same choice. Updates that change
    nothing (δ = 0) are not candidates."""
    updates, best, since_best = 0, math.inf, 0
    while updates < cap and not converged(learner, sse_tol):
        after, delta = learner.sse_after_each(step)
        after = np.where(np.abs(delta) > 0.0, after, np.inf)
        flat = int(np.argmin(after))
        if not np.isfinite(after.flat[flat]):
            break  # every δ is 0: a fixed point that is not the true Q (cannot happen tabular)
        s, a = (int(x) for x in np.unravel_index(flat, after.shape))
        s2, r, term = mdp.step(s, a)
        learner.update(s, a, r, s2, term, step)
        updates += 1
        if learner.sse < best * (1 - 1e-9):
            best, since_best = learner.sse, 0
        else:
            since_best += 1
            if since_best >= ORACLE_STALL:
                break
    return updates
