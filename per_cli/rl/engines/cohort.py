"""The numba engine's entry points: each operation (update, score, TD errors, greedy action) is ONE compiled call over
a member axis, for a cohort and a single engine (S = 1, :class:`~per_cli.rl.engines.mlp.MLPEngine`) alike.

The buffers are :class:`Blocks` (row s: member s's); each kernel runs the per-member function for every member in
``which``, so a member's values do not depend on its cohort and the dispatch is paid once per step."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

import numba
import numpy as np

from per_cli.rl.engines.dense import ALIGN, JIT, aligned_empty, c_array, offsets
from per_cli.rl.engines.kernels import (
    UpdateSettings,
    Workspace,
    carve,
    greedy_member,
    score_member,
    td_member,
    update_member,
)
from per_cli.rl.results import Scores, UpdateResults

_F32, _I64 = np.dtype(np.float32), np.dtype(np.int64)


@numba.njit(**JIT)
def cohort_update_kernel(
    params, tparams, ms, vs, which, dims, obs, actions, rewards, next_obs, terminated, weights, hyper, steps, ws,
    td_out, losses_out, loss_out, q_out,
):  # fmt: skip
    """For k in range(len(which)): member ``which[k]``'s update on batch k (``obs[k]``, ...), in place on its
    buffers ``params[which[k]]`` ... and its Adam step count ``steps[which[k]]`` (one more); δ and the per-sample
    losses into ``td_out[k]``, ``losses_out[k]``, loss and mean Q into ``loss_out[k]``, ``q_out[k]``. The workspace
    is carved once per call."""
    act_off = np.empty(dims.shape[0], dtype=np.int64)
    bufs = carve(ws, dims, obs.shape[1], act_off)
    offs = offsets(dims)
    n = offs[offs.shape[0] - 1]  # (a row's floats past n are its padding)
    for k in range(which.shape[0]):
        i = which[k]
        steps[i] += 1
        loss_out[k], q_out[k] = update_member(
            params[i][:n], tparams[i][:n], ms[i][:n], vs[i][:n], dims, offs, act_off, bufs, obs[k], actions[k],
            rewards[k], next_obs[k], terminated[k], weights[k], td_out[k], losses_out[k], hyper, steps[i],
        )  # fmt: skip


@numba.njit(**JIT)
def cohort_greedy_kernel(params, which, dims, obs, ws, out):
    """``out[k]``: member ``which[k]``'s greedy action for observation ``obs[k]``."""
    bufs = carve(ws, dims, 1, np.empty(dims.shape[0], dtype=np.int64))
    offs = offsets(dims)
    for k in range(which.shape[0]):
        out[k] = greedy_member(params[which[k]], dims, offs, bufs, obs[k])


@numba.njit(**JIT)
def cohort_td_kernel(
    params, tparams, which, dims, obs, actions, rewards, next_obs, terminated, gamma, double_dqn, ws, out
):  # fmt: skip
    """``out[k]``: member ``which[k]``'s δ for its batch k (``obs[k]`` (batch, d), ``actions[k]`` (batch,) ...),
    nothing learnt."""
    bufs = carve(ws, dims, obs.shape[1], np.empty(dims.shape[0], dtype=np.int64))
    offs = offsets(dims)
    for k in range(which.shape[0]):
        i = which[k]
        td_member(
            params[i], tparams[i], dims, offs, bufs, obs[k], actions[k], rewards[k], next_obs[k], terminated[k],
            gamma, double_dqn, out[k],
        )  # fmt: skip


@numba.njit(**JIT)
def cohort_score_kernel(
    params, tparams, which, dims, obs, actions, rewards, next_obs, terminated, hyper, ws, td, loss, target_loss
):  # fmt: skip
    """For k in range(len(which)): member ``which[k]``'s scores of batch k (:func:`~.kernels.score_member`), into
    row k of ``td``, ``loss`` and ``target_loss``."""
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


