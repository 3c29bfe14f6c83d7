"""Dense-layer building blocks of the numba engine: the flat parameter layout and its views, aligned buffers, the
kernels' compile flags (the products are :mod:`.products`).

A network's parameters are ONE flat float32 buffer in ``module.parameters()`` order (per Linear layer its weight
(out, in) row-major, then its bias); ``dims`` = (input, hidden..., n_actions). Alignment changes speed, no value."""

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
    """An uninitialised float32 array of ``n`` floats starting on a 64-byte boundary: no value changes, but a
    misaligned workspace splits a row's 32-byte loads across cache lines (docs/engines.md)."""
    raw = np.empty(n + ALIGN, dtype=np.float32)
    start = (-(raw.ctypes.data // 4)) % ALIGN
    return raw[start : start + n]


def c_array(array, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """``array`` in the kernels' argument layout: a C array of ``dtype`` and ``shape`` (a view of ``array``, no
    copy, where it is one already). An array that is already one (the loop's own buffers) is returned as it is
    after a check of its type, shape, dtype and layout, the cheapest that rules out every other array; anything
    else is converted (a ValueError where its size does not fit ``shape``)."""
    if type(array) is np.ndarray and array.shape == shape and array.dtype == dtype and array.flags.c_contiguous:
        return array
    return np.ascontiguousarray(np.asarray(array).reshape(shape), dtype=dtype)


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
def transpose(x, out):
    """out = xᵀ, written row by row (contiguous stores; the strided side is the reads)."""
    rows, cols = x.shape
    for j in range(cols):
        for i in range(rows):
            out[j, i] = x[i, j]
