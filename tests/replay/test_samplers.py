"""Every replay kind samples what its paper says: distributions (chi-square), IS weights by hand, the
batch composition of none / uniform / combined, and unsampleable slots never drawn."""

import numpy as np
import pytest
from scipy.stats import chisquare

from per_cli.replay.cohort import CohortSampling
from per_cli.replay.memory import ReplayMemory
from per_cli.replay.samplers import (
    CombinedSampler,
    PrioritizedSampler,
    RankSampler,
    RecentSampler,
    UniformSampler,
)
from per_cli.replay.storage.ring import TransitionStorage

from .support import leave

SIGNIFICANCE = 1e-3  # a correct sampler fails a fixed-seed test with this probability; the seeds are fixed


def memory_with(sampler_cls, n: int, capacity: int | None = None, seed: int = 0, **kwargs) -> ReplayMemory:
    storage = TransitionStorage(capacity or n, (2,), np.float32)
    memory = ReplayMemory(storage, sampler_cls(storage, np.random.default_rng(seed), **kwargs))
    for i in range(n):
        memory.add(np.array([i, 0], np.float32), 0, float(i), np.array([i + 1, 0], np.float32), False, False)
    return memory


def draw_counts(memory: ReplayMemory, draws: int, batch_size: int = 1, beta: float = 0.4) -> np.ndarray:
    counts = np.zeros(memory.storage.capacity, dtype=np.int64)
    for _ in range(draws // batch_size):
        slots, _ = memory.draw(batch_size, beta)
        np.add.at(counts, slots, 1)
    return counts


# ----------------------------------------------------------------------------------------------------------
# proportional


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0])
def test_proportional_draws_follow_p_alpha_over_sum(alpha):
    n = 40
    memory = memory_with(PrioritizedSampler, n, alpha=alpha, eps=0.01)
    td = np.random.default_rng(1).exponential(size=n)
    memory.update_priorities(memory.storage.ids[:n], td)
    p = (np.abs(td) + 0.01) ** alpha
    expected = p / p.sum()
    np.testing.assert_allclose(memory.sampler.expected_counts(1)[:n], expected, rtol=1e-12)
    for batch_size in (1, 32):  # i.i.d. draws, and stratified batches (same marginal, lower variance)
        counts = draw_counts(memory, 64_000, batch_size)
        result = chisquare(counts[:n], expected * counts.sum())
        assert result.pvalue > SIGNIFICANCE, (alpha, batch_size, result)
    if alpha > 0:  # the test has power: a sampler with the exponent doubled would be rejected
        twice = p**2 / (p**2).sum()  # P ∝ (|δ| + ε)^(2α): a wrong exponent
        assert chisquare(counts[:n], twice * counts.sum()).pvalue < SIGNIFICANCE


def test_stratified_batch_has_one_draw_per_equal_mass_segment():
    n = 64
    memory = memory_with(PrioritizedSampler, n)
    memory.update_priorities(memory.storage.ids[:n], np.random.default_rng(2).random(n))
    values = memory.sampler.tree.values()
    cum = np.concatenate([[0.0], np.cumsum(values)])
    for _ in range(50):
        slots, _ = memory.draw(8, 0.4)
        segment = cum[-1] / 8
        for j, slot in enumerate(slots):  # draw j's leaf overlaps segment j
            assert cum[slot] <= (j + 1) * segment + 1e-9 and cum[slot + 1] >= j * segment - 1e-9


def test_proportional_is_weights_by_hand():
    memory = memory_with(PrioritizedSampler, 4, alpha=0.5, eps=0.0)
    memory.update_priorities(np.arange(4), np.array([1.0, 4.0, 9.0, 16.0]))  # p^α = 1, 2, 3, 4
    slots, weights = memory.draw(64, beta=0.5)
    # P = p^α / 10; w = (N P)^-β / max_j (N P_j)^-β = (p^α / min p^α)^-β = (p^α)^-0.5
    expected = np.array([1.0, 2.0, 3.0, 4.0])[slots] ** -0.5
    np.testing.assert_allclose(weights, expected, rtol=1e-6)
    n, prob = 4, np.array([1, 2, 3, 4])[slots] / 10
    np.testing.assert_allclose(weights, (n * prob) ** -0.5 / (n * 0.1) ** -0.5, rtol=1e-6)
    assert weights.dtype == np.float32
    assert memory.sampler.stats() == {"priority_max": 4.0, "priority_min": 1.0}


