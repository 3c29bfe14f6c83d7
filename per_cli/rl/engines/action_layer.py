"""The action layer's gradients, whose ``dz`` is nonzero only at each row's taken action: only those rows summed.

The values of the full products (:mod:`.products`, ``passes.weight_gradient``), built from the same row helpers,
in batch order; see :func:`action_weight_gradient` for why a skipped zero term changes nothing an update reads.
"""

from __future__ import annotations

import numba
import numpy as np

from per_cli.rl.engines.dense import EXACT
from per_cli.rl.engines.products import _axpy1, _axpy2, _axpy4


@numba.njit(**EXACT)
def action_weight_gradient(dz, actions, x, gw):
    """gw (A, in) = dzᵀ x for the action layer, whose dz (batch, A) is zero but at each row's taken action: each gw[a]
    sums only the rows that took a, in batch order.

    Equal to the full product (``passes.weight_gradient``) up to the sign of a zero, which Adam and the clipping norm
    treat alike; a non-finite x fails the update's finiteness check either way."""
    for a in range(gw.shape[0]):
        g = gw[a]
        done, held, r0, r1, r2 = 0, 0, 0, 0, 0  # rows summed so far; up to three rows waiting for a pass
        for b in range(actions.shape[0]):
            if actions[b] != a:
                continue
            if held == 3:
                _axpy4(dz[r0, a], dz[r1, a], dz[r2, a], dz[b, a], x[r0], x[r1], x[r2], x[b], g, done == 0)
                done, held = done + 4, 0
            elif held == 2:
                r2, held = b, 3
            elif held == 1:
                r1, held = b, 2
            else:
                r0, held = b, 1
        if held == 0 and done == 0:
            g[:] = 0.0
        elif held == 3:
            _axpy2(dz[r0, a], dz[r1, a], x[r0], x[r1], g, done == 0)
            _axpy1(dz[r2, a], x[r2], g, False)
        elif held == 2:
            _axpy2(dz[r0, a], dz[r1, a], x[r0], x[r1], g, done == 0)
        elif held == 1:
            _axpy1(dz[r0, a], x[r0], g, done == 0)


@numba.njit(**EXACT)
def action_input_gradient(dz, actions, w, dx, x):
    """dx (batch, in) = dz W for the action layer (dz nonzero only at each row's taken action, as
    :func:`action_weight_gradient`), then the ReLU mask of the layer's input ``x``: row b is dz[b, a_b] W[a_b],
    the same values as the full product up to the sign of a zero (see there)."""
    zero = np.float32(0.0)
    for b in range(dz.shape[0]):
        a = actions[b]
        d, wa, di, xi = dz[b, a], w[a], dx[b], x[b]
        for j in range(di.shape[0]):
            value = zero + d * wa[j]
            di[j] = value if xi[j] > 0.0 else zero
