"""The numba engine's three entry points: one whole DQN update, TD errors without learning, a greedy action.

Each works in a workspace, one flat float32 buffer that the engine allocates once (:func:`workspace_size`)
and that :func:`carve` cuts into the scratch buffers of a call, so a call allocates nothing but its outputs.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from per_cli.rl.engines.dense import JIT, aligned, aligned_empty, max_width, offsets
from per_cli.rl.engines.optim import adam_step, clip_grad_norm
from per_cli.rl.engines.passes import activation_offsets, backward, forward_keep, forward_out
from per_cli.rl.engines.td import loss_and_dq, next_values, targets


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
    """A call's scratch buffers, views of one workspace (:func:`carve`), in :func:`_sizes`' order."""

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


@numba.njit(**JIT)
def _sizes(dims, batch, act_off):
    """Floats of each workspace buffer, in order (fills ``act_off``, see activation_offsets): scratch, w_t (width²
    each); buf_a, buf_b, q_copy, dz, dx, dz_t, x_t (width·batch each); next_q, target (batch each); acts (every
    layer's output); grad (one float per parameter). Each but the last rounded up to whole cache lines, so that
    every buffer of a 64-byte aligned workspace starts on a cache line."""
    width = max_width(dims)
    sizes = np.empty(13, dtype=np.int64)
    sizes[0:2] = aligned(width * width)
    sizes[2:9] = aligned(width * batch)
    sizes[9:11] = aligned(batch)
    sizes[11] = aligned(activation_offsets(dims, batch, act_off))
    sizes[12] = offsets(dims)[-1]  # exact: clip_grad_norm takes the norm of the whole buffer
    return sizes


@numba.njit(**JIT)
def workspace_size(dims, batch):
    """Floats of workspace that calls with up to ``batch`` samples need."""
    return _sizes(dims, batch, np.empty(dims.shape[0], dtype=np.int64)).sum()


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
def carve(ws, dims, batch, act_off):
    """The workspace's buffers for a call on ``batch`` samples."""
    e = np.cumsum(_sizes(dims, batch, act_off))
    return Buffers(
        ws[0 : e[0]], ws[e[0] : e[1]], ws[e[1] : e[2]], ws[e[2] : e[3]], ws[e[3] : e[4]], ws[e[4] : e[5]],
        ws[e[5] : e[6]], ws[e[6] : e[7]], ws[e[7] : e[8]], ws[e[8] : e[9]], ws[e[9] : e[10]],
        ws[e[10] : e[11]], ws[e[11] : e[12]],
    )  # fmt: skip


@numba.njit(**JIT)
def update_kernel(
    params, tparams, m, v, dims, obs, actions, rewards, next_obs, terminated, weights, td_out, hyper, step, ws
):
    """One DQN update in place on ``params``, ``m`` and ``v``; writes δ into ``td_out``.

    ``hyper`` is the run's :class:`UpdateSettings`; ``step`` is Adam's step count after this update (1 on the
    first); ``ws`` a workspace of at least ``workspace_size(dims, batch)`` floats.
    Returns (loss, mean Q(s, a)), from the weights before the update.
    """
    batch = obs.shape[0]
    act_off = np.empty(dims.shape[0], dtype=np.int64)
    bufs = carve(ws, dims, batch, act_off)
    return update_member(
        params, tparams, m, v, dims, offsets(dims), act_off, bufs, obs, actions, rewards, next_obs, terminated,
        weights, td_out, hyper, step,
    )  # fmt: skip


@numba.njit(**JIT)
def update_member(
    params, tparams, m, v, dims, offs, act_off, bufs, obs, actions, rewards, next_obs, terminated, weights, td_out,
    hyper, step,
):  # fmt: skip
    """:func:`update_kernel` on buffers already carved (``bufs``, ``act_off``: :func:`carve` for this batch size;
    ``offs``: :func:`offsets`), so that a cohort carves once per call, not once per member."""
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
    loss_sum, q_sum = loss_and_dq(
        q_all, b.target, actions, weights, hyper.loss_code, hyper.kappa, hyper.alpha, td_out, dq
    )
    backward(params, b.grad, dims, offs, obs, actions, b.acts, act_off, b.dz, b.dx, b.dz_t, b.x_t, b.w_t, b.scratch)
    clip_grad_norm(b.grad, hyper.max_grad_norm)
    adam_step(params, b.grad, m, v, hyper.lr, hyper.beta1, hyper.beta2, hyper.eps, step)
    return loss_sum / batch, q_sum / batch


@numba.njit(**JIT)
def td_errors_kernel(params, tparams, dims, obs, actions, rewards, next_obs, terminated, gamma, double_dqn, ws):
    """δ = target − Q(s, a) without learning."""
    td = np.empty(obs.shape[0], dtype=np.float32)
    act_off = np.empty(dims.shape[0], dtype=np.int64)
    bufs = carve(ws, dims, obs.shape[0], act_off)
    td_member(params, tparams, dims, offsets(dims), bufs, obs, actions, rewards, next_obs, terminated, gamma,
              double_dqn, td)  # fmt: skip
    return td


@numba.njit(**JIT)
def td_member(params, tparams, dims, offs, bufs, obs, actions, rewards, next_obs, terminated, gamma, double_dqn, td):
    """:func:`td_errors_kernel` into ``td`` on buffers already carved (see :func:`update_member`)."""
    b = bufs
    next_values(params, tparams, dims, offs, next_obs, double_dqn, b.buf_a, b.buf_b, b.q_copy, b.scratch, b.next_q)
    targets(rewards, terminated, b.next_q, gamma, b.target)
    q = forward_out(params, dims, offs, obs, b.buf_a, b.buf_b, b.scratch)
    for j in range(obs.shape[0]):
        td[j] = b.target[j] - q[j, actions[j]]


@numba.njit(**JIT)
def greedy_kernel(params, dims, obs, ws):
    """argmax_a Q(obs, a) for one flat observation (the first maximum on ties, like torch.argmax)."""
    act_off = np.empty(dims.shape[0], dtype=np.int64)
    return greedy_member(params, dims, offsets(dims), carve(ws, dims, 1, act_off), obs)


@numba.njit(**JIT)
def greedy_member(params, dims, offs, bufs, obs):
    """:func:`greedy_kernel` on buffers already carved for one sample (see :func:`update_member`)."""
    q = forward_out(params, dims, offs, obs.reshape(1, obs.shape[0]), bufs.buf_a, bufs.buf_b, bufs.scratch)
    best = 0
    for a in range(1, q.shape[1]):
        if q[0, a] > q[0, best]:
            best = a
    return best
