"""The numba engine's matrix products and the dense layer built from them, without BLAS (no SciPy dependency, no
BLAS thread pool fighting torch's; measured choices: docs/engines.md).

Each product uses the loop order that vectorizes for its shape, activations batch-major. Short reductions run
under ``EXACT`` (each output is 0 + t0 + t1 + ... in source order). No kernel allows ``nnan``/``ninf``, so a
diverging loss still shows up as NaN."""

from __future__ import annotations

import numba
import numpy as np

from per_cli.rl.engines.dense import DIRECT_ROWS, EXACT, JIT, ROW, SHORT, matrix, transpose


@numba.njit(**ROW)
def _axpy4(x0, x1, x2, x3, b0, b1, b2, b3, ci, first):
    """ci (+)= x0 b0 + x1 b1 + x2 b2 + x3 b3 over a row (1-d views), added one term at a time, left to right."""
    if first:
        for j in range(ci.shape[0]):
            ci[j] = (((np.float32(0.0) + x0 * b0[j]) + x1 * b1[j]) + x2 * b2[j]) + x3 * b3[j]
    else:
        for j in range(ci.shape[0]):
            ci[j] = (((ci[j] + x0 * b0[j]) + x1 * b1[j]) + x2 * b2[j]) + x3 * b3[j]


@numba.njit(**ROW)
def _axpy2(x0, x1, b0, b1, ci, first):
    """:func:`_axpy4` for two terms."""
    if first:
        for j in range(ci.shape[0]):
            ci[j] = (np.float32(0.0) + x0 * b0[j]) + x1 * b1[j]
    else:
        for j in range(ci.shape[0]):
            ci[j] = (ci[j] + x0 * b0[j]) + x1 * b1[j]


@numba.njit(**ROW)
def _axpy1(x0, b0, ci, first):
    """:func:`_axpy4` for one term."""
    if first:
        for j in range(ci.shape[0]):
            ci[j] = np.float32(0.0) + x0 * b0[j]
    else:
        for j in range(ci.shape[0]):
            ci[j] = ci[j] + x0 * b0[j]


@numba.njit(**EXACT)
def _add_bias(c, bias, relu):
    """c[i, :] += bias (then 0 where the value is < 0), row by row."""
    for i in range(c.shape[0]):
        ci = c[i]
        if relu:
            for j in range(ci.shape[0]):
                value = ci[j] + bias[j]
                ci[j] = np.float32(0.0) if value < 0.0 else value
        else:
            for j in range(ci.shape[0]):
                ci[j] = ci[j] + bias[j]


@numba.njit(**EXACT)
def relu_mask(dx, x):
    """dx = 0 where x <= 0 (the gradient through a ReLU whose output was x), row by row."""
    for i in range(dx.shape[0]):
        di, xi = dx[i], x[i]
        for j in range(di.shape[0]):
            di[j] = di[j] if xi[j] > 0.0 else np.float32(0.0)


