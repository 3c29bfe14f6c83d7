"""The numba update engine: one whole DQN update of an MLP Q-network in one compiled call.

On a CPU, torch spends far more time dispatching the ~60 small ops of a DQN update (forward, target forward,
loss, autograd backward, gradient clipping, Adam) than computing them: ~1.1 ms per update for a 4-128-2 MLP
whose arithmetic takes a few µs. This engine does the same update by hand in a single ``numba.njit`` kernel:

* online forward on ``obs`` (activations kept), target forward on ``next_obs`` (and the online argmax on
  ``next_obs`` for double DQN);
* TD targets ``r + γ (1 − terminated) next_q`` (a truncated transition still bootstraps);
* per-sample loss (Huber = ``smooth_l1`` with β 1, or MSE), each multiplied by its IS weight before the mean;
* backward by hand; gradient clipping exactly like ``torch.nn.utils.clip_grad_norm_`` (total 2-norm,
  ``coef = max_norm / (norm + 1e-6)``, applied when < 1); Adam exactly like ``torch.optim.Adam`` (bias
  corrections, ``eps`` added outside the square root of v̂).

It returns the per-sample TD errors δ = target − Q(s, a), the loss and the mean Q(s, a), all computed with
the weights from before the update, like the torch path.

Memory layout. Each network's parameters live in ONE flat float32 numpy buffer, in the order of
``module.parameters()`` (per Linear layer: weight (out, in) row-major, then bias). The torch module's
``weight``/``bias`` are re-pointed to be views of that buffer, so acting through torch, evaluation,
``state_dict``/checkpoints and ``load_state_dict`` keep working and see every update the kernel makes in
place. Adam's moments are flat buffers of the same layout; :class:`FlatAdam` saves and loads them in
``torch.optim.Adam``'s own ``state_dict`` format, so a checkpoint moves freely between the engines.

Matrix products. No BLAS (so no SciPy dependency and no BLAS thread pool fighting torch's): the products
are written out, each in the loop order that vectorizes for its shape. Activations are batch-major
(``(batch, features)``, as torch keeps them). A product with a long reduction (a hidden layer's forward or
input gradient, a hidden-to-hidden weight gradient) is computed as 2 × 4 blocks of dot products, so each
loaded value feeds several multiply-adds; one with a short reduction (the 4 inputs of CartPole, the 2
actions) as axpy loops over contiguous rows. The kernels are compiled with reassociation allowed (so the
dot products vectorize; rounding then differs from torch's by float32 noise, ~1e-7 relative) but without
``nnan``/``ninf``, so a diverging loss still shows up as NaN and the loop's finiteness check catches it.

Compiled kernels are cached on disk (``cache=True``, next to this module, or in ``NUMBA_CACHE_DIR``): the
first call in a fresh checkout compiles them (~10 s of CPU), later processes load the cache (~0.5 s).
"""

from __future__ import annotations

import math

import numba
import numpy as np
import torch
from torch import nn

_FASTMATH = {"reassoc", "contract"}  # vectorize reductions and fuse multiply-adds; keep NaN/inf semantics
_JIT = {"cache": True, "fastmath": _FASTMATH, "nogil": True}

_F32, _I64 = np.dtype(np.float32), np.dtype(np.int64)
HUBER, MSE = 0, 1
LOSS_CODES = {"huber": HUBER, "mse": MSE}


# ----------------------------------------------------------------------------------------------------------
# kernels


@numba.njit(**_JIT)
def _offsets(dims):
    """Start of each layer's weight in the flat buffer (its bias follows the weight); the last entry is the
    number of parameters."""
    n_layers = dims.shape[0] - 1
    offs = np.empty(n_layers + 1, dtype=np.int64)
    pos = 0
    for layer in range(n_layers):
        offs[layer] = pos
        pos += dims[layer + 1] * dims[layer] + dims[layer + 1]
    offs[n_layers] = pos
    return offs


