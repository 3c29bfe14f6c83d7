"""One uniform integer from a numba ``Generator``, as ``generator.integers(low, high)`` draws it, without the
one-element array numba's ``integers`` allocates per scalar call (most of the call's cost, and the samplers,
ε-greedy and the reference sample call it once per value). It calls numba's own bounded-integer routine, so the
values and the generator's state after them are ``integers``'; ranges wider than 2**32 go through ``integers``."""

from __future__ import annotations

import numba
import numpy as np
from numba.np.random.generator_core import next_uint32
from numba.np.random.random_methods import buffered_bounded_lemire_uint32

_UINT32_MAX = 0xFFFFFFFF


@numba.njit(cache=True, nogil=True)
def uniform_integer(generator, low, high):
    """``generator.integers(low, high)`` (int64 ``low < high``, else ValueError as ``integers`` raises)."""
    if high <= low:
        raise ValueError("uniform_integer: high <= low")
    span = np.uint64(high - low - 1)  # (the largest offset: numba's and NumPy's ``rng``)
    if span == 0:
        return np.int64(low)
    if span < _UINT32_MAX:
        return low + np.int64(buffered_bounded_lemire_uint32(generator.bit_generator, span))
    if span == _UINT32_MAX:
        return low + np.int64(next_uint32(generator.bit_generator))
    return generator.integers(low, high)
