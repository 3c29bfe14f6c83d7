"""The numba engine with a seed dimension: the DQN updates of S networks in one compiled call.

Each member keeps its own :class:`~per_cli.rl.engines.mlp.MLPEngine` (flat buffers its torch modules view);
:class:`CohortEngine` holds typed lists of those buffers and :func:`cohort_update_kernel` calls the solo update
(:func:`~per_cli.rl.engines.kernels.update_member`) for each member inside one compiled call, so a member's update
is exactly the solo run's and the dispatch cost is paid once per step. Acting (:func:`cohort_greedy_kernel`) and
new transitions' TD errors (:func:`cohort_td_kernel`) are batched the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np
from numba.typed import List

from per_cli.rl.engines.dense import JIT, c_array, offsets
from per_cli.rl.engines.kernels import Workspace, carve, greedy_member, score_member, td_member, update_member
from per_cli.rl.engines.mlp import MLPEngine
from per_cli.rl.results import Scores, UpdateResults

_F32, _I64 = np.float32, np.int64


@numba.njit(**JIT)
def cohort_update_kernel(
    params, tparams, ms, vs, which, dims, obs, actions, rewards, next_obs, terminated, weights, hyper, steps, ws,
    td_out, losses_out, loss_out, q_out,
):  # fmt: skip
    """For k in range(len(which)): member ``which[k]``'s update on batch k (``obs[k]``, ...), in place on its
    buffers ``params[which[k]]`` ...; δ and the per-sample losses into ``td_out[k]``, ``losses_out[k]``, loss and
    mean Q into ``loss_out[k]``, ``q_out[k]``.
    ``steps[k]`` is that member's Adam step count after this update. The workspace is carved once per call."""
    act_off = np.empty(dims.shape[0], dtype=np.int64)
    bufs = carve(ws, dims, obs.shape[1], act_off)
    offs = offsets(dims)
    for k in range(which.shape[0]):
        i = which[k]
        loss_out[k], q_out[k] = update_member(
            params[i], tparams[i], ms[i], vs[i], dims, offs, act_off, bufs, obs[k], actions[k], rewards[k],
            next_obs[k], terminated[k], weights[k], td_out[k], losses_out[k], hyper, steps[k],
        )  # fmt: skip


@numba.njit(**JIT)
def cohort_greedy_kernel(params, which, dims, obs, ws, out):
    """``out[k]``: member ``which[k]``'s greedy action for observation ``obs[k]`` (the solo ``greedy_kernel``)."""
    bufs = carve(ws, dims, 1, np.empty(dims.shape[0], dtype=np.int64))
    offs = offsets(dims)
    for k in range(which.shape[0]):
        out[k] = greedy_member(params[which[k]], dims, offs, bufs, obs[k])


@numba.njit(**JIT)
def cohort_td_kernel(
    params, tparams, which, dims, obs, actions, rewards, next_obs, terminated, gamma, double_dqn, ws, out
):  # fmt: skip
    """``out[k]``: member ``which[k]``'s δ for its one-transition batch k (``obs[k]`` (1, d), ``actions[k]`` (1,)
    ...), by the solo ``td_errors_kernel``'s computation on the same array layouts."""
    bufs = carve(ws, dims, 1, np.empty(dims.shape[0], dtype=np.int64))
    offs = offsets(dims)
    for k in range(which.shape[0]):
        i = which[k]
        td_member(
            params[i], tparams[i], dims, offs, bufs, obs[k], actions[k], rewards[k], next_obs[k], terminated[k],
            gamma, double_dqn, out[k : k + 1],
        )  # fmt: skip


@numba.njit(**JIT)
def cohort_score_kernel(
    params, tparams, which, dims, obs, actions, rewards, next_obs, terminated, hyper, ws, td, loss, target_loss
):  # fmt: skip
    """For k in range(len(which)): member ``which[k]``'s scores of batch k (the solo ``score_kernel``), into row k
    of ``td``, ``loss`` and ``target_loss``."""
    bufs = carve(ws, dims, obs.shape[1], np.empty(dims.shape[0], dtype=np.int64))
    offs = offsets(dims)
    for k in range(which.shape[0]):
        i = which[k]
        score_member(
            params[i], tparams[i], dims, offs, bufs, obs[k], actions[k], rewards[k], next_obs[k], terminated[k],
            hyper, td[k], loss[k], target_loss[k],
        )  # fmt: skip


def stack(arrays: Sequence[np.ndarray]) -> np.ndarray:
    """``np.stack(arrays)`` for arrays of one shape, by one ``np.concatenate`` (without np.stack's per-array
    ``expand_dims``); ``np.stack`` itself (and its errors) for anything else (0-d, differing shapes, non-arrays)."""
    first = arrays[0]
    same = type(first) is np.ndarray and first.ndim and set(map(type, arrays)) == {np.ndarray}
    if same and set(map(len, arrays)) == {len(first)}:
        try:
            return np.concatenate(arrays).reshape(len(arrays), *first.shape)
        except ValueError:  # other dimensions differ: np.stack says so
            pass
    return np.stack(arrays)


def _stacked(arrays: Sequence[np.ndarray] | np.ndarray, dtype, shape: tuple[int, ...]) -> np.ndarray:
    """The per-member arrays stacked (an array with a member axis already: as it is) as a C array."""
    return c_array(arrays if type(arrays) is np.ndarray else stack(arrays), dtype, shape)