def test_new_transitions_enter_at_the_max_priority_held_without_applying_alpha_twice():
    memory = memory_with(PrioritizedSampler, 3, capacity=10, alpha=0.5, eps=0.0)
    tree = memory.sampler.tree
    assert list(tree.values()[:3]) == [1.0, 1.0, 1.0]  # p_1 = 1 before any TD error is known
    memory.update_priorities(np.arange(3), np.array([0.04, 0.25, 0.01]))  # p^α = 0.2, 0.5, 0.1
    memory.add(np.zeros(2), 0, 0.0, np.zeros(2), False, False)
    assert tree.values()[3] == pytest.approx(0.5)  # max p^α as it is, not 0.5 ** 0.5
    assert memory.stats()["priority_max"] == pytest.approx(0.5)
    memory.update_priorities(np.array([1, 3]), np.array([0.0016, 0.0016]))  # p^α = 0.04
    memory.add(np.zeros(2), 0, 0.0, np.zeros(2), False, False)
    assert tree.values()[4] == pytest.approx(0.2)  # the max held now, not the largest ever seen


# ----------------------------------------------------------------------------------------------------------
# rank-based


def rank_probabilities(n: int, alpha: float) -> np.ndarray:
    p = np.arange(1, n + 1, dtype=float) ** -alpha
    return p / p.sum()


def _piecewise_rank_probabilities(n: int, alpha: float, k: int) -> np.ndarray:
    """The paper's approximation: k segments of (about) equal mass, uniform over the ranks inside each."""
    cum = np.cumsum(rank_probabilities(n, alpha))
    bounds = np.unique(np.concatenate([[0], np.searchsorted(cum, np.arange(1, k) / k) + 1, [n]]))
    p = np.zeros(n)
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        p[lo:hi] = 1 / (len(bounds) - 1) / (hi - lo)
    return p


@pytest.mark.parametrize("alpha", [0.0, 0.7, 1.0])
def test_rank_draws_follow_the_rank_distribution(alpha):
    n = 40
    memory = memory_with(RankSampler, n, alpha=alpha)
    td = np.random.default_rng(3).permutation(n) + 1.0  # distinct |δ|, so the order is unambiguous
    memory.update_priorities(memory.storage.ids[:n], td)
    memory.sampler.resort()
    order = np.argsort(-td)  # rank 1 = the largest |δ|
    np.testing.assert_array_equal(memory.sampler.ranks(), order)
    expected = np.zeros(n)
    expected[order] = rank_probabilities(n, alpha)
    np.testing.assert_allclose(memory.sampler.expected_counts(1)[:n], expected, rtol=1e-12)
    for batch_size in (1, 32):
        counts = draw_counts(memory, 64_000, batch_size)
        result = chisquare(counts[:n], expected * counts.sum())
        assert result.pvalue > SIGNIFICANCE, (alpha, batch_size, result)
    if alpha > 0:  # the test has power: the paper's uniform-within-segment approximation is rejected
        approx = np.zeros(n)
        approx[order] = _piecewise_rank_probabilities(n, alpha, 8)
        assert chisquare(counts[:n], approx * counts.sum()).pvalue < SIGNIFICANCE


def test_rank_is_weights_by_hand():
    n, alpha, beta = 5, 0.7, 0.5
    memory = memory_with(RankSampler, n, alpha=alpha)
    memory.update_priorities(np.arange(n), np.array([5.0, 4.0, 3.0, 2.0, 1.0]))  # slot i has rank i + 1
    memory.sampler.resort()
    slots, weights = memory.draw(50, beta)
    prob = rank_probabilities(n, alpha)
    w = (n * prob) ** -beta
    np.testing.assert_allclose(weights, w[slots] / w.max(), rtol=1e-5)


