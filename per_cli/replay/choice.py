"""numpy's ``Generator.choice(n, size, replace=False)``, compiled, on the generator's own bit generator.

``UniformSampler`` draws each batch with ``rng.choice``; a cohort draws the batches of all its members in one
compiled call instead (:mod:`per_cli.replay.cohort`), and each member's batch must stay the one its solo run
draws. :func:`floyd_choice` is numpy's algorithm for this case (numpy/random/_generator.pyx, ``choice`` with
``replace=False``, no ``p``, ``shuffle=True``, outside its tail-shuffle case: :func:`floyd_applies`): Floyd's
sampling with numpy's open-addressing hash set, then a Fisher-Yates shuffle of the picks, each bounded integer
by Lemire's method on ``next_uint32`` exactly as numpy's ``random_bounded_uint64`` draws it (a range below 2³²).
It calls the bit generator's own C ``next_uint32`` (numba's binding), so the generator's state, including its
buffered half word, advances exactly as under numpy; tests/replay/test_choice.py compares both.

:func:`random_fill` is ``Generator.random(n)`` the same way (``next_double`` per value, numpy's
``random_standard_uniform_fill``): the uniforms a prioritized or rank sampler draws its strata from, drawn
inside the cohort's compiled draw instead of one numpy call per member (:func:`uniforms_usable` checks it).
"""

from __future__ import annotations

from functools import lru_cache

import numba
import numpy as np

try:  # numba's binding of a bit generator's C functions (internal: absent, the cohort samples per member)
    from numba.np.random.generator_core import next_double, next_uint32
except ImportError:  # pragma: no cover - depends on the numba version
    next_double = next_uint32 = None

AVAILABLE = next_uint32 is not None
_U32 = np.uint64(0xFFFFFFFF)
_EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)


def floyd_applies(pop_size: int, size: int) -> bool:
    """Whether numpy's ``choice(pop_size, size, replace=False)`` takes the branch :func:`floyd_choice` follows."""
    return AVAILABLE and 0 < size <= pop_size < 2**32 - 1 and not (pop_size > 10000 and size > pop_size // 50)


def floyd_applies_all(pop_sizes: np.ndarray, size: int) -> np.ndarray:
    """:func:`floyd_applies` for each population size of ``pop_sizes`` (int64), as a boolean array."""
    if not AVAILABLE:
        return np.zeros(pop_sizes.shape, dtype=bool)
    applies = (size > 0) & (size <= pop_sizes) & (pop_sizes < 2**32 - 1)
    return applies & ~((pop_sizes > 10000) & (size > pop_sizes // 50))


@numba.njit(cache=True, nogil=True)
def bounded(bitgen, high):
    """numpy's ``random_bounded_uint64(bitgen, 0, high, 0, false)`` for 0 <= high < 2³² - 1 (Lemire)."""
    if high == 0:
        return np.uint64(0)
    r = np.uint64(high)
    excl = r + np.uint64(1)
    m = np.uint64(next_uint32(bitgen)) * excl
    leftover = m & _U32
    if leftover < excl:
        threshold = (_U32 - r) % excl
        while leftover < threshold:
            m = np.uint64(next_uint32(bitgen)) * excl
            leftover = m & _U32
    return m >> np.uint64(32)


@numba.njit(cache=True, nogil=True)
def floyd_choice(rng, pop_size, size, out):
    """``out[:] = rng.choice(pop_size, size, replace=False)`` where :func:`floyd_applies`."""
    bitgen = rng.bit_generator
    mask = np.uint64(int(1.2 * size))  # the hash set: the smallest power of 2 above 1.2 * size
    for shift in (1, 2, 4, 8, 16, 32):
        mask |= mask >> np.uint64(shift)
    hash_set = np.full(mask + np.uint64(1), _EMPTY, dtype=np.uint64)
    for j in range(pop_size - size, pop_size):
        val = bounded(bitgen, j)
        loc = val & mask
        while hash_set[loc] != _EMPTY and hash_set[loc] != val:
            loc = (loc + np.uint64(1)) & mask
        if hash_set[loc] == _EMPTY:  # val not picked yet
            hash_set[loc] = val
            out[j - pop_size + size] = np.int64(val)
        else:  # pick j instead
            loc = np.uint64(j) & mask
            while hash_set[loc] != _EMPTY:
                loc = (loc + np.uint64(1)) & mask
            hash_set[loc] = np.uint64(j)
            out[j - pop_size + size] = j
    for i in range(size - 1, 0, -1):  # numpy's _shuffle_int(size, first=1)
        k = np.int64(bounded(bitgen, i))
        out[k], out[i] = out[i], out[k]


# (seed, population, batch) probes of usable(): small and large populations, a batch equal to the population
_PROBES = ((0, 10, 10), (1, 1000, 64), (2, 10_000, 64), (3, 2**20, 64))


@lru_cache(maxsize=1)
def usable() -> bool:
    """Whether the cohort may draw uniform batches with :func:`floyd_choice`: numba binds ``next_uint32`` AND this
    numpy's ``choice`` is still the algorithm it follows, checked once per process on fresh generators (same picks,
    same generator state after). Fail closed: if a numpy release changes ``choice``, the cohort draws each member's
    batch with numpy itself, which is always its solo run's batch."""
    if not AVAILABLE:
        return False
    for seed, pop, size in _PROBES:
        ours, theirs = np.random.default_rng(seed), np.random.default_rng(seed)
        want = theirs.choice(pop, size, replace=False)
        got = np.empty(size, dtype=np.int64)
        floyd_choice(ours, pop, size, got)
        if not np.array_equal(got, want) or ours.bit_generator.state != theirs.bit_generator.state:
            return False
    return True


@numba.njit(cache=True, nogil=True)
def random_fill(rng, out):
    """``out[:] = rng.random(out.shape[0])`` (float64): numpy's ``random_standard_uniform_fill``, one
    ``next_double`` per value."""
    bitgen = rng.bit_generator
    for j in range(out.shape[0]):
        out[j] = next_double(bitgen)


@lru_cache(maxsize=1)
def uniforms_usable() -> bool:
    """Whether :func:`random_fill` draws what this numpy's ``Generator.random(n)`` draws (same values, same
    generator state after; probes of a few sizes, after a 32-bit draw left a buffered half word), checked once
    per process. Fail closed: else each member draws its uniforms with numpy itself."""
    if not AVAILABLE:
        return False
    for seed, n in ((0, 1), (1, 64), (2, 257)):
        ours, theirs = np.random.default_rng(seed), np.random.default_rng(seed)
        ours.integers(7, dtype=np.uint32), theirs.integers(7, dtype=np.uint32)
        got = np.empty(n)
        random_fill(ours, got)
        if not np.array_equal(got, theirs.random(n)) or ours.bit_generator.state != theirs.bit_generator.state:
            return False
    return True
