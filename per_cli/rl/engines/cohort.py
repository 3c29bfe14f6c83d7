"""The numba engine with a seed dimension: the DQN updates of S networks in one compiled call.

Each member of a cohort keeps its own :class:`~per_cli.rl.engines.mlp.MLPEngine` (its flat parameter, target
and Adam buffers, which its torch modules view, so acting, evaluation and checkpoints work per member as in a
solo run). :class:`CohortEngine` holds typed lists of those same buffers, built once, and
:func:`cohort_update_kernel` loops over the members of one call inside compiled code, calling the solo engine's
:func:`~per_cli.rl.engines.kernels.update_kernel` for each: per-member gradient clipping and Adam, one shared
workspace, and the Python and dispatch overhead paid once per cohort step instead of once per member. Because
each member runs exactly the solo kernel on its own buffers, a member's update is the solo run's update.
"""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np
from numba.typed import List

from per_cli.rl.engines.dense import JIT
from per_cli.rl.engines.kernels import Workspace, update_kernel
from per_cli.rl.engines.mlp import MLPEngine

_F32, _I64 = np.float32, np.int64


@numba.njit(**JIT)
def cohort_update_kernel(
    params, tparams, ms, vs, which, dims, obs, actions, rewards, next_obs, terminated, weights, hyper, steps, ws,
    td_out, loss_out, q_out,
):  # fmt: skip
    """For k in range(len(which)): member ``which[k]``'s update on batch k (``obs[k]``, ...), in place on its
    buffers ``params[which[k]]`` ...; δ into ``td_out[k]``, loss and mean Q into ``loss_out[k]``, ``q_out[k]``.
    ``steps[k]`` is that member's Adam step count after this update."""
    for k in range(which.shape[0]):
        i = which[k]
        loss_out[k], q_out[k] = update_kernel(
            params[i], tparams[i], ms[i], vs[i], dims, obs[k], actions[k], rewards[k], next_obs[k],
            terminated[k], weights[k], td_out[k], hyper, steps[k], ws,
        )  # fmt: skip


def _stacked(arrays: Sequence[np.ndarray], dtype, shape: tuple[int, ...]) -> np.ndarray:
    out = np.stack(arrays)
    return np.ascontiguousarray(out.reshape(shape), dtype=dtype)


class CohortEngine:
    """One compiled update call over the members of a cohort, each with its own :class:`MLPEngine`.

    The engines must share the network shape and the update's settings (γ, loss, double DQN, clipping, Adam's
    lr, betas and eps): they differ only in their parameters, moments and step counts. Build it after any
    checkpoint was loaded (it keeps the hyperparameters it sees then).
    """

    def __init__(self, engines: Sequence[MLPEngine]):
        if not engines:
            raise ValueError("a cohort engine needs at least one member")
        first = engines[0]
        for i, engine in enumerate(engines):
            if not np.array_equal(engine.dims, first.dims) or not np.array_equal(engine._hyper(), first._hyper()):
                raise ValueError(f"cohort member {i}'s network or update settings differ from member 0's")
        self.engines = list(engines)
        self.dims = first.dims
        self.hyper = first._hyper().copy()
        self._params = List([e.params for e in engines])
        self._tparams = List([e.target_params for e in engines])
        self._m = List([e.optimizer.m for e in engines])
        self._v = List([e.optimizer.v for e in engines])
        self._ws = Workspace(self.dims)

    def update(self, which: Sequence[int], obs, actions, rewards, next_obs, terminated, weights):
        """Members ``which`` (indices into the engines) learn from their batches (sequences of per-member
        arrays, in the order of ``which``). Returns (δ (k, batch), loss (k,), mean Q (k,)), each from that
        member's weights before its update, exactly as its own :meth:`MLPEngine.update` would."""
        n, batch = len(which), len(actions[0])
        steps = np.empty(n, dtype=np.int64)
        for k, i in enumerate(which):
            opt = self.engines[i].optimizer
            opt.step += 1
            steps[k] = opt.step
        td = np.empty((n, batch), dtype=np.float32)
        loss, q_mean = np.empty(n, dtype=np.float64), np.empty(n, dtype=np.float64)
        cohort_update_kernel(
            self._params, self._tparams, self._m, self._v, np.asarray(which, dtype=np.int64), self.dims,
            _stacked(obs, _F32, (n, batch, -1)), _stacked(actions, _I64, (n, batch)),
            _stacked(rewards, _F32, (n, batch)), _stacked(next_obs, _F32, (n, batch, -1)),
            _stacked(terminated, _F32, (n, batch)), _stacked(weights, _F32, (n, batch)),
            self.hyper, steps, self._ws.for_batch(batch), td, loss, q_mean,
        )  # fmt: skip
        return td, loss, q_mean
