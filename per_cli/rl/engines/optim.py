"""Gradient clipping, Adam and Polyak averaging on flat float32 buffers, exactly as torch computes them, and
:class:`FlatAdam`, the optimizer state that checkpoints in ``torch.optim.Adam``'s format."""

from __future__ import annotations

import math

import numba
import numpy as np
import torch

from per_cli.replay.records import Counter
from per_cli.rl.engines.dense import JIT, aligned_empty


@numba.njit(**JIT)
def clip_grad_norm(grad, max_norm):
    """Like ``torch.nn.utils.clip_grad_norm_``: total 2-norm over all parameters, scaled by
    ``coef = max_norm / (norm + 1e-6)`` when that is < 1; ``max_norm <= 0`` means no clipping."""
    if max_norm <= 0.0:
        return
    n = grad.shape[0]
    sq = 0.0
    for i in range(n):
        sq += np.float64(grad[i]) * np.float64(grad[i])
    total = np.float32(math.sqrt(sq))
    coef = np.float32(max_norm) / (total + np.float32(1e-6))
    if coef < np.float32(1.0):
        for i in range(n):
            grad[i] *= coef


@numba.njit(**{**JIT, "error_model": "numpy"})
def adam_step(params, grad, m, v, lr, beta1, beta2, eps, step):
    """One Adam step in place, as ``torch.optim.Adam``'s single-tensor path computes it: bias corrections in
    float64, ``m`` by lerp, ``eps`` added outside the square root of v̂. ``step`` counts from 1.

    Compiled with numpy's error model (Python's zero-divisor check keeps the loop scalar): a zero divisor, never
    met with ``agent.adam_eps > 0``, gives inf/NaN as in torch, which the loop's finiteness check catches."""
    bias_correction1 = 1.0 - beta1**step
    bias_correction2 = 1.0 - beta2**step
    step_size = np.float32(lr / bias_correction1)
    bc2_sqrt = np.float32(math.sqrt(bias_correction2))
    one_minus_b1 = np.float32(1.0 - beta1)
    one_minus_b2 = np.float32(1.0 - beta2)
    b2 = np.float32(beta2)
    eps32 = np.float32(eps)
    for i in range(params.shape[0]):
        g = grad[i]
        m[i] += one_minus_b1 * (g - m[i])
        v[i] = v[i] * b2 + one_minus_b2 * (g * g)
        denom = np.sqrt(v[i]) / bc2_sqrt + eps32
        params[i] += (-step_size * m[i]) / denom


@numba.njit(**JIT)
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


_ADAM_GROUP_DEFAULTS = {
    "weight_decay": 0,
    "amsgrad": False,
    "maximize": False,
    "foreach": None,
    "capturable": False,
    "differentiable": False,
    "fused": None,
    "decoupled_weight_decay": False,
}


class FlatAdam:
    """Adam's state for a flat parameter buffer; the step itself is :func:`adam_step`, inside the update kernel.
    ``state_dict`` is in ``torch.optim.Adam``'s format, so checkpoints load into either engine; a load writes into the
    moments in place (a cohort's blocks may hold them: :meth:`move_to`)."""

    def __init__(self, shapes: list[tuple[int, ...]], lr: float, eps: float = 1e-8):
        self.shapes = shapes
        self.sizes = [math.prod(s) for s in shapes]
        n = sum(self.sizes)
        self.m, self.v = aligned_empty(n), aligned_empty(n)  # 64-byte aligned: see dense.aligned_empty
        self.m[:] = 0.0
        self.v[:] = 0.0
        self.steps = np.zeros(1, dtype=np.int64)  # [the step count]
        self.lr, self.betas, self.eps = float(lr), (0.9, 0.999), float(eps)  # (torch.optim.Adam's betas)

    step = Counter("Adam's step count (updates made)", "steps", name=0)

    def move_to(self, m: np.ndarray, v: np.ndarray, steps: np.ndarray) -> None:
        """Keep the moments in ``m`` and ``v`` and the step count in ``steps[0]`` from now on (values copied)."""
        m[...], v[...], steps[0] = self.m, self.v, self.step
        self.m, self.v, self.steps = m, v, steps

    def _views(self, flat: np.ndarray) -> list[np.ndarray]:
        parts = np.split(flat, np.cumsum(self.sizes)[:-1])
        return [part.reshape(shape) for part, shape in zip(parts, self.shapes, strict=True)]

    def state_dict(self) -> dict:
        state = {}
        if self.step > 0:
            for i, (m, v) in enumerate(zip(self._views(self.m), self._views(self.v), strict=True)):
                state[i] = {
                    "step": torch.tensor(float(self.step)),
                    "exp_avg": torch.from_numpy(m.copy()),
                    "exp_avg_sq": torch.from_numpy(v.copy()),
                }
        group = {"lr": self.lr, "betas": self.betas, "eps": self.eps, **_ADAM_GROUP_DEFAULTS}
        group["params"] = list(range(len(self.shapes)))
        return {"state": state, "param_groups": [group]}

    def load_state_dict(self, state_dict: dict) -> None:
        groups = state_dict["param_groups"]
        if len(groups) != 1 or len(groups[0]["params"]) != len(self.shapes):
            raise ValueError("optimizer state does not match this network's parameters")
        (group,) = groups
        if group.get("amsgrad") or group.get("weight_decay") or group.get("maximize"):
            raise ValueError("the numba engine implements plain Adam (no amsgrad, weight decay or maximize)")
        if "momentum" in group or "alpha" in group:
            raise ValueError("optimizer state is not Adam's; the numba engine implements Adam only")
        self.lr, self.betas, self.eps = float(group["lr"]), tuple(map(float, group["betas"])), float(group["eps"])
        state = state_dict["state"]
        if not state:
            self.m[:] = 0.0
            self.v[:] = 0.0
            self.step = 0
            return
        steps = set()
        for pid, m, v in zip(group["params"], self._views(self.m), self._views(self.v), strict=True):
            entry = state[pid]
            m[...] = np.asarray(torch.as_tensor(entry["exp_avg"]).cpu(), dtype=np.float32)
            v[...] = np.asarray(torch.as_tensor(entry["exp_avg_sq"]).cpu(), dtype=np.float32)
            steps.add(int(float(entry["step"])))
        if len(steps) != 1:
            raise ValueError(f"optimizer state has different step counts per parameter: {sorted(steps)}")
        self.step = steps.pop()
