"""One member's computations of the numba engine: a DQN update, TD errors and scores without learning, a greedy
action; :mod:`.cohort`'s entry points call them per member. Each works in one flat float32 workspace that
:func:`carve` cuts once per call, so a call allocates nothing but its outputs."""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from per_cli.rl.engines.dense import JIT, aligned, aligned_empty, offsets
from per_cli.rl.engines.optim import adam_step, clip_grad_norm
from per_cli.rl.engines.passes import activation_offsets, backward, forward_keep, forward_out
from per_cli.rl.engines.td import PAL, loss_and_dq, next_values, targets


class UpdateSettings(NamedTuple):
    """The settings one DQN update reads, the same for every update of a run (numba passes them as a tuple)."""

    gamma: float
    double_dqn: bool
    loss_code: int  # ``td.LOSS_CODES``
    max_grad_norm: float  # <= 0: no clipping
    lr: float
    beta1: float
    beta2: float
    eps: float
    kappa: float  # LAP's and PAL's κ (see :func:`~per_cli.rl.engines.td.loss_and_dq`)
    alpha: float  # LAP's and PAL's α


class Buffers(NamedTuple):
    """A call's scratch buffers, views of one workspace (:func:`carve`), in the workspace's order."""

    scratch: np.ndarray
    w_t: np.ndarray
    buf_a: np.ndarray
    buf_b: np.ndarray
    q_copy: np.ndarray
    dz: np.ndarray
    dx: np.ndarray
    dz_t: np.ndarray
    x_t: np.ndarray
    next_q: np.ndarray
    target: np.ndarray
    acts: np.ndarray
    grad: np.ndarray


class Sizes(NamedTuple):
    """Floats of each kind of workspace buffer. Each but ``grad`` is rounded up to whole cache lines, so that every
    buffer of a 64-byte aligned workspace starts on a cache line."""

    square: int  # width² (scratch, w_t)
    wide: int  # width · batch (buf_a, buf_b, q_copy, dz, dx, dz_t, x_t)
    narrow: int  # batch (next_q, target)
    acts: int  # every layer's output
    grad: int  # one float per parameter, exact: clip_grad_norm takes the norm of the whole buffer


@numba.njit(**JIT)
def _sizes(dims, batch, act_off):
    """The :class:`Sizes` of a call on ``batch`` samples (fills ``act_off``, see activation_offsets)."""
    width = dims.max()
    return Sizes(
        aligned(width * width), aligned(width * batch), aligned(batch),
        aligned(activation_offsets(dims, batch, act_off)), offsets(dims)[-1],
    )  # fmt: skip


@numba.njit(**JIT)
def workspace_size(dims, batch):
    """Floats of workspace that calls with up to ``batch`` samples need (the buffers :func:`carve` cuts)."""
    s = _sizes(dims, batch, np.empty(dims.shape[0], dtype=np.int64))
    return 2 * s.square + 7 * s.wide + 2 * s.narrow + s.acts + s.grad


class Workspace:
    """One engine's scratch memory: allocated once (64-byte aligned), grown only when a call brings a larger
    batch."""

    def __init__(self, dims: np.ndarray):
        self.dims = dims
        self.buffer = np.empty(0, dtype=np.float32)
        self.batch = 0

    def for_batch(self, batch: int) -> np.ndarray:
        if batch > self.batch:
            self.buffer = aligned_empty(workspace_size(self.dims, batch))
            self.batch = batch
        return self.buffer


@numba.njit(**JIT)
def _take(ws, start, size):
    """(the ``size`` floats of ``ws`` from ``start``, where the next buffer starts)."""
    return ws[start : start + size], start + size


@numba.njit(**JIT)
def carve(ws, dims, batch, act_off):
    """The workspace's buffers for a call on ``batch`` samples, one after another in :class:`Buffers`' order."""
    s = _sizes(dims, batch, act_off)
    scratch, at = _take(ws, 0, s.square)
    w_t, at = _take(ws, at, s.square)
    buf_a, at = _take(ws, at, s.wide)
    buf_b, at = _take(ws, at, s.wide)
    q_copy, at = _take(ws, at, s.wide)
    dz, at = _take(ws, at, s.wide)
    dx, at = _take(ws, at, s.wide)
    dz_t, at = _take(ws, at, s.wide)
    x_t, at = _take(ws, at, s.wide)
    next_q, at = _take(ws, at, s.narrow)
    target, at = _take(ws, at, s.narrow)
    acts, at = _take(ws, at, s.acts)
    grad, at = _take(ws, at, s.grad)
    return Buffers(scratch, w_t, buf_a, buf_b, q_copy, dz, dx, dz_t, x_t, next_q, target, acts, grad)