@numba.njit(**ROW)
def _row_blocks(ai, b, ci):
    """ci = Σ_kk ai[kk] b[kk, :] over the first 4 · (k // 4) terms, four per pass over the row."""
    for q in range(ai.shape[0] // 4):
        kk = 4 * q
        _axpy4(ai[kk], ai[kk + 1], ai[kk + 2], ai[kk + 3], b[kk], b[kk + 1], b[kk + 2], b[kk + 3], ci, q == 0)


# One row loop per k % 4, each with a fixed sequence of passes: one loop holding every case vectorizes far worse
# (docs/engines.md).


@numba.njit(**EXACT)
def _rows_k4(a, b, c):
    for i in range(a.shape[0]):
        _row_blocks(a[i], b, c[i])


@numba.njit(**EXACT)
def _rows_k4_1(a, b, c):
    kk = a.shape[1] - 1
    for i in range(a.shape[0]):
        ai, ci = a[i], c[i]
        _row_blocks(ai, b, ci)
        _axpy1(ai[kk], b[kk], ci, kk == 0)


@numba.njit(**EXACT)
def _rows_k4_2(a, b, c):
    kk = a.shape[1] - 2
    for i in range(a.shape[0]):
        ai, ci = a[i], c[i]
        _row_blocks(ai, b, ci)
        _axpy2(ai[kk], ai[kk + 1], b[kk], b[kk + 1], ci, kk == 0)


@numba.njit(**EXACT)
def _rows_k4_3(a, b, c):
    kk = a.shape[1] - 3
    for i in range(a.shape[0]):
        ai, ci = a[i], c[i]
        _row_blocks(ai, b, ci)
        _axpy2(ai[kk], ai[kk + 1], b[kk], b[kk + 1], ci, kk == 0)
        _axpy1(ai[kk + 2], b[kk + 2], ci, False)


@numba.njit(**EXACT)
def gemm_nn(a, b, c):
    """c[i, :] = Σ_k a[i, k] b[k, :] for row-major a (m, k), b (k, n): axpy loops over contiguous rows of b,
    the better form when k is small.

    Each c[i, j] is 0 + a[i, 0] b[0, j] + a[i, 1] b[1, j] + ..., summed in that order (one FMA per term); the
    terms are added four at a time per pass over the row, so the row is loaded and stored k/4 times, not k."""
    k = a.shape[1]
    if k == 0:
        c[:] = 0.0
    elif k % 4 == 0:
        _rows_k4(a, b, c)
    elif k % 4 == 1:
        _rows_k4_1(a, b, c)
    elif k % 4 == 2:
        _rows_k4_2(a, b, c)
    else:
        _rows_k4_3(a, b, c)


@numba.njit(**EXACT)
def column_sums(x, out):
    """out[j] = Σ_b x[b, j], each summed from 0 in row order (four rows per pass over ``out``)."""
    rows, n = x.shape
    for j in range(n):
        out[j] = 0.0
    b = 0
    while b + 4 <= rows:
        for j in range(n):
            out[j] = (((out[j] + x[b, j]) + x[b + 1, j]) + x[b + 2, j]) + x[b + 3, j]
        b += 4
    for r in range(b, rows):
        for j in range(n):
            out[j] += x[r, j]


# A hidden layer's product adds its bias and ReLU in the row's last pass, while the row is in registers (the same
# float32 roundings as a separate pass, faster). Each case is a loop of its own (the row loops above).


@numba.njit(**ROW)
def _axpy4_relu(x0, x1, x2, x3, b0, b1, b2, b3, ci, first, bias):
    """:func:`_axpy4`, then + bias and the ReLU."""
    zero = np.float32(0.0)
    if first:
        for j in range(ci.shape[0]):
            value = ((((zero + x0 * b0[j]) + x1 * b1[j]) + x2 * b2[j]) + x3 * b3[j]) + bias[j]
            ci[j] = zero if value < 0.0 else value
    else:
        for j in range(ci.shape[0]):
            value = ((((ci[j] + x0 * b0[j]) + x1 * b1[j]) + x2 * b2[j]) + x3 * b3[j]) + bias[j]
            ci[j] = zero if value < 0.0 else value


@numba.njit(**ROW)
def _axpy2_relu(x0, x1, b0, b1, ci, first, bias):
    """:func:`_axpy2`, then + bias and the ReLU."""
    zero = np.float32(0.0)
    if first:
        for j in range(ci.shape[0]):
            value = ((zero + x0 * b0[j]) + x1 * b1[j]) + bias[j]
            ci[j] = zero if value < 0.0 else value
    else:
        for j in range(ci.shape[0]):
            value = ((ci[j] + x0 * b0[j]) + x1 * b1[j]) + bias[j]
            ci[j] = zero if value < 0.0 else value


@numba.njit(**ROW)
def _axpy1_relu(x0, b0, ci, first, bias):
    """:func:`_axpy1`, then + bias and the ReLU."""
    zero = np.float32(0.0)
    if first:
        for j in range(ci.shape[0]):
            value = (zero + x0 * b0[j]) + bias[j]
            ci[j] = zero if value < 0.0 else value
    else:
        for j in range(ci.shape[0]):
            value = (ci[j] + x0 * b0[j]) + bias[j]
            ci[j] = zero if value < 0.0 else value


@numba.njit(**EXACT)
def _relu_rows_k4(a, b, c, bias):
    kk = a.shape[1] - 4
    for i in range(a.shape[0]):
        ai, ci = a[i], c[i]
        _row_blocks(ai[:kk], b, ci)
        x0, x1, x2, x3 = ai[kk], ai[kk + 1], ai[kk + 2], ai[kk + 3]
        _axpy4_relu(x0, x1, x2, x3, b[kk], b[kk + 1], b[kk + 2], b[kk + 3], ci, kk == 0, bias)


@numba.njit(**EXACT)
def _relu_rows_k4_1(a, b, c, bias):
    kk = a.shape[1] - 1
    for i in range(a.shape[0]):
        ai, ci = a[i], c[i]
        _row_blocks(ai[:kk], b, ci)
        _axpy1_relu(ai[kk], b[kk], ci, kk == 0, bias)


@numba.njit(**EXACT)
def _relu_rows_k4_2(a, b, c, bias):
    kk = a.shape[1] - 2
    for i in range(a.shape[0]):
        ai, ci = a[i], c[i]
        _row_blocks(ai[:kk], b, ci)
        _axpy2_relu(ai[kk], ai[kk + 1], b[kk], b[kk + 1], ci, kk == 0, bias)


@numba.njit(**EXACT)
def _relu_rows_k4_3(a, b, c, bias):
    kk = a.shape[1] - 3
    for i in range(a.shape[0]):
        ai, ci = a[i], c[i]
        _row_blocks(ai[:kk], b, ci)
        _axpy2(ai[kk], ai[kk + 1], b[kk], b[kk + 1], ci, kk == 0)
        _axpy1_relu(ai[kk + 2], b[kk + 2], ci, False, bias)


@numba.njit(**EXACT)
def gemm_nn_bias(a, b, c, bias, relu):
    """c = a b + bias (then ReLU): the values of :func:`gemm_nn` followed by the bias (and ReLU). With the ReLU
    (a hidden layer) the bias joins the row's last pass; without it, it is a pass of its own."""
    k = a.shape[1]
    if not relu or k == 0:
        gemm_nn(a, b, c)
        _add_bias(c, bias, relu)
    elif k % 4 == 0:
        _relu_rows_k4(a, b, c, bias)
    elif k % 4 == 1:
        _relu_rows_k4_1(a, b, c, bias)
    elif k % 4 == 2:
        _relu_rows_k4_2(a, b, c, bias)
    else:
        _relu_rows_k4_3(a, b, c, bias)


@numba.njit(**EXACT)
def gemm_nn_masked(a, b, c, x):
    """c = a b, then c[i, j] = 0 where x[i, j] <= 0 (the gradient through a ReLU whose output was x)."""
    gemm_nn(a, b, c)
    relu_mask(c, x)


@numba.njit(**EXACT)
def gemm_nt_direct(a, b, c):
    """c[i, j] = Σ_k a[i, k] b[j, k], each a sequential sum over k (the order of :func:`gemm_nn`), without
    transposing b: for few rows of a, where transposing b would cost more than the product."""
    m, k = a.shape
    for i in range(m):
        for j in range(b.shape[0]):
            s = np.float32(0.0)
            for kk in range(k):
                s += a[i, kk] * b[j, kk]
            c[i, j] = s


@numba.njit(**JIT)
def _gemm_nt_blocked(a, b, c):
    """c = a bᵀ as 2 × 4 blocks of dot products over k (k long: each loaded value feeds several FMAs)."""
    m, k = a.shape
    n = b.shape[0]
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


@numba.njit(**JIT)
def gemm_nt(a, b, c, scratch):
    """c[i, j] = Σ_k a[i, k] b[j, k] for row-major a (m, k), b (n, k), c (m, n). Long reductions (k >= 16) are blocked
    dot products; short ones transpose b into ``scratch`` (>= k * n floats) and build rows of c as axpy loops."""
    k = a.shape[1]
    n = b.shape[0]
    if k < SHORT:
        if a.shape[0] <= DIRECT_ROWS:
            gemm_nt_direct(a, b, c)
            return
        bt = scratch[: k * n].reshape(k, n)
        transpose(b, bt)
        gemm_nn(a, bt, c)
        return
    _gemm_nt_blocked(a, b, c)


@numba.njit(**JIT)
def dense(w, bias, x, y, relu, scratch):
    """y = x wᵀ + bias (then ReLU): x (batch, in), w (out, in), y (batch, out).

    A short reduction over more than DIRECT_ROWS rows (the input layer) is an axpy product of x and the transposed
    weights, with the bias and ReLU of a hidden layer in its last pass (:func:`gemm_nn_bias`); any other a blocked
    or direct one, the bias (and ReLU) then a pass of its own."""
    batch, k = x.shape
    if k < SHORT and batch > DIRECT_ROWS:
        bt = matrix(scratch, 0, k, w.shape[0])
        transpose(w, bt)
        gemm_nn_bias(x, bt, y, bias, relu)
        return
    gemm_nt(x, w, y, scratch)
    _add_bias(y, bias, relu)
