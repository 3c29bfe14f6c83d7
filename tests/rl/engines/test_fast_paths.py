"""The numba engine's fast paths compute bit for bit what the plain loops they replace compute.

The references are the loops as they were before the fast paths: a product as one FMA per term over the whole
row, the bias and ReLU or the ReLU mask as a separate pass, Adam under Python's error model (the scalar loop).
Besides, the workspace's layout (cache-line aligned parts, padding) must not change a value: padding is never
read, so a workspace full of NaN gives the same update as a zeroed one.
"""

from __future__ import annotations

import numba
import numpy as np
import pytest

from per_cli.rl.engines import action_layer, cohort, dense, kernels, passes, products
from per_cli.rl.engines.optim import adam_step
from per_cli.rl.engines.td import LOSS_CODES

_REF = {"fastmath": {"contract"}}  # as the replaced loops: FMAs, no reordering


@numba.njit(**_REF)
def _axpy_reference(a, b, c):
    """The former gemm_nn: c[i, :] = 0, then one pass over the row per term."""
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            c[i, j] = 0.0
        for kk in range(a.shape[1]):
            x = a[i, kk]
            for j in range(b.shape[1]):
                c[i, j] += x * b[kk, j]


@numba.njit(**_REF)
def _bias_relu_reference(y, bias, relu):
    for b in range(y.shape[0]):
        for j in range(y.shape[1]):
            value = y[b, j] + bias[j]
            y[b, j] = np.float32(0.0) if relu and value < 0.0 else value


@numba.njit(**_REF)
def _column_sums_reference(x, out):
    for j in range(x.shape[1]):
        out[j] = 0.0
    for b in range(x.shape[0]):
        for j in range(x.shape[1]):
            out[j] += x[b, j]


# adam_step's own body compiled under numba's default (Python) error model, which keeps the loop scalar
_adam_reference = numba.njit(fastmath={"reassoc", "contract"})(adam_step.py_func)


def _f32(rng, *shape):
    x = rng.normal(size=shape).astype(np.float32)
    x[rng.random(shape) < 0.1] = 0.0  # exact zeros: the ReLU and mask edges
    return x


# (rows, reduction, columns): every remainder of the four-term passes, rows at and above DIRECT_ROWS
SHAPES = [(m, k, n) for m in (1, 3, 64) for k in (1, 2, 3, 4, 5, 7, 64) for n in (1, 9, 128)]


@pytest.mark.parametrize(("m", "k", "n"), SHAPES)
def test_products_equal_one_pass_per_term(m, k, n):
    rng = np.random.default_rng(m * 1000 + k * 10 + n)
    a, b, x, bias = _f32(rng, m, k), _f32(rng, k, n), _f32(rng, m, n), _f32(rng, n)
    want = np.empty((m, n), np.float32)
    _axpy_reference(a, b, want)
    got = np.full((m, n), np.nan, np.float32)
    products.gemm_nn(a, b, got)
    assert got.tobytes() == want.tobytes()
    direct = np.full((m, n), np.nan, np.float32)
    products.gemm_nt_direct(a, np.ascontiguousarray(b.T), direct)
    assert direct.tobytes() == want.tobytes()
    masked = np.full((m, n), np.nan, np.float32)
    products.gemm_nn_masked(a, b, masked, x)
    assert masked.tobytes() == np.where(x > 0, want, np.float32(0.0)).tobytes()
    for relu in (False, True):
        fused, separate = np.full((m, n), np.nan, np.float32), want.copy()
        products.gemm_nn_bias(a, b, fused, bias, relu)
        _bias_relu_reference(separate, bias, relu)
        assert fused.tobytes() == separate.tobytes()