@numba.njit(**_JIT)
def _layer(flat, dims, offs, layer):
    """Views (weight (out, in), bias (out,)) of one layer in a flat buffer of parameters or gradients."""
    d_in, d_out = dims[layer], dims[layer + 1]
    w_off = offs[layer]
    b_off = w_off + d_out * d_in
    return flat[w_off:b_off].reshape(d_out, d_in), flat[b_off : b_off + d_out]


@numba.njit(**_JIT)
def _matrix(flat, start, rows, cols):
    """A (rows, cols) C-contiguous view into a flat scratch buffer."""
    return flat[start : start + rows * cols].reshape(rows, cols)


@numba.njit(**_JIT)
def _width(dims):
    width = 0
    for d in dims:
        width = max(width, d)
    return width


@numba.njit(**_JIT)
def _transpose(x, out):
    """out = xᵀ, written row by row (contiguous stores; the strided side is the reads)."""
    rows, cols = x.shape
    for j in range(cols):
        for i in range(rows):
            out[j, i] = x[i, j]


@numba.njit(**_JIT)
def _gemm_nn(a, b, c):
    """c[i, :] = Σ_k a[i, k] b[k, :] for row-major a (m, k), b (k, n): axpy loops over contiguous rows of b,
    the better form when k is small."""
    m, k = a.shape
    n = b.shape[1]
    for i in range(m):
        for j in range(n):
            c[i, j] = 0.0
        for kk in range(k):
            x = a[i, kk]
            for j in range(n):
                c[i, j] += x * b[kk, j]


@numba.njit(**_JIT)
def _gemm_nt(a, b, c, scratch):
    """c[i, j] = Σ_k a[i, k] b[j, k] for row-major a (m, k), b (n, k), c (m, n).

    Long reductions (k >= 16): 2 × 4 blocks of dot products, so each loaded value feeds several multiply-adds
    and the k loop vectorizes (reassociation allowed). Short ones (an input layer of 4 features, an output
    layer of 2 actions): b is transposed into ``scratch`` (>= k * n floats) and rows of c are built as
    vectorized axpy loops over j.
    """
    m, k = a.shape
    n = b.shape[0]
    if k < 16:
        bt = scratch[: k * n].reshape(k, n)
        _transpose(b, bt)
        _gemm_nn(a, bt, c)
        return
    m2 = m - m % 2
    n4 = n - n % 4
    zero = np.float32(0.0)
    for i in range(0, m2, 2):
        for j in range(0, n4, 4):
            s00, s01, s02, s03 = zero, zero, zero, zero
            s10, s11, s12, s13 = zero, zero, zero, zero
            for kk in range(k):
                x0 = a[i, kk]
                x1 = a[i + 1, kk]
                w = b[j, kk]
                s00 += x0 * w
                s10 += x1 * w
                w = b[j + 1, kk]
                s01 += x0 * w
                s11 += x1 * w
                w = b[j + 2, kk]
                s02 += x0 * w
                s12 += x1 * w
                w = b[j + 3, kk]
                s03 += x0 * w
                s13 += x1 * w
            c[i, j], c[i, j + 1], c[i, j + 2], c[i, j + 3] = s00, s01, s02, s03
            c[i + 1, j], c[i + 1, j + 1], c[i + 1, j + 2], c[i + 1, j + 3] = s10, s11, s12, s13
        for j in range(n4, n):
            s0, s1 = zero, zero
            for kk in range(k):
                w = b[j, kk]
                s0 += a[i, kk] * w
                s1 += a[i + 1, kk] * w
            c[i, j], c[i + 1, j] = s0, s1
    for i in range(m2, m):
        for j in range(n):
            s = zero
            for kk in range(k):
                s += a[i, kk] * b[j, kk]
            c[i, j] = s


@numba.njit(**_JIT)
def _dense(w, bias, x, y, relu, scratch):
    """y = x wᵀ + bias (then ReLU): x (batch, in), w (out, in), y (batch, out)."""
    _gemm_nt(x, w, y, scratch)
    batch, d_out = y.shape
    for b in range(batch):
        for j in range(d_out):
            value = y[b, j] + bias[j]
            y[b, j] = np.float32(0.0) if relu and value < 0.0 else value


