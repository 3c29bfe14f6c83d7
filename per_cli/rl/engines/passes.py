"""Forward and backward passes of a ReLU MLP over flat parameters (see :mod:`.dense` for the layout).

Every buffer comes from the engine's preallocated workspace (:mod:`.kernels`); nothing here allocates.
"""

from __future__ import annotations

import numba

from per_cli.rl.engines.action_layer import action_input_gradient, action_weight_gradient
from per_cli.rl.engines.dense import JIT, SHORT, aligned, layer_views, matrix, transpose
from per_cli.rl.engines.products import (
    column_sums,
    dense,
    gemm_nn,
    gemm_nn_masked,
    gemm_nt,
    relu_mask,
)


@numba.njit(**JIT)
def forward_out(params, dims, offs, x, buf_a, buf_b, scratch):
    """Q-values (batch, n_actions) of the observations ``x`` (batch, in), computed in two ping-pong buffers
    (the result is a view into one of them)."""
    n_layers = dims.shape[0] - 1
    batch = x.shape[0]
    out = x
    for layer in range(n_layers):
        w, bias = layer_views(params, dims, offs, layer)
        y = matrix(buf_a if layer % 2 == 0 else buf_b, 0, batch, dims[layer + 1])
        dense(w, bias, out, y, layer < n_layers - 1, scratch)
        out = y
    return out


@numba.njit(**JIT)
def activation_offsets(dims, batch, act_off):
    """act_off[l]: where layer l's input activations start in the ``acts`` buffer (act_off[0] unused: the
    input is ``obs`` itself); act_off[n_layers] is where the Q-values start. Returns the buffer's size. Each
    layer's part starts on a cache line (offsets rounded up to ALIGN floats)."""
    n_layers = dims.shape[0] - 1
    act_off[0] = 0
    for layer in range(n_layers):
        act_off[layer + 1] = act_off[layer] + (aligned(dims[layer] * batch) if layer > 0 else 0)
    return act_off[n_layers] + dims[n_layers] * batch


@numba.njit(**JIT)
def forward_keep(params, dims, offs, obs, acts, act_off, scratch):
    """Online forward on ``obs`` keeping every layer's output (batch-major) in ``acts``; returns Q (batch, A)."""
    n_layers = dims.shape[0] - 1
    batch = obs.shape[0]
    x = obs
    for layer in range(n_layers):
        w, bias = layer_views(params, dims, offs, layer)
        y = matrix(acts, act_off[layer + 1], batch, dims[layer + 1])
        dense(w, bias, x, y, layer < n_layers - 1, scratch)
        x = y
    return x


@numba.njit(**JIT)
def weight_gradient(dz, x, gw, dz_t_buf, x_t_buf, w_t_buf, scratch):
    """gw (out, in) = dzᵀ x, in the form that needs the fewest large transposes for the layer's shape."""
    batch, d_out = dz.shape
    d_in = x.shape[1]
    if d_out < SHORT:  # the action layer: axpy rows of x
        dz_t = matrix(dz_t_buf, 0, d_out, batch)
        transpose(dz, dz_t)
        gemm_nn(dz_t, x, gw)
    elif d_in < SHORT:  # the input layer: dWᵀ = xᵀ dz with axpy rows of dz, then a small transpose
        x_t = matrix(x_t_buf, 0, d_in, batch)
        transpose(x, x_t)
        gw_t = matrix(w_t_buf, 0, d_in, d_out)
        gemm_nn(x_t, dz, gw_t)
        transpose(gw_t, gw)
    else:  # hidden to hidden: blocked dot products over the batch
        dz_t = matrix(dz_t_buf, 0, d_out, batch)
        x_t = matrix(x_t_buf, 0, d_in, batch)
        transpose(dz, dz_t)
        transpose(x, x_t)
        gemm_nt(dz_t, x_t, gw, scratch)


@numba.njit(**JIT)
def input_gradient(dz, w, x, dx, w_t_buf, scratch):
    """dx (batch, in) = dz W, then the ReLU mask of the layer's input ``x``: the previous layer's dz."""
    d_out, d_in = w.shape
    if d_out < SHORT:  # few outputs (the action layer): axpy rows of W, each masked while in cache
        gemm_nn_masked(dz, w, dx, x)
        return
    w_t = matrix(w_t_buf, 0, d_in, d_out)
    transpose(w, w_t)
    gemm_nt(dz, w_t, dx, scratch)
    relu_mask(dx, x)


@numba.njit(**JIT)
def backward(
    params, grad, dims, offs, obs, actions, acts, act_off, dz_buf, dx_buf, dz_t_buf, x_t_buf, w_t_buf, scratch
):  # fmt: skip
    """Gradients of all parameters into ``grad``, from dL/dQ in ``dz_buf`` (batch, n_actions), zero but at each row's
    taken action. Per layer from the output: dW = dzᵀ x, db = Σ dz, dx = dz W, then the ReLU mask; ``dz_buf`` and
    ``dx_buf`` take turns. An action layer under SHORT actions skips dz's zeros
    (:func:`~.action_layer.action_weight_gradient`)."""
    n_layers = dims.shape[0] - 1
    batch = obs.shape[0]
    dz_flat, dx_flat = dz_buf, dx_buf
    for layer in range(n_layers - 1, -1, -1):
        d_in, d_out = dims[layer], dims[layer + 1]
        w, _ = layer_views(params, dims, offs, layer)
        gw, gb = layer_views(grad, dims, offs, layer)
        x = obs if layer == 0 else matrix(acts, act_off[layer], batch, d_in)
        dz = matrix(dz_flat, 0, batch, d_out)
        top = layer == n_layers - 1 and d_out < SHORT  # (where the full products are the exact axpy ones)
        if top:
            action_weight_gradient(dz, actions, x, gw)
        else:
            weight_gradient(dz, x, gw, dz_t_buf, x_t_buf, w_t_buf, scratch)
        column_sums(dz, gb)
        if layer == 0:
            break
        dx = matrix(dx_flat, 0, batch, d_in)
        if top:
            action_input_gradient(dz, actions, w, dx, x)
        else:
            input_gradient(dz, w, x, dx, w_t_buf, scratch)
        dz_flat, dx_flat = dx_flat, dz_flat
