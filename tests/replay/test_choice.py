"""The compiled ``choice`` draws what numpy's ``Generator.choice(n, size, replace=False)`` draws, and leaves the
generator's state where numpy leaves it (so a cohort member's batches stay its solo run's)."""

from __future__ import annotations

import numpy as np
import pytest

from per_cli.replay.choice import AVAILABLE, floyd_applies, floyd_choice, random_fill, uniforms_usable, usable

pytestmark = pytest.mark.skipif(not AVAILABLE, reason="this numba has no binding of next_uint32")


@pytest.mark.parametrize("seed", range(40))
def test_floyd_choice_equals_numpy_and_leaves_the_same_state(seed):
    ours, theirs = np.random.default_rng(seed), np.random.default_rng(seed)
    sizes = np.random.default_rng(1000 + seed)
    for _ in range(30):
        pop = int(sizes.choice([1, 2, 63, 64, 65, 500, 9999, 10000, 10001, 100000, 2**20]))
        size = int(min(pop, sizes.choice([1, 2, 32, 64, 256])))
        if not floyd_applies(pop, size):
            continue
        out = np.empty(size, dtype=np.int64)
        floyd_choice(ours, pop, size, out)
        np.testing.assert_array_equal(out, theirs.choice(pop, size=size, replace=False))
        assert ours.bit_generator.state == theirs.bit_generator.state
        ours.random(int(seed % 3)), theirs.random(int(seed % 3))  # odd numbers of 32-bit halves in between
        ours.integers(5, size=seed % 2), theirs.integers(5, size=seed % 2)


def test_the_tail_shuffle_case_is_not_claimed():
    assert floyd_applies(10000, 10000) and floyd_applies(100000, 2000)
    assert not floyd_applies(100000, 2001) and not floyd_applies(10, 11) and not floyd_applies(10, 0)


def test_the_cohort_uses_the_compiled_choice_only_while_it_matches_this_numpy():
    assert usable()  # this numpy's choice is the algorithm floyd_choice follows (a release that changes it: False)


@pytest.mark.parametrize("seed", range(10))
def test_random_fill_draws_numpys_uniforms_and_leaves_the_same_state(seed):
    """A prioritized or rank member's strata uniforms, drawn in the cohort's kernel: ``rng.random(n)``'s values."""
    ours, theirs = np.random.default_rng(seed), np.random.default_rng(seed)
    for n in (1, 2, 63, 64, 65, 256):
        out = np.empty(n)
        random_fill(ours, out)
        np.testing.assert_array_equal(out, theirs.random(n))
        assert ours.bit_generator.state == theirs.bit_generator.state
        ours.integers(5, size=seed % 3, dtype=np.uint32), theirs.integers(5, size=seed % 3, dtype=np.uint32)
    assert uniforms_usable()