@numba.njit(**_JIT)
def _forward_out(params, dims, offs, x, buf_a, buf_b, scratch):
    """Q-values (batch, n_actions) of the observations ``x`` (batch, in), computed in two ping-pong buffers."""
    n_layers = dims.shape[0] - 1
    batch = x.shape[0]
    out = x
    for layer in range(n_layers):
        w, bias = _layer(params, dims, offs, layer)
        y = _matrix(buf_a if layer % 2 == 0 else buf_b, 0, batch, dims[layer + 1])
        _dense(w, bias, out, y, layer < n_layers - 1, scratch)
        out = y
    return out


@numba.njit(**_JIT)
def _scratch(dims, batch):
    """Ping-pong activation buffers and the gemm scratch for a forward pass."""
    width = _width(dims)
    return (
        np.empty(width * batch, dtype=np.float32),
        np.empty(width * batch, dtype=np.float32),
        np.empty(width * width, dtype=np.float32),
    )


@numba.njit(**_JIT)
def _next_values(params, tparams, dims, offs, next_obs, double_dqn):
    """max_a' Q'(s', a'), or Q'(s', argmax_a' Q(s', a')) for double DQN, per sample."""
    batch = next_obs.shape[0]
    buf_a, buf_b, scratch = _scratch(dims, batch)
    n_actions = dims[dims.shape[0] - 1]
    q_next = _forward_out(tparams, dims, offs, next_obs, buf_a, buf_b, scratch)
    next_q = np.empty(batch, dtype=np.float32)
    if double_dqn:
        q_target = q_next.copy()
        q_online = _forward_out(params, dims, offs, next_obs, buf_a, buf_b, scratch)
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
    return next_q


@numba.njit(**_JIT)
def _targets(rewards, terminated, next_q, gamma):
    """r + γ (1 − terminated) next_q in float32, in torch's order of operations."""
    g = np.float32(gamma)
    out = np.empty(rewards.shape[0], dtype=np.float32)
    for b in range(rewards.shape[0]):
        out[b] = rewards[b] + (g * (np.float32(1.0) - terminated[b])) * next_q[b]
    return out


@numba.njit(**_JIT)
def td_errors_kernel(params, tparams, dims, obs, actions, rewards, next_obs, terminated, gamma, double_dqn):
    """δ = target − Q(s, a) without learning."""
    offs = _offsets(dims)
    batch = obs.shape[0]
    buf_a, buf_b, scratch = _scratch(dims, batch)
    q = _forward_out(params, dims, offs, obs, buf_a, buf_b, scratch)
    target = _targets(rewards, terminated, _next_values(params, tparams, dims, offs, next_obs, double_dqn), gamma)
    td = np.empty(batch, dtype=np.float32)
    for b in range(batch):
        td[b] = target[b] - q[b, actions[b]]
    return td


@numba.njit(**_JIT)
def greedy_kernel(params, dims, obs):
    """argmax_a Q(obs, a) for one flat observation (the first maximum on ties, like torch.argmax)."""
    buf_a, buf_b, scratch = _scratch(dims, 1)
    q = _forward_out(params, dims, _offsets(dims), obs.reshape(1, obs.shape[0]), buf_a, buf_b, scratch)
    best = 0
    for a in range(1, q.shape[1]):
        if q[0, a] > q[0, best]:
            best = a
    return best


