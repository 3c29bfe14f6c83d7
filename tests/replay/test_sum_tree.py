"""The K-ary sum tree: every internal node is the sum (min, max) of its children after any sequence of
updates, and ``find_leaves`` returns the right leaf, never a zero one."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from per_cli.replay.structures.sum_tree import MAX, MIN, SUM, K, SumTree, find_leaves, set_leaves


def update(tree: SumTree, leaves, values) -> None:
    """The batched update of the tree's compiled functions (a later duplicate in ``leaves`` wins)."""
    leaves, values = np.asarray(leaves, dtype=np.int64), np.asarray(values, dtype=np.float64)
    set_leaves(tree.tree, tree.offsets, tree.mark, leaves, values)


def find(tree: SumTree, prefixes) -> np.ndarray:
    return find_leaves(tree.tree, tree.offsets, np.asarray(prefixes, dtype=np.float64))


def level(tree: SumTree, at: int, row: int) -> np.ndarray:
    """The nodes of one level (0 = the leaves), padding included."""
    return tree.tree[row, tree.offsets[at] : tree.offsets[at + 1]]


def check_invariants(tree: SumTree, values: np.ndarray) -> None:
    """Leaves equal ``values``; each node is the sum/min/max of its K children."""
    np.testing.assert_array_equal(tree.values(), values)
    depth = len(tree.offsets) - 2  # levels above the leaves
    for at in range(1, depth + 1):
        child_sums = level(tree, at - 1, SUM)
        if at == 1:
            positive = np.where(child_sums > 0, child_sums, np.inf)
            child_mins, child_maxs = positive, child_sums
        else:
            child_mins, child_maxs = level(tree, at - 1, MIN), level(tree, at - 1, MAX)
        for row, children, reduce, rtol in (
            (SUM, child_sums, np.sum, 1e-12),
            (MIN, child_mins, np.min, 0),
            (MAX, child_maxs, np.max, 0),
        ):
            nodes = level(tree, at, row)
            for j in range(len(nodes) if at < depth else 1):
                block = children[j * K : (j + 1) * K]
                expected = reduce(block) if block.size else (0.0 if row != MIN else np.inf)
                if rtol:
                    assert nodes[j] == pytest.approx(expected, rel=rtol, abs=1e-300), (at, j)
                else:
                    assert nodes[j] == expected, (at, row, j)
    positive = values[values > 0]
    assert tree.total == pytest.approx(values.sum(), rel=1e-12, abs=1e-300)
    assert tree.min == (positive.min() if positive.size else np.inf)
    assert tree.max == (values.max() if values.size else 0.0)


def check_find(tree: SumTree, values: np.ndarray, prefixes: np.ndarray) -> None:
    """The found leaf is positive and its cumulative interval holds the prefix (within rounding)."""
    leaves = find(tree, prefixes)
    cum = np.concatenate([[0.0], np.cumsum(values)])
    tol = 1e-9 * max(values.sum(), 1e-300)
    for prefix, leaf in zip(np.clip(prefixes, 0, values.sum()), leaves, strict=True):
        assert 0 <= leaf < len(values)
        assert values[leaf] > 0, (prefix, leaf)
        assert cum[leaf] - tol <= prefix, (prefix, leaf)
        last_positive = np.nonzero(values)[0].max()
        assert prefix < cum[leaf + 1] + tol or leaf == last_positive, (prefix, leaf)


values_strategy = st.floats(min_value=0.0, max_value=1e3, allow_nan=False, allow_infinity=False)


@settings(max_examples=60, deadline=None)
@given(
    capacity=st.integers(min_value=1, max_value=600),
    batches=st.lists(
        st.lists(st.tuples(st.integers(min_value=0, max_value=10**6), values_strategy), min_size=1, max_size=40),
        min_size=1,
        max_size=12,
    ),
    seed=st.integers(min_value=0, max_value=2**16),
)
def test_random_update_sequences_keep_every_node_consistent_and_find_correct(capacity, batches, seed):
    tree = SumTree(capacity)
    values = np.zeros(capacity)
    for batch in batches:
        leaves = np.array([leaf % capacity for leaf, _ in batch])
        new = np.array([v for _, v in batch])
        update(tree, leaves, new)
        for leaf, v in zip(leaves, new, strict=True):  # a later duplicate wins
            values[leaf] = v
        check_invariants(tree, values)
    if values.sum() > 0:
        rng = np.random.default_rng(seed)
        total = values.sum()
        prefixes = np.concatenate([rng.random(50) * total, [0.0, total, total * (1 + 1e-12), np.nextafter(total, 0)]])
        check_find(tree, values, prefixes)