class CohortEngine:
    """One compiled update call over the members of a cohort, each with its own :class:`MLPEngine`.

    The engines must share the network shape and the update's settings (the kernels' ``UpdateSettings``): they
    differ only in their parameters, moments and step counts.
    Build it after any checkpoint was loaded (it keeps the settings it sees then).
    """

    def __init__(self, engines: Sequence[MLPEngine]):
        if not engines:
            raise ValueError("a cohort engine needs at least one member")
        shapes, settings = {tuple(e.dims) for e in engines}, {e.hyper for e in engines}
        if len(shapes) != 1 or len(settings) != 1:
            raise ValueError("the cohort's networks or update settings differ: one engine runs one config")
        self.engines = list(engines)
        (shape,), (self.hyper,) = shapes, settings
        self.dims = np.array(shape, dtype=np.int64)
        self._params = List([e.params for e in engines])
        self._tparams = List([e.target_params for e in engines])
        self._m = List([e.optimizer.m for e in engines])
        self._v = List([e.optimizer.v for e in engines])
        self._ws = Workspace(self.dims)

    def update(self, which: Sequence[int], obs, actions, rewards, next_obs, terminated, weights) -> UpdateResults:
        """Members ``which`` (indices into the engines) learn from their batches, stacked along a first, member
        axis: ``obs`` (k, batch, d), ``actions`` (k, batch), ... (a cohort draw's arrays, passed as they are where
        they are C arrays of the engine's dtypes). Returns their results (row k: member ``which[k]``'s), each from
        that member's weights before its update, exactly as its own :meth:`MLPEngine.update` would."""
        n, batch = len(which), actions.shape[1]
        steps = np.empty(n, dtype=np.int64)
        for k, i in enumerate(which):
            opt = self.engines[i].optimizer
            opt.step += 1
            steps[k] = opt.step
        td, losses = np.empty((2, n, batch), dtype=np.float32)  # (one allocation a call for each pair)
        loss, q_mean = np.empty((2, n), dtype=np.float64)
        matrices, vectors = (n, batch, -1), (n, batch)
        cohort_update_kernel(
            self._params, self._tparams, self._m, self._v, np.asarray(which, dtype=np.int64), self.dims,
            c_array(obs, _F32, matrices), c_array(actions, _I64, vectors), c_array(rewards, _F32, vectors),
            c_array(next_obs, _F32, matrices), c_array(terminated, _F32, vectors), c_array(weights, _F32, vectors),
            self.hyper, steps, self._ws.for_batch(batch), td, losses, loss, q_mean,
        )  # fmt: skip
        return UpdateResults(td, losses, loss, q_mean)

    def score(self, which: Sequence[int], obs, actions, rewards, next_obs, terminated) -> Scores:
        """Members ``which``'s :class:`~per_cli.rl.results.Scores` of their batches (stacked along a first, member
        axis, as :meth:`update` takes them), nothing learnt; row k as member ``which[k]``'s own
        :meth:`MLPEngine.score`."""
        n, batch = len(which), actions.shape[1]
        td, loss, target_loss = np.empty((3, n, batch), dtype=np.float32)
        matrices, vectors = (n, batch, -1), (n, batch)
        cohort_score_kernel(
            self._params, self._tparams, np.asarray(which, dtype=np.int64), self.dims,
            c_array(obs, _F32, matrices), c_array(actions, _I64, vectors), c_array(rewards, _F32, vectors),
            c_array(next_obs, _F32, matrices), c_array(terminated, _F32, vectors), self.hyper,
            self._ws.for_batch(batch), td, loss, target_loss,
        )  # fmt: skip
        return Scores(td, loss, target_loss)

    def greedy(self, which: Sequence[int], obs: Sequence[np.ndarray]) -> np.ndarray:
        """Greedy actions (k,) of members ``which`` for their observations, as each :meth:`MLPEngine.greedy_action`."""
        n = len(which)
        out = np.empty(n, dtype=np.int64)
        observations = _stacked(obs, _F32, (n, -1))
        cohort_greedy_kernel(self._params, np.asarray(which, dtype=np.int64), self.dims, observations,
                             self._ws.for_batch(1), out)  # fmt: skip
        return out

    def td_errors(self, which: Sequence[int], obs, actions, rewards, next_obs, terminated) -> np.ndarray:
        """δ (k,) of one transition per member ``which[k]`` (sequences of per-member 1-row arrays, or arrays
        stacked along a first, member axis), as each
        :meth:`MLPEngine.td_errors` would compute it for that one-transition batch."""
        n = len(which)
        out = np.empty(n, dtype=np.float32)
        cohort_td_kernel(
            self._params, self._tparams, np.asarray(which, dtype=np.int64), self.dims,
            _stacked(obs, _F32, (n, 1, -1)), _stacked(actions, _I64, (n, 1)), _stacked(rewards, _F32, (n, 1)),
            _stacked(next_obs, _F32, (n, 1, -1)), _stacked(terminated, _F32, (n, 1)), self.hyper.gamma,
            self.hyper.double_dqn, self._ws.for_batch(1), out,
        )  # fmt: skip
        return out