@numba.njit(**_JIT)
def update_kernel(
    params, tparams, m, v, dims, obs, actions, rewards, next_obs, terminated, weights, td_out, hyper, step
):
    """One DQN update in place on ``params``, ``m`` and ``v``; writes δ into ``td_out``.

    ``hyper`` = [gamma, double_dqn, loss code, max_grad_norm (<= 0: no clipping), lr, beta1, beta2, eps];
    ``step`` is Adam's step count after this update (1 on the first). Returns (loss, mean Q(s, a)).
    """
    gamma, double_dqn, loss_code, max_norm = hyper[0], hyper[1] != 0.0, int(hyper[2]), hyper[3]
    lr, beta1, beta2, eps = hyper[4], hyper[5], hyper[6], hyper[7]
    n_layers = dims.shape[0] - 1
    n_actions = dims[n_layers]
    batch = obs.shape[0]
    offs = _offsets(dims)
    n_params = offs[n_layers]
    width = _width(dims)
    scratch = np.empty(width * width, dtype=np.float32)

    # ---- online forward on obs; the outputs of all layers are kept (batch-major) in one buffer ----
    act_off = np.empty(n_layers + 1, dtype=np.int64)  # act_off[l]: layer l's output (act_off[0] unused: obs)
    act_off[0] = 0
    for layer in range(n_layers):
        act_off[layer + 1] = act_off[layer] + (dims[layer] * batch if layer > 0 else 0)
    acts = np.empty(act_off[n_layers] + n_actions * batch, dtype=np.float32)
    x = obs
    for layer in range(n_layers):
        w, bias = _layer(params, dims, offs, layer)
        y = _matrix(acts, act_off[layer + 1], batch, dims[layer + 1])
        _dense(w, bias, x, y, layer < n_layers - 1, scratch)
        x = y
    q_all = x

    # ---- TD targets from the target net (and the online net for double DQN), before any change ----
    target = _targets(rewards, terminated, _next_values(params, tparams, dims, offs, next_obs, double_dqn), gamma)

    # ---- loss = mean over the batch of w_i l(q_i − target_i); dz = dL/dQ, nonzero at the taken actions ----
    dz_buf = np.zeros(width * batch, dtype=np.float32)
    dz = _matrix(dz_buf, 0, batch, n_actions)
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
        if loss_code == HUBER:  # smooth_l1 with beta 1
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

    # ---- backward: dW = dzᵀ x, db = Σ_batch dz, dx = dz W masked by the ReLU ----
    grad = np.empty(n_params, dtype=np.float32)
    dx_buf = np.empty(width * batch, dtype=np.float32)
    dz_t_buf = np.empty(width * batch, dtype=np.float32)
    x_t_buf = np.empty(width * batch, dtype=np.float32)
    w_t_buf = np.empty(width * width, dtype=np.float32)
    for layer in range(n_layers - 1, -1, -1):
        d_in, d_out = dims[layer], dims[layer + 1]
        w, _ = _layer(params, dims, offs, layer)
        gw, gb = _layer(grad, dims, offs, layer)
        x = obs if layer == 0 else _matrix(acts, act_off[layer], batch, d_in)
        dz = _matrix(dz_buf, 0, batch, d_out)
        # dW (out, in) = dzᵀ x, in the form that needs the fewest large transposes
        if d_out < 16:  # the action layer: axpy rows of x
            dz_t = _matrix(dz_t_buf, 0, d_out, batch)
            _transpose(dz, dz_t)
            _gemm_nn(dz_t, x, gw)
        elif d_in < 16:  # the input layer: dWᵀ = xᵀ dz with axpy rows of dz, then a small transpose
            x_t = _matrix(x_t_buf, 0, d_in, batch)
            _transpose(x, x_t)
            gw_t = _matrix(w_t_buf, 0, d_in, d_out)
            _gemm_nn(x_t, dz, gw_t)
            _transpose(gw_t, gw)
        else:  # hidden to hidden: blocked dot products over the batch
            dz_t = _matrix(dz_t_buf, 0, d_out, batch)
            x_t = _matrix(x_t_buf, 0, d_in, batch)
            _transpose(dz, dz_t)
            _transpose(x, x_t)
            _gemm_nt(dz_t, x_t, gw, scratch)
        for j in range(d_out):
            gb[j] = 0.0
        for b in range(batch):
            for j in range(d_out):
                gb[j] += dz[b, j]
        if layer == 0:
            break
        dx = _matrix(dx_buf, 0, batch, d_in)
        if d_out < 16:  # (batch, in) = dz W: few outputs (the action layer), axpy rows of W
            _gemm_nn(dz, w, dx)
        else:
            w_t = _matrix(w_t_buf, 0, d_in, d_out)
            _transpose(w, w_t)
            _gemm_nt(dz, w_t, dx, scratch)
        dz = _matrix(dz_buf, 0, batch, d_in)
        for b in range(batch):  # ReLU: the gradient passes where the activation was positive
            for k in range(d_in):
                dz[b, k] = dx[b, k] if x[b, k] > 0.0 else np.float32(0.0)

    # ---- clip_grad_norm_: total 2-norm over all parameters, coef = max_norm / (norm + 1e-6) if < 1 ----
    if max_norm > 0.0:
        sq = 0.0
        for i in range(n_params):
            sq += np.float64(grad[i]) * np.float64(grad[i])
        total = np.float32(math.sqrt(sq))
        coef = np.float32(max_norm) / (total + np.float32(1e-6))
        if coef < np.float32(1.0):
            for i in range(n_params):
                grad[i] *= coef

    # ---- Adam, as torch.optim.Adam's single-tensor path computes it ----
    bias_correction1 = 1.0 - beta1**step
    bias_correction2 = 1.0 - beta2**step
    step_size = np.float32(lr / bias_correction1)
    bc2_sqrt = np.float32(math.sqrt(bias_correction2))
    one_minus_b1 = np.float32(1.0 - beta1)
    one_minus_b2 = np.float32(1.0 - beta2)
    b2 = np.float32(beta2)
    eps32 = np.float32(eps)
    for i in range(n_params):
        g = grad[i]
        m[i] += one_minus_b1 * (g - m[i])
        v[i] = v[i] * b2 + one_minus_b2 * (g * g)
        denom = np.sqrt(v[i]) / bc2_sqrt + eps32
        params[i] += (-step_size * m[i]) / denom

    return loss_sum / batch, q_sum / batch