@numba.njit(**JIT)
def update_member(
    params, tparams, m, v, dims, offs, act_off, bufs, obs, actions, rewards, next_obs, terminated, weights, td_out,
    loss_out, hyper, step,
):  # fmt: skip
    """One DQN update in place on ``params``, ``m`` and ``v``; writes δ into ``td_out`` and each sample's loss (no IS
    weight; for PAL divided by λ) into ``loss_out``, as :func:`~per_cli.rl.engines.td.loss_and_dq` does.
    ``step`` is Adam's step count after this update; ``bufs``, ``act_off`` come from :func:`carve`, ``offs`` from
    :func:`offsets`. Returns (loss, mean Q(s, a)) from the weights before the update."""
    batch = obs.shape[0]
    n_actions = dims[dims.shape[0] - 1]
    b = bufs
    q_all = forward_keep(params, dims, offs, obs, b.acts, act_off, b.scratch)
    # TD targets from the target net (and the online net for double DQN), before any change
    next_values(params, tparams, dims, offs, next_obs, hyper.double_dqn, b.buf_a, b.buf_b, b.q_copy, b.scratch,
                b.next_q)  # fmt: skip
    targets(rewards, terminated, b.next_q, hyper.gamma, b.target)
    b.dz[: batch * n_actions] = 0.0
    dq = b.dz[: batch * n_actions].reshape(batch, n_actions)
    loss_sum, q_sum, lam = loss_and_dq(
        q_all, b.target, actions, weights, hyper.loss_code, hyper.kappa, hyper.alpha, td_out, loss_out, dq
    )
    if hyper.loss_code == PAL:  # (each sample's loss as the value counts it)
        for j in range(batch):
            loss_out[j] = loss_out[j] / lam
    backward(params, b.grad, dims, offs, obs, actions, b.acts, act_off, b.dz, b.dx, b.dz_t, b.x_t, b.w_t, b.scratch)
    clip_grad_norm(b.grad, hyper.max_grad_norm)
    adam_step(params, b.grad, m, v, hyper.lr, hyper.beta1, hyper.beta2, hyper.eps, step)
    return loss_sum / batch, q_sum / batch


@numba.njit(**JIT)
def td_member(params, tparams, dims, offs, bufs, obs, actions, rewards, next_obs, terminated, gamma, double_dqn, td):
    """δ = target − Q(s, a) into ``td`` without learning, on buffers already carved (see :func:`update_member`)."""
    b = bufs
    next_values(params, tparams, dims, offs, next_obs, double_dqn, b.buf_a, b.buf_b, b.q_copy, b.scratch, b.next_q)
    targets(rewards, terminated, b.next_q, gamma, b.target)
    q = forward_out(params, dims, offs, obs, b.buf_a, b.buf_b, b.scratch)
    for j in range(obs.shape[0]):
        td[j] = b.target[j] - q[j, actions[j]]


@numba.njit(**JIT)
def score_member(params, tparams, dims, offs, bufs, obs, actions, rewards, next_obs, terminated, hyper, td, loss,
                 target_loss):  # fmt: skip
    """The network's opinion of a batch without learning: δ into ``td``; each sample's loss (no IS weight, before
    PAL's 1/λ) of the online network's Q(s, a) into ``loss`` and of the target network's into ``target_loss``, both
    against the same TD target. The update's own :func:`~per_cli.rl.engines.td.loss_and_dq` computes them, with
    weights of one (so the loss is written once in this engine)."""
    b = bufs
    batch = obs.shape[0]
    n_actions = dims[dims.shape[0] - 1]
    next_values(params, tparams, dims, offs, next_obs, hyper.double_dqn, b.buf_a, b.buf_b, b.q_copy, b.scratch,
                b.next_q)  # fmt: skip
    targets(rewards, terminated, b.next_q, hyper.gamma, b.target)
    ones = b.next_q[:batch]  # (next_q is spent once the targets are made)
    ones[:] = 1.0
    dq = b.dz[: batch * n_actions].reshape(batch, n_actions)
    dq[:] = 0.0
    q = forward_out(params, dims, offs, obs, b.buf_a, b.buf_b, b.scratch)
    loss_and_dq(q, b.target, actions, ones, hyper.loss_code, hyper.kappa, hyper.alpha, td, loss, dq)
    q_target = forward_out(tparams, dims, offs, obs, b.buf_a, b.buf_b, b.scratch)
    dq[:] = 0.0
    loss_and_dq(q_target, b.target, actions, ones, hyper.loss_code, hyper.kappa, hyper.alpha, b.dx[:batch],
                target_loss, dq)  # fmt: skip


@numba.njit(**JIT)
def greedy_member(params, dims, offs, bufs, obs):
    """argmax_a Q(obs, a) for one flat observation (the first maximum on ties, like torch.argmax), on buffers
    already carved for one sample (see :func:`update_member`)."""
    q = forward_out(params, dims, offs, obs.reshape(1, obs.shape[0]), bufs.buf_a, bufs.buf_b, bufs.scratch)
    best = 0
    for a in range(1, q.shape[1]):
        if q[0, a] > q[0, best]:
            best = a
    return best
