"""TD targets, the per-sample loss and its gradient with respect to Q, as the torch engine computes them."""

from __future__ import annotations

import numba
import numpy as np

from per_cli.rl.engines.dense import JIT
from per_cli.rl.engines.passes import forward_out

# the losses of per_cli.rl.losses.LOSS_NAMES by their codes in the kernels' ``hyper`` (constants a kernel reads
# live in a numba module: per_cli.compiled_cache)
HUBER, MSE, LAP, PAL = 0, 1, 2, 3
LOSS_CODES = {"huber": HUBER, "mse": MSE, "lap": LAP, "pal": PAL}


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
def batch_lambda(q_all, target, actions, kappa, alpha):
    """PAL's λ in float32: the batch mean of max(|q − target|, κ)^α at the taken actions, as
    :func:`per_cli.rl.losses.pal_lambda` computes it (a NaN difference stays NaN, as torch's ``clamp`` keeps it)."""
    batch = q_all.shape[0]
    total = np.float32(0.0)
    for b in range(batch):
        size = abs(q_all[b, actions[b]] - target[b])
        total += (kappa if size < kappa else size) ** alpha
    return total / np.float32(batch)


@numba.njit(**JIT)
def loss_and_dq(q_all, target, actions, weights, loss_code, kappa, alpha, td_out, loss_out, dz):
    """(Σ_i w_i l(q_i − target_i) (for PAL divided by λ), Σ_i q_i, λ (1 but for PAL)); writes δ = target − q into
    ``td_out``, each sample's loss (no IS weight, before 1/λ) into ``loss_out`` and dL/dQ of the mean into the zeroed
    ``dz`` (batch, n_actions). The losses of :mod:`per_cli.rl.losses`, with the gradient's products in autograd's order
    and constants rounded to float32 as torch rounds a Python scalar, so the engines agree to float32 rounding."""
    batch = q_all.shape[0]
    one, half = np.float32(1.0), np.float32(0.5)
    k, a = np.float32(kappa), np.float32(alpha)
    inv_batch = one / np.float32(batch)
    lam = one
    if loss_code == PAL:
        lam = batch_lambda(q_all, target, actions, k, a)
        inv_batch = (one / lam) / np.float32(batch)
    c_in, c_out = np.float32(kappa**alpha), np.float32(kappa / (1.0 + alpha))
    power, slope = np.float32(1.0 + alpha), np.float32((1.0 + alpha) - 1.0)
    loss_sum = 0.0
    q_sum = 0.0
    for b in range(batch):
        a_b = actions[b]
        q = q_all[b, a_b]
        diff = q - target[b]
        td_out[b] = target[b] - q
        q_sum += q
        w_b = weights[b]
        gw = inv_batch * w_b
        sign = one if diff > 0 else (-one if diff < 0 else np.float32(0.0))
        size = abs(diff)
        if loss_code == HUBER:
            if size < one:
                term = half * diff * diff
                dz[b, a_b] = gw * diff
            else:
                term = size - half
                dz[b, a_b] = gw * sign
        elif loss_code == MSE:
            term = diff * diff
            dz[b, a_b] = gw * (np.float32(2.0) * diff)
        elif loss_code == LAP:
            if size < k:
                term = half * diff * diff
                dz[b, a_b] = gw * diff
            else:
                term = k * size
                dz[b, a_b] = (gw * k) * sign
        else:
            if size < k:
                term = c_in * (half * diff * diff)
                dz[b, a_b] = (gw * c_in) * diff
            else:
                term = c_out * size**power
                dz[b, a_b] = ((gw * c_out) * (power * size**slope)) * sign
        loss_out[b] = term
        loss_sum += w_b * term
    return loss_sum / lam, q_sum, lam