def test_find_matches_searchsorted_on_a_large_tree():
    rng = np.random.default_rng(0)
    values = rng.random(100_003) ** 3
    values[rng.random(values.size) < 0.2] = 0.0  # zero-mass leaves scattered through the tree
    tree = SumTree(values.size)
    update(tree, np.arange(values.size), values)
    check_invariants(tree, values)
    prefixes = rng.random(20_000) * values.sum()
    expected = np.searchsorted(np.cumsum(values), prefixes, side="right")
    found = find(tree, prefixes)
    mismatch = found != expected
    assert mismatch.mean() < 1e-3  # only at float-rounding boundaries ...
    check_find(tree, values, prefixes[mismatch])  # ... and there still a correct, positive leaf


@pytest.mark.parametrize("order", ["sorted", "shuffled", "repeated"])
def test_a_batch_of_prefixes_finds_what_each_prefix_finds_alone(order):
    """find_leaves shares a node's running sums between consecutive prefixes that pass through it: any order of the
    prefixes (a stratified draw's are sorted) finds, for each, exactly the leaf it finds alone."""
    rng = np.random.default_rng(7)
    values = rng.random(5_000) ** 4
    values[rng.random(values.size) < 0.3] = 0.0
    tree = SumTree(values.size)
    update(tree, np.arange(values.size), values)
    prefixes = np.sort((np.arange(128) + rng.random(128)) / 128 * tree.total)
    if order == "shuffled":
        prefixes = rng.permutation(prefixes)
    if order == "repeated":
        prefixes = np.repeat(prefixes[::8], 8)
    prefixes = np.concatenate([prefixes, [tree.total, 0.0, tree.total * 2]])
    alone = [int(find(tree, prefixes[j : j + 1])[0]) for j in range(prefixes.size)]
    assert find(tree, prefixes).tolist() == alone


def test_rounding_never_reaches_an_empty_or_zero_leaf():
    # trailing zero leaves (the unfilled part of a memory, the padding to a multiple of K) and a prefix
    # at or beyond the float total
    tree = SumTree(1000)
    values = np.zeros(1000)
    values[:7] = [1e-300, 3.0, 1e16, 0.1, 0.0, 0.2, 0.3]
    update(tree, np.arange(7), values[:7])
    total = tree.total
    for prefix in [total, np.nextafter(total, np.inf), total * 2, 1e300, -1.0, 0.0]:
        (leaf,) = find(tree, [prefix])
        assert values[leaf] > 0
    (last,) = find(tree, [total])
    assert last == 6


def test_min_and_max_track_updates_and_zeros():
    tree = SumTree(40)
    update(tree, np.arange(40), np.arange(1, 41, dtype=float))
    assert (tree.min, tree.max, tree.total) == (1.0, 40.0, 820.0)
    update(tree, [0, 39], [0.0, 0.0])  # zero leaves leave the min and the max
    assert (tree.min, tree.max) == (2.0, 39.0)
    update(tree, np.arange(40), np.zeros(40))
    assert (tree.min, tree.max, tree.total) == (np.inf, 0.0, 0.0)
    assert find(tree, [0.0]).tolist() == [-1]  # no positive leaf: no leaf found


def test_a_tree_needs_a_capacity():
    with pytest.raises(ValueError, match="capacity"):
        SumTree(0)


def test_state_dict_round_trip():
    a, b = SumTree(50), SumTree(50)
    update(a, np.arange(50), np.linspace(0, 1, 50))
    b.load_state_dict(a.state_dict())
    np.testing.assert_array_equal(a.tree, b.tree)
    with pytest.raises(ValueError):
        SumTree(51).load_state_dict(a.state_dict())
