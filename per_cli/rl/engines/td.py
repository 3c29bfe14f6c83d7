"""TD targets, the per-sample loss and its gradient with respect to Q, as the torch engine computes them."""

from __future__ import annotations

import numba
import numpy as np

from per_cli.rl.engines.dense import JIT
from per_cli.rl.engines.passes import forward_out

HUBER, MSE = 0, 1
LOSS_CODES = {"huber": HUBER, "mse": MSE}


@numba.njit(**JIT)
def next_values(params, tparams, dims, offs, next_obs, double_dqn, buf_a, buf_b, q_copy, scratch, next_q):
    """next_q ← max_a' Q'(s', a'), or Q'(s', argmax_a' Q(s', a')) for double DQN (first maximum on ties)."""
    batch = next_obs.shape[0]
    n_actions = dims[dims.shape[0] - 1]
    q_next = forward_out(tparams, dims, offs, next_obs, buf_a, buf_b, scratch)
    if double_dqn:
        q_target = q_copy[: batch * n_actions].reshape(batch, n_actions)
        q_target[:] = q_next
        q_online = forward_out(params, dims, offs, next_obs, buf_a, buf_b, scratch)
        for b in range(batch):
            best = 0
            for a in range(1, n_actions):
                if q_online[b, a] > q_online[b, best]:
                    best = a
            next_q[b] = q_target[b, best]
    else:
        for b in range(batch):
            value = q_next[b, 0]
            for a in range(1, n_actions):
                value = max(value, q_next[b, a])
            next_q[b] = value


@numba.njit(**JIT)
def targets(rewards, terminated, next_q, gamma, out):
    """out ← r + γ (1 − terminated) next_q in float32, in torch's order of operations (only termination stops
    the bootstrap; a transition cut by a time limit still bootstraps)."""
    g = np.float32(gamma)
    for b in range(rewards.shape[0]):
        out[b] = rewards[b] + (g * (np.float32(1.0) - terminated[b])) * next_q[b]


@numba.njit(**JIT)
def loss_and_dq(q_all, target, actions, weights, loss_code, td_out, dz):
    """Σ_i w_i l(q_i − target_i) and Σ_i q_i over the batch; writes δ = target − q into ``td_out`` and dL/dQ
    (of the batch mean, nonzero only at the taken actions) into ``dz`` (batch, n_actions), which must be zero.

    Huber is torch's ``smooth_l1`` with β 1 (gradient ``diff`` inside, ``sign(diff)`` outside); MSE's gradient is
    ``2 diff``.
    """
    batch = q_all.shape[0]
    inv_batch = np.float32(1.0) / np.float32(batch)
    loss_sum = 0.0
    q_sum = 0.0
    for b in range(batch):
        a = actions[b]
        q = q_all[b, a]
        diff = q - target[b]
        td_out[b] = target[b] - q
        q_sum += q
        w_b = weights[b]
        if loss_code == HUBER:
            if abs(diff) < np.float32(1.0):
                loss_sum += w_b * (np.float32(0.5) * diff * diff)
                g = diff
            else:
                loss_sum += w_b * (abs(diff) - np.float32(0.5))
                g = np.float32(1.0) if diff > 0 else (np.float32(-1.0) if diff < 0 else np.float32(0.0))
        else:
            loss_sum += w_b * (diff * diff)
            g = np.float32(2.0) * diff
        dz[b, a] = (inv_batch * w_b) * g
    return loss_sum, q_sum