@numba.njit(**_JIT)
def lerp_kernel(target, online, weight):
    """target ← target + weight (online − target), as torch's ``lerp_`` rounds it."""
    w = np.float32(weight)
    if weight < 0.5:
        for i in range(target.shape[0]):
            target[i] = target[i] + w * (online[i] - target[i])
    else:
        one_minus = np.float32(1.0 - weight)
        for i in range(target.shape[0]):
            target[i] = online[i] - (online[i] - target[i]) * one_minus


# ----------------------------------------------------------------------------------------------------------
# flat parameters shared with torch


def linear_layers(net: nn.Module) -> list[nn.Linear]:
    """The Linear layers of an MLP Q-network, input to output (ReLU between them, nothing else)."""
    layers = [m for m in net.modules() if isinstance(m, nn.Linear)]
    if not layers:
        raise ValueError("the network has no Linear layers")
    return layers


def layer_dims(net: nn.Module) -> np.ndarray:
    layers = linear_layers(net)
    return np.array([layers[0].in_features] + [lin.out_features for lin in layers], dtype=np.int64)


def share_flat_parameters(net: nn.Module) -> np.ndarray:
    """Move ``net``'s parameters into one flat float32 buffer and re-point the module at views of it.

    The current values are kept. Returns the buffer; writing into it changes the module's parameters.
    """
    layers = linear_layers(net)
    params = [p for lin in layers for p in (lin.weight, lin.bias)]
    if len(params) != len(list(net.parameters())) or any(p.device.type != "cpu" for p in params):
        raise ValueError("the numba engine needs an MLP of Linear layers on the CPU")
    flat = np.empty(sum(p.numel() for p in params), dtype=np.float32)
    pos = 0
    for lin in layers:
        for name in ("weight", "bias"):
            old = getattr(lin, name)
            view = flat[pos : pos + old.numel()].reshape(tuple(old.shape))
            view[...] = old.detach().cpu().numpy()
            setattr(lin, name, nn.Parameter(torch.from_numpy(view), requires_grad=old.requires_grad))
            pos += old.numel()
    return flat


