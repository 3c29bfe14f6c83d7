"""Dense-layer building blocks of the numba engine: flat parameter layout, views, and the matrix products.

Layout. A network's parameters live in ONE flat float32 buffer, in the order of ``module.parameters()``: per
Linear layer its weight (out, in) row-major, then its bias. ``dims`` = (input, hidden..., n_actions).

Matrix products. No BLAS (so no SciPy dependency and no BLAS thread pool fighting torch's): the products are
written out, each in the loop order that vectorizes for its shape. Activations are batch-major
(``(batch, features)``, as torch keeps them). A product with a long reduction (a hidden layer's forward or input
gradient, a hidden-to-hidden weight gradient) is computed as 2 × 4 blocks of dot products, so each loaded value
feeds several multiply-adds; one with a short reduction (the 4 inputs of CartPole, the 2 actions) as axpy loops
over contiguous rows, four terms per pass over a row (``EXACT``: no reassociation, so each output is the FMA
chain 0 + t0 + t1 + ... in source order whatever LLVM vectorizes). The other kernels are compiled with
reassociation allowed (so the dot products vectorize; rounding then differs from torch's by float32 noise, ~1e-7
relative). None allows ``nnan``/``ninf``, so a diverging loss still shows up as NaN and the loop's finiteness
check catches it. Buffers start on cache lines (:func:`aligned_empty`): no value depends on it, the speed does.
"""

from __future__ import annotations

import numba
import numpy as np

_FASTMATH = {"reassoc", "contract"}  # vectorize reductions and fuse multiply-adds; keep NaN/inf semantics
JIT = {"cache": True, "fastmath": _FASTMATH, "nogil": True}
# Kernels whose sums must keep their source order (the short-reduction products: a loop across independent
# outputs, sequential over the reduction): contraction only, so LLVM may fuse a multiply-add but never reorder.
EXACT = {"cache": True, "fastmath": {"contract"}, "nogil": True}
# Row helpers inlined into their (EXACT) callers at numba's IR level: a call would pass each array as ~7 scalars
# and cost more than a row's arithmetic. Inlined code is compiled with the caller's flags, so only EXACT
# functions may call them.
ROW = {**EXACT, "inline": "always"}
SHORT = 16  # reductions shorter than this use axpy loops instead of blocked dot products
DIRECT_ROWS = 2  # a short-reduction product of at most this many rows skips transposing the weights


ALIGN = 16  # floats (64 bytes, a cache line): where buffers and the workspace's parts start


def aligned_empty(n: int) -> np.ndarray:
    """An uninitialised float32 array of ``n`` floats starting on a 64-byte boundary. Where a buffer starts
    changes no value, but it changes the speed: a misaligned workspace makes every 32-byte load of a row split
    across cache lines (measured: the update ~20% slower at a 4-byte offset than at 0 or 32)."""
    raw = np.empty(n + ALIGN, dtype=np.float32)
    start = (-(raw.ctypes.data // 4)) % ALIGN
    return raw[start : start + n]


@numba.njit(**JIT)
def aligned(n):
    """``n`` rounded up to a multiple of ALIGN floats."""
    return (n + ALIGN - 1) // ALIGN * ALIGN


@numba.njit(**JIT)
def offsets(dims):
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


@numba.njit(**JIT)
def layer_views(flat, dims, offs, layer):
    """Views (weight (out, in), bias (out,)) of one layer in a flat buffer of parameters or gradients."""
    d_in, d_out = dims[layer], dims[layer + 1]
    w_off = offs[layer]
    b_off = w_off + d_out * d_in
    return flat[w_off:b_off].reshape(d_out, d_in), flat[b_off : b_off + d_out]


@numba.njit(**JIT)
def matrix(flat, start, rows, cols):
    """A (rows, cols) C-contiguous view into a flat scratch buffer."""
    return flat[start : start + rows * cols].reshape(rows, cols)


@numba.njit(**JIT)
def max_width(dims):
    width = 0
    for d in dims:
        width = max(width, d)
    return width


@numba.njit(**JIT)
def transpose(x, out):
    """out = xᵀ, written row by row (contiguous stores; the strided side is the reads)."""
    rows, cols = x.shape
    for j in range(cols):
        for i in range(rows):
            out[j, i] = x[i, j]


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


# One row loop per k % 4, each with a fixed sequence of passes. One loop holding all the cases (a while over kk,
# or the remainder's passes behind runtime ifs) makes LLVM vectorize the passes far worse, although the values
# are the same: measured for (64, k) by (k, 128), k = 2, 4, 6: 2.9, 3.3, 3.7 µs in one loop; 0.6, 1.3, 2.0 split.


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


@numba.njit(**EXACT)
def gemm_nn_bias(a, b, c, bias, relu):
    """c = a b + bias (then ReLU): the values of :func:`gemm_nn` followed by the bias. The bias is a pass of its
    own: inside the product's row loop it made LLVM vectorize the product worse (the row loops above)."""
    gemm_nn(a, b, c)
    _add_bias(c, bias, relu)


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
    """c[i, j] = Σ_k a[i, k] b[j, k] for row-major a (m, k), b (n, k), c (m, n).

    Long reductions (k >= 16): blocked dot products. Short ones (an input layer of 4 features, an output layer
    of 2 actions): b is transposed into ``scratch`` (>= k * n floats) and rows of c are built as vectorized
    axpy loops over j.
    """
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
    weights; any other a blocked or direct one. The bias (and ReLU) follows as a pass of its own."""
    batch, k = x.shape
    if k < SHORT and batch > DIRECT_ROWS:
        bt = matrix(scratch, 0, k, w.shape[0])
        transpose(w, bt)
        gemm_nn_bias(x, bt, y, bias, relu)
        return
    gemm_nt(x, w, y, scratch)
    _add_bias(y, bias, relu)