def _stacked(arrays: Sequence[np.ndarray] | np.ndarray, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """The per-member arrays stacked (an array with a member axis already: as it is) as a C array."""
    return c_array(arrays if type(arrays) is np.ndarray else stack(arrays), dtype, shape)


class Blocks(NamedTuple):
    """The flat buffers of S network pairs over the seed axis, one C array each: row s is member s's, its first n
    floats the buffer (:mod:`.dense`'s layout), the rest padding to whole cache lines, so that every row starts on
    one. The kernels take the blocks whole; a member's engine, its networks and its optimizer hold views of its
    row, so a solo call, a checkpoint load and a cohort call all write the same memory."""

    params: np.ndarray  # (S, stride) float32
    target_params: np.ndarray
    m: np.ndarray  # Adam's moments
    v: np.ndarray
    steps: np.ndarray  # (S,) int64: Adam's step counts

    @classmethod
    def allocate(cls, members: int, n: int) -> Blocks:
        """Zeroed blocks for ``members`` buffers of ``n`` floats."""
        stride = -(-n // ALIGN) * ALIGN
        blocks = [aligned_empty(members * stride).reshape(members, stride) for _ in range(4)]
        for block in blocks:
            block[...] = 0.0
        return cls(*blocks, np.zeros(members, dtype=np.int64))

    def rows(self, s: int) -> Blocks:
        """Member ``s``'s rows, as blocks of one (views)."""
        return Blocks(*(block[s : s + 1] for block in self))


class MemberEngine(Protocol):
    """What a cohort reads of each member's engine (an :class:`~per_cli.rl.engines.mlp.MLPEngine`)."""

    dims: np.ndarray
    hyper: UpdateSettings
    rows: Blocks  # its own rows (a block of one)

    def adopt(self, blocks: Blocks, s: int) -> None: ...


class CohortEngine:
    """One compiled call per operation over a cohort's members, on :class:`Blocks` holding their buffers.

    The engines must share the network shape and ``UpdateSettings``. Over several engines it moves their buffers into
    new blocks (values kept), so the cohort built last over an engine is the one that sees its buffers. Build it after
    any checkpoint load: it keeps the settings it sees when built."""

    def __init__(self, engines: Sequence[MemberEngine]):
        shapes, settings = {tuple(e.dims) for e in engines}, {e.hyper for e in engines}
        if len(shapes) != 1 or len(settings) != 1:
            raise ValueError("the cohort's networks or update settings differ: one engine runs one config")
        (shape,), (self.hyper,) = shapes, settings
        self.dims = np.array(shape, dtype=np.int64)
        if len(engines) == 1:
            self.blocks = engines[0].rows
        else:
            self.blocks = Blocks.allocate(len(engines), int(offsets(self.dims)[-1]))
            for s, engine in enumerate(engines):
                engine.adopt(self.blocks, s)
        self.workspace = Workspace(self.dims)
        self._width = int(shape[0])  # an observation's numbers (the kernels' inputs: (..., width) float32)
        self._each = [np.array([i], dtype=np.int64) for i in range(len(engines))]  # (greedy_action's which)
        self._everyone = (list(range(len(engines))), np.arange(len(engines), dtype=np.int64))
        self._action = np.empty(1, dtype=np.int64)

    def _which(self, which: Sequence[int]) -> np.ndarray:
        """``which`` as the kernels' int64 array: the one built here where it lists every member in order (the
        loop's usual call), else converted."""
        everyone, array = self._everyone
        if type(which) is list and which == everyone:
            return array
        return np.asarray(which, dtype=np.int64)

    def update(self, which: Sequence[int], obs, actions, rewards, next_obs, terminated, weights) -> UpdateResults:
        """Members ``which`` (indices into the engines) learn from their batches, stacked along a first, member
        axis: ``obs`` (k, batch, d), ``actions`` (k, batch), ... (a cohort draw's arrays, passed as they are where
        they are C arrays of the engine's dtypes; for k = 1 the member axis may be left out). Returns their results
        (row k: member ``which[k]``'s), each from that member's weights before its update."""
        n, batch = len(which), np.shape(actions)[-1]
        blocks = self.blocks
        td, losses = np.empty((n, batch), dtype=_F32), np.empty((n, batch), dtype=_F32)
        loss, q_mean = np.empty(n), np.empty(n)
        matrices, vectors = (n, batch, self._width), (n, batch)
        cohort_update_kernel(
            blocks.params, blocks.target_params, blocks.m, blocks.v, self._which(which), self.dims,
            c_array(obs, _F32, matrices), c_array(actions, _I64, vectors), c_array(rewards, _F32, vectors),
            c_array(next_obs, _F32, matrices), c_array(terminated, _F32, vectors), c_array(weights, _F32, vectors),
            self.hyper, blocks.steps, self.workspace.for_batch(batch), td, losses, loss, q_mean,
        )  # fmt: skip
        return UpdateResults(td, losses, loss, q_mean)

    def score(self, which: Sequence[int], obs, actions, rewards, next_obs, terminated) -> Scores:
        """Members ``which``'s :class:`~per_cli.rl.results.Scores` of their batches (laid out as :meth:`update`
        takes them), nothing learnt; row k member ``which[k]``'s."""
        n, batch = len(which), np.shape(actions)[-1]
        td, loss, target_loss = (np.empty((n, batch), dtype=_F32) for _ in range(3))
        matrices, vectors = (n, batch, self._width), (n, batch)
        cohort_score_kernel(
            self.blocks.params, self.blocks.target_params, self._which(which), self.dims,
            c_array(obs, _F32, matrices), c_array(actions, _I64, vectors), c_array(rewards, _F32, vectors),
            c_array(next_obs, _F32, matrices), c_array(terminated, _F32, vectors), self.hyper,
            self.workspace.for_batch(batch), td, loss, target_loss,
        )  # fmt: skip
        return Scores(td, loss, target_loss)

    def greedy(self, which: Sequence[int], obs: Sequence[np.ndarray]) -> np.ndarray:
        """Greedy actions (k,) of members ``which`` for their observations (one per member; argmax_a Q(obs, a),
        the first maximum on ties, like torch.argmax)."""
        n = len(which)
        out = np.empty(n, dtype=np.int64)
        cohort_greedy_kernel(self.blocks.params, self._which(which), self.dims,
                             _stacked(obs, _F32, (n, self._width)), self.workspace.for_batch(1), out)  # fmt: skip
        return out

    def greedy_action(self, i: int, obs: np.ndarray) -> int:
        """Member ``i``'s greedy action for one observation, as :meth:`greedy` gives it, its ``which`` and output
        prebuilt: a solo engine's call at every step of acting and evaluation."""
        cohort_greedy_kernel(self.blocks.params, self._each[i], self.dims, c_array(obs, _F32, (1, self._width)),
                             self.workspace.for_batch(1), self._action)  # fmt: skip
        return self._action.item()

    def td_errors(self, which: Sequence[int], obs, actions, rewards, next_obs, terminated) -> np.ndarray:
        """δ = target − Q(s, a) (k, batch) of member ``which[k]``'s batch k, nothing learnt (sequences of
        per-member arrays, or arrays stacked along a first, member axis; for k = 1 the member axis may be left
        out)."""
        n, batch = len(which), np.shape(actions)[-1]
        acts = _stacked(actions, _I64, (n, batch))
        out = np.empty((n, batch), dtype=np.float32)
        matrices, vectors = (n, batch, self._width), (n, batch)
        cohort_td_kernel(
            self.blocks.params, self.blocks.target_params, self._which(which), self.dims,
            _stacked(obs, _F32, matrices), acts, _stacked(rewards, _F32, vectors), _stacked(next_obs, _F32, matrices),
            _stacked(terminated, _F32, vectors), self.hyper.gamma, self.hyper.double_dqn,
            self.workspace.for_batch(batch), out,
        )  # fmt: skip
        return out