def shares_memory(net: nn.Module, flat: np.ndarray) -> bool:
    """True while every parameter of ``net`` is still a view of ``flat`` (a ``.to()`` or assign-load breaks it)."""
    return all(np.shares_memory(p.detach().numpy(), flat) for p in net.parameters())


class FlatAdam:
    """Adam's state for a flat parameter buffer; the update itself happens inside :func:`update_kernel`.

    ``state_dict`` is in ``torch.optim.Adam``'s format (one entry per parameter tensor, ``step`` as a float
    tensor), so checkpoints load into either engine.
    """

    def __init__(self, shapes: list[tuple[int, ...]], lr: float, betas=(0.9, 0.999), eps: float = 1e-8):
        self.shapes = shapes
        self.sizes = [math.prod(s) for s in shapes]
        n = sum(self.sizes)
        self.m = np.zeros(n, dtype=np.float32)
        self.v = np.zeros(n, dtype=np.float32)
        self.step = 0
        self.lr, self.betas, self.eps = float(lr), (float(betas[0]), float(betas[1])), float(eps)

    def _views(self, flat: np.ndarray) -> list[np.ndarray]:
        out, pos = [], 0
        for shape, size in zip(self.shapes, self.sizes, strict=True):
            out.append(flat[pos : pos + size].reshape(shape))
            pos += size
        return out

    def state_dict(self) -> dict:
        state = {}
        if self.step > 0:
            for i, (m, v) in enumerate(zip(self._views(self.m), self._views(self.v), strict=True)):
                state[i] = {
                    "step": torch.tensor(float(self.step)),
                    "exp_avg": torch.from_numpy(m.copy()),
                    "exp_avg_sq": torch.from_numpy(v.copy()),
                }
        group = {
            "lr": self.lr,
            "betas": self.betas,
            "eps": self.eps,
            "weight_decay": 0,
            "amsgrad": False,
            "maximize": False,
            "foreach": None,
            "capturable": False,
            "differentiable": False,
            "fused": None,
            "decoupled_weight_decay": False,
            "params": list(range(len(self.shapes))),
        }
        return {"state": state, "param_groups": [group]}

    def load_state_dict(self, state_dict: dict) -> None:
        groups = state_dict["param_groups"]
        if len(groups) != 1 or len(groups[0]["params"]) != len(self.shapes):
            raise ValueError("optimizer state does not match this network's parameters")
        group = groups[0]
        if group.get("amsgrad") or group.get("weight_decay") or group.get("maximize"):
            raise ValueError("the numba engine implements plain Adam (no amsgrad, weight decay or maximize)")
        self.lr, self.betas, self.eps = float(group["lr"]), tuple(map(float, group["betas"])), float(group["eps"])
        state = state_dict["state"]
        ids = group["params"]
        if not state:
            self.m[:] = 0.0
            self.v[:] = 0.0
            self.step = 0
            return
        steps = set()
        for pid, m, v in zip(ids, self._views(self.m), self._views(self.v), strict=True):
            entry = state[pid]
            m[...] = np.asarray(torch.as_tensor(entry["exp_avg"]).cpu(), dtype=np.float32)
            v[...] = np.asarray(torch.as_tensor(entry["exp_avg_sq"]).cpu(), dtype=np.float32)
            steps.add(int(float(entry["step"])))
        if len(steps) != 1:
            raise ValueError(f"optimizer state has different step counts per parameter: {sorted(steps)}")
        self.step = steps.pop()