def test_rank_heap_keeps_order_approximately_and_new_transitions_enter_at_rank_one():
    n = 200
    memory = memory_with(RankSampler, n, capacity=400)
    sampler = memory.sampler
    rng = np.random.default_rng(4)
    td = rng.random(n)
    memory.update_priorities(np.arange(n), td)
    pri, slots = sampler.priorities(), sampler.ranks()
    children = np.arange(1, sampler.n)
    assert np.all(pri[(children - 1) // 2] >= pri[children])  # the heap property
    np.testing.assert_array_equal(pri, td[slots].astype(np.float32))
    np.testing.assert_array_equal(sampler.pos_of[slots], np.arange(sampler.n))
    for _ in range(3):
        memory.add(np.zeros(2), 0, 0.0, np.zeros(2), False, False)
        assert sampler.ranks()[0] == memory.storage.latest_slot  # the newest transition is rank 1
    before = sampler.sorts
    memory.update_priorities(np.arange(400), rng.random(400))  # `capacity` priorities: an exact re-sort
    assert sampler.sorts == before + 1
    assert np.all(np.diff(sampler.priorities()) <= 0)
    np.testing.assert_array_equal(sampler.pos_of[sampler.ranks()], np.arange(sampler.n))


def test_rank_heap_survives_random_operations():
    storage = TransitionStorage(64, (2,), np.float32)
    memory = ReplayMemory(storage, RankSampler(storage, np.random.default_rng(0)))
    sampler = memory.sampler
    rng = np.random.default_rng(5)
    for step in range(2000):
        op = rng.integers(4)
        if op == 0 or storage.size < 8:
            memory.add(np.zeros(2), 0, 0.0, np.zeros(2), False, False)
            assert sampler.ranks()[0] == storage.latest_slot
        elif op == 1:
            memory.update_priorities(storage.ids[rng.integers(storage.size, size=5)], rng.exponential(size=5))
        elif op == 2:
            leave(memory, rng.integers(storage.size, size=2))
        else:
            sampler.resort()
        keys = sampler.keys[: sampler.n]
        children = np.arange(1, sampler.n)
        assert np.all(keys[(children - 1) // 2] <= keys[children]), step
        members = sampler.ranks()
        assert len(set(members.tolist())) == sampler.n
        np.testing.assert_array_equal(sampler.pos_of[members], np.arange(sampler.n))
        assert (sampler.pos_of >= 0).sum() == sampler.n


def test_rank_resort_period_counts_update_calls():
    memory = memory_with(RankSampler, 50, resort_period=3)
    for i in range(7):
        memory.update_priorities(np.array([i]), np.array([float(i)]))
    assert memory.sampler.sorts == 2


def test_rank_resort_bookkeeping_is_each_members_row_of_the_cohorts_heap_counters():
    """A cohort's members count towards their re-sorts in one block with a seed axis (the heaps' counters, moved
    there as the keys are): a member's own load and ``resort_period`` set after the cohort is built are what the
    cohort's updates count by, and the re-sorts they make due are exact sorts of that member's heap alone."""
    memories = [
        memory_with(RankSampler, 40, capacity=50, seed=s, resort_period=p) for s, p in ((1, None), (2, 2), (3, 5))
    ]
    sampling = CohortSampling(memories)
    heaps = sampling._lists.own.heaps
    assert heaps.shape == (3,) and all(np.shares_memory(m.sampler.heap, heaps[i]) for i, m in enumerate(memories))
    state = memories[0].sampler.state_dict()
    memories[0].sampler.load_state_dict({**state, "updated_since_sort": 48})  # (None: a re-sort at 50 priorities)
    memories[2].sampler.resort_period = 1
    rng = np.random.default_rng(6)
    sorts = [m.sampler.sorts for m in memories]
    for call in range(3):
        td = [rng.exponential(size=4).astype(np.float32) for _ in range(3)]
        assert sampling.update_priorities([2, 0, 1], [rng.integers(0, 40, size=4) for _ in range(3)], td).all()
        expected = (sorts[0] + 1, sorts[1] + (call + 1) // 2, sorts[2] + call + 1)
        assert tuple(m.sampler.sorts for m in memories) == expected
        assert heaps["sorts"].tolist() == list(expected)
        for memory in memories[2:] if call else memories[::2]:  # (re-sorted by this update: exact)
            assert np.all(np.diff(memory.sampler.priorities()) <= 0)
    assert memories[0].sampler.updated_since_sort == 8 and memories[1].sampler.updated_since_sort == 1
    assert memories[1].sampler.resort_period == 2 and memories[0].sampler.resort_period is None


# ----------------------------------------------------------------------------------------------------------
# none, uniform, combined


def test_none_returns_the_last_b_in_order_across_the_wrap_around():
    memory = memory_with(RecentSampler, 23, capacity=10)
    batch = memory.sample(5)
    np.testing.assert_array_equal(batch.indices, [18, 19, 20, 21, 22])
    np.testing.assert_array_equal(batch.obs[:, 0], [18, 19, 20, 21, 22])
    np.testing.assert_array_equal(batch.ages, [4, 3, 2, 1, 0])
    np.testing.assert_array_equal(memory.sample(10).indices, np.arange(13, 23))
    np.testing.assert_array_equal(batch.weights, np.ones(5))


def test_uniform_is_uniform_without_replacement():
    memory = memory_with(UniformSampler, 30, capacity=50)
    for _ in range(200):
        slots, weights = memory.draw(30, 1.0)
        assert sorted(slots) == list(range(30))  # all distinct, none of the 20 empty slots
    counts = draw_counts(memory, 30_000, batch_size=10)
    assert chisquare(counts[:30]).pvalue > SIGNIFICANCE
    assert counts[30:].sum() == 0


def test_combined_always_holds_the_latest_transition():
    memory = memory_with(CombinedSampler, 5, capacity=16)
    for step in range(60):  # across several wrap-arounds
        memory.add(np.full(2, step, np.float32), 0, 0.0, np.zeros(2), False, False)
        batch = memory.sample(min(6, len(memory)))
        assert batch.indices[-1] == memory.storage.added - 1
        assert batch.ages[-1] == 0
        assert len(set(batch.indices.tolist())) == len(batch.indices)
    others = draw_counts(memory, 20_000, batch_size=4)
    others[memory.storage.latest_slot] = 0
    assert chisquare(others[others > 0]).pvalue > SIGNIFICANCE
    assert (others > 0).sum() == 15


# ----------------------------------------------------------------------------------------------------------
# every kind


ALL_KINDS = [RecentSampler, UniformSampler, CombinedSampler, PrioritizedSampler, RankSampler]


@pytest.mark.parametrize("sampler_cls", ALL_KINDS)
def test_same_seed_same_batches(sampler_cls):
    def trajectory(seed):
        memory = memory_with(sampler_cls, 100, capacity=64, seed=seed)
        out = []
        for i in range(30):
            batch = memory.sample(16, 0.5)
            memory.update_priorities(batch.indices, np.sin(batch.indices + i))
            memory.add(np.zeros(2), 0, 0.0, np.zeros(2), False, False)
            out.append((batch.indices.copy(), batch.weights.copy()))
        return out

    a, b = trajectory(7), trajectory(7)
    for (ia, wa), (ib, wb) in zip(a, b, strict=True):
        np.testing.assert_array_equal(ia, ib)
        np.testing.assert_array_equal(wa, wb)
    if sampler_cls is not RecentSampler:
        assert any(not np.array_equal(x[0], y[0]) for x, y in zip(a, trajectory(8), strict=True))


@pytest.mark.parametrize("sampler_cls", ALL_KINDS)
def test_never_an_empty_slot(sampler_cls):
    memory = memory_with(sampler_cls, 9, capacity=1000)
    memory.update_priorities(np.arange(9), np.full(9, 1e-9))  # tiny priorities next to 991 empty leaves
    for _ in range(300):
        batch = memory.sample(9, 0.4)
        assert batch.indices.max() < 9 and batch.indices.min() >= 0
        assert np.all(batch.weights > 0) and np.all(batch.weights <= 1)


class PartlySampleable(TransitionStorage):
    """A storage whose oldest held transitions are incomplete (as a frame storage's are once their frames are
    overwritten): the sampleable ids are ``first_sampleable_id .. added - 1``, the contract samplers draw from."""

    def sampleable(self, slots):
        return self.ids[np.asarray(slots)] >= max(self.first_sampleable_id, 0)


@pytest.mark.parametrize("sampler_cls", ALL_KINDS)
def test_unsampleable_slots_are_never_drawn(sampler_cls):
    storage = PartlySampleable(64, (2,), np.float32)
    memory = ReplayMemory(storage, sampler_cls(storage, np.random.default_rng(0)))
    for _ in range(70):  # wraps: slots 0..5 written twice; ids 6 .. 69 held
        memory.add(np.zeros(2), 0, 0.0, np.zeros(2), False, False)
    storage.first_sampleable_id = 30  # ids 6 .. 29 lose their history: the memory says so
    leave(memory, np.arange(6, 30) % 64)
    memory.update_priorities(np.arange(6, 70), np.linspace(0.1, 5, 64))  # updates don't revive them
    batch_size = 1 if sampler_cls is RecentSampler else 20
    for _ in range(300):
        slots, _ = memory.draw(batch_size, 0.4)
        assert (storage.ids[slots] >= 30).all()
    if sampler_cls is RecentSampler:  # the newest three: slots 3, 4, 5
        assert memory.draw(3, 0.4)[0].tolist() == [3, 4, 5]
    if sampler_cls in (UniformSampler, CombinedSampler, RecentSampler):  # without replacement: 40 sampleable
        with pytest.raises(ValueError, match="only 40 sampleable transitions, 41 were asked for"):
            memory.draw(41, 0.4)


@pytest.mark.parametrize(("n", "count"), [(5, 2), (6, 6), (200, 1)])
def test_draw_distinct_gives_every_ordered_sample_the_same_probability(n, count):
    """The project's draw without replacement (uniform, combined): distinct values in range, and every ordered
    sample equally likely (χ² over all n!/(n-count)! of them, or over the values for count 1)."""
    from itertools import permutations

    from per_cli.replay.sampler import draw_distinct

    rng, out = np.random.default_rng(7), np.empty(count, dtype=np.int64)
    outcomes = {p: 0 for p in permutations(range(n), count)}
    draws = 60 * len(outcomes)
    for _ in range(draws):
        draw_distinct(rng, n, count, out)
        outcomes[tuple(out.tolist())] += 1  # (a KeyError: a repeated or out-of-range value)
    assert chisquare(list(outcomes.values())).pvalue > 1e-4