@pytest.mark.parametrize("rows", [1, 3, 4, 5, 64, 65])
def test_column_sums_add_rows_in_order(rows):
    x = _f32(np.random.default_rng(rows), rows, 37) * np.float32(1e3)
    want, got = np.empty(37, np.float32), np.full(37, np.nan, np.float32)
    _column_sums_reference(x, want)
    products.column_sums(x, got)
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("n_actions", [1, 2, 3, 15])  # (below dense.SHORT: backward uses these there)
@pytest.mark.parametrize("batch", [1, 2, 3, 5, 6, 7, 64])
@pytest.mark.parametrize("d_in", [4, 128])
def test_the_action_layer_skips_dz_zeros_with_the_full_products_values(n_actions, batch, d_in):
    """dz is zero but at each row's taken action: the products that skip those zeros give the full products'
    values (equal as numbers: at most a zero's sign differs), and Adam makes the same step from either."""
    rng = np.random.default_rng(n_actions * 100 + batch + d_in)
    actions = rng.integers(0, n_actions, size=batch)
    if batch > 3:
        actions[: batch // 2] = 0  # one action taken by most rows: every remainder of the four-term passes
    dz = np.zeros((batch, n_actions), np.float32)
    dz[np.arange(batch), actions] = _f32(rng, batch)
    x = np.maximum(_f32(rng, batch, d_in), 0) * np.float32(10.0) ** rng.integers(-30, 3, size=(batch, d_in))
    x = x.astype(np.float32)  # ReLU outputs, some small enough that their products underflow
    w = _f32(rng, n_actions, d_in)
    scratch = [np.empty(max(batch, d_in, n_actions) ** 2, np.float32) for _ in range(4)]
    want_gw, got_gw = np.empty((n_actions, d_in), np.float32), np.full((n_actions, d_in), np.nan, np.float32)
    passes.weight_gradient(dz, x, want_gw, *scratch)
    action_layer.action_weight_gradient(dz, actions, x, got_gw)
    assert np.array_equal(got_gw, want_gw)
    want_dx, got_dx = np.empty((batch, d_in), np.float32), np.full((batch, d_in), np.nan, np.float32)
    passes.input_gradient(dz, w, x, want_dx, scratch[0], scratch[1])
    action_layer.action_input_gradient(dz, actions, w, got_dx, x)
    assert np.array_equal(got_dx, want_dx)
    start = _f32(rng, n_actions * d_in)
    stepped = []
    for grad in (want_gw, got_gw):
        params, m, v = start.copy(), np.zeros_like(start), np.zeros_like(start)
        adam_step(params, grad.ravel(), m, v, 1e-3, 0.9, 0.999, 1e-8, 1)
        stepped.append(params.tobytes() + m.tobytes() + v.tobytes())
    assert stepped[0] == stepped[1]


@pytest.mark.parametrize("n", [1, 7, 898, 1000])
def test_vectorized_adam_equals_the_scalar_loop(n):
    rng = np.random.default_rng(n)
    state = [_f32(rng, n), _f32(rng, n), _f32(rng, n) * 0.1, np.abs(_f32(rng, n)) * 0.01]
    twin = [s.copy() for s in state]
    for step in (1, 2, 50):
        adam_step(*state, 1e-3, 0.9, 0.999, 1e-8, step)
        _adam_reference(*twin, 1e-3, 0.9, 0.999, 1e-8, step)
        assert all(s.tobytes() == t.tobytes() for s, t in zip(state, twin, strict=True))


def test_workspace_and_its_parts_start_on_cache_lines():
    dims = np.array([4, 128, 2], np.int64)
    ws = kernels.Workspace(dims).for_batch(3)
    assert ws.ctypes.data % 64 == 0
    act_off = np.empty(3, np.int64)
    parts = kernels.carve(ws, dims, 3, act_off)
    assert all(p.ctypes.data % 64 == 0 for p in parts)
    assert all(off % dense.ALIGN == 0 for off in act_off)
    assert parts.grad.shape[0] == dense.offsets(dims)[-1]  # the gradient buffer: exactly one float per parameter
    assert dense.aligned_empty(5).ctypes.data % 64 == 0


@pytest.mark.parametrize("loss", ["huber", "pal"])
@pytest.mark.parametrize("dims", [(3, 7, 5), (4, 128, 2), (5, 32, 16, 3)])
@pytest.mark.parametrize("batch", [1, 3, 64])
def test_an_update_never_reads_workspace_it_did_not_write(dims, batch, loss):
    dims = np.array(dims, np.int64)
    n = int(dense.offsets(dims)[-1])
    rng = np.random.default_rng(batch)
    arrays = (
        _f32(rng, batch, dims[0]), rng.integers(0, dims[-1], size=batch), _f32(rng, batch),
        _f32(rng, batch, dims[0]), (rng.random(batch) < 0.3).astype(np.float32), np.ones(batch, np.float32),
    )  # fmt: skip
    # double DQN, clipping on, the loss (PAL: λ's pass over the batch first), κ 0.5, α 0.6
    hyper = kernels.UpdateSettings(
        gamma=0.9, double_dqn=True, loss_code=LOSS_CODES[loss], max_grad_norm=0.5, lr=1e-3, beta1=0.9, beta2=0.999,
        eps=1e-8, kappa=0.5, alpha=0.6,
    )
    results = []
    for fill in (0.0, np.nan):
        params, target = _f32(np.random.default_rng(0), n), _f32(np.random.default_rng(1), n)
        m, v, td = np.zeros(n, np.float32), np.zeros(n, np.float32), np.empty(batch, np.float32)
        losses = np.empty(batch, np.float32)
        ws = np.full(kernels.workspace_size(dims, batch), fill, np.float32)
        loss, q, greedy = np.empty(1), np.empty(1), np.empty(1, np.int64)
        one = np.zeros(1, np.int64)  # the kernels' member axis: this network alone
        cohort.cohort_update_kernel(
            params[None], target[None], m[None], v[None], one, dims, *(a[None] for a in arrays), hyper,
            np.zeros(1, np.int64), ws, td[None], losses[None], loss, q,
        )  # fmt: skip
        cohort.cohort_greedy_kernel(params[None], one, dims, arrays[0][:1], ws, greedy)
        results.append((params.tobytes(), m.tobytes(), td.tobytes(), losses.tobytes(), loss[0], q[0], greedy[0]))
    assert np.isfinite(results[1][4])
    assert results[0] == results[1]