class MLPEngine:
    """The numba DQN update for an online/target pair of MLP Q-networks (see the module docstring)."""

    def __init__(
        self,
        q_net: nn.Module,
        target_net: nn.Module,
        *,
        gamma: float,
        loss: str,
        double_dqn: bool,
        max_grad_norm: float | None,
        lr: float,
        adam_eps: float = 1e-8,
        betas: tuple[float, float] = (0.9, 0.999),
    ):
        self.q_net, self.target_net = q_net, target_net
        self.dims = layer_dims(q_net)
        if not np.array_equal(self.dims, layer_dims(target_net)):
            raise ValueError("online and target networks differ in shape")
        self.params = share_flat_parameters(q_net)
        self.target_params = share_flat_parameters(target_net)
        self.optimizer = FlatAdam([tuple(p.shape) for p in q_net.parameters()], lr, betas, adam_eps)
        self.gamma, self.double_dqn = float(gamma), bool(double_dqn)
        self.loss_code = LOSS_CODES[loss]
        self.max_grad_norm = max_grad_norm
        self._hyper_key: tuple | None = None
        self._hyper_array = np.empty(0)

    def _hyper(self) -> np.ndarray:
        """The kernel's hyperparameter vector, rebuilt only when the optimizer settings change (a load)."""
        opt = self.optimizer
        key = (opt.lr, opt.betas, opt.eps)
        if key != self._hyper_key:
            self._hyper_key = key
            clip = -1.0 if self.max_grad_norm is None else float(self.max_grad_norm)
            self._hyper_array = np.array(
                [self.gamma, float(self.double_dqn), float(self.loss_code), clip, opt.lr, *opt.betas, opt.eps],
                dtype=np.float64,
            )
        return self._hyper_array

    # The kernels take float32 / int64 C-contiguous arrays. What the replay memory hands over already is,
    # and passes through untouched (these checks cost ~0.1 µs; a conversion ~1 µs).

    @staticmethod
    def _matrix(array, batch: int) -> np.ndarray:
        if type(array) is np.ndarray and array.dtype is _F32 and array.ndim == 2 and array.flags.c_contiguous:
            return array
        return np.ascontiguousarray(np.asarray(array).reshape(batch, -1), dtype=np.float32)

    @staticmethod
    def _vector(array, dtype: np.dtype) -> np.ndarray:
        if type(array) is np.ndarray and array.dtype is dtype and array.ndim == 1 and array.flags.c_contiguous:
            return array
        return np.ascontiguousarray(np.asarray(array).reshape(-1), dtype=dtype)

    def update(self, obs, actions, rewards, next_obs, terminated, weights) -> tuple[np.ndarray, float, float]:
        """One gradient step; returns (δ per sample, loss, mean Q(s, a)), all from the pre-update weights."""
        batch = len(actions)
        td = np.empty(batch, dtype=np.float32)
        opt = self.optimizer
        opt.step += 1
        loss, q_mean = update_kernel(
            self.params,
            self.target_params,
            opt.m,
            opt.v,
            self.dims,
            self._matrix(obs, batch),
            self._vector(actions, _I64),
            self._vector(rewards, _F32),
            self._matrix(next_obs, batch),
            self._vector(terminated, _F32),
            self._vector(weights, _F32),
            td,
            self._hyper(),
            opt.step,
        )
        return td, loss, q_mean

    def td_errors(self, obs, actions, rewards, next_obs, terminated) -> np.ndarray:
        batch = len(actions)
        return td_errors_kernel(
            self.params,
            self.target_params,
            self.dims,
            self._matrix(obs, batch),
            self._vector(actions, _I64),
            self._vector(rewards, _F32),
            self._matrix(next_obs, batch),
            self._vector(terminated, _F32),
            self.gamma,
            self.double_dqn,
        )

    def greedy_action(self, obs) -> int:
        return greedy_kernel(self.params, self.dims, self._vector(obs, _F32))

    def sync_target(self, tau: float) -> None:
        if tau >= 1.0:
            np.copyto(self.target_params, self.params)
        else:
            lerp_kernel(self.target_params, self.params, tau)

    def check_shared(self) -> None:
        """Raise if a network's parameters no longer live in the engine's buffers."""
        for name, net, flat in (
            ("q_net", self.q_net, self.params),
            ("target_net", self.target_net, self.target_params),
        ):
            if not shares_memory(net, flat):
                raise RuntimeError(f"{name}'s parameters were replaced; the numba engine no longer sees them")
