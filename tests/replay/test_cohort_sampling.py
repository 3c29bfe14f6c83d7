"""One compiled draw over several memories gives each exactly the batch it draws alone (the kind's one
``draw_members``, over a list of one or of many), and leaves its generator (and its phase) where drawing alone
leaves them, whatever the cohort's size and order."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest

from per_cli.replay import Batch, ReplayMemory
from per_cli.replay.cohort import CohortSampling, stacked_rows
from per_cli.replay.samplers import CombinedSampler, PrioritizedSampler, RankSampler, RecentSampler, UniformSampler
from per_cli.replay.storage.packed import PackedTransitionStorage
from per_cli.replay.storage.ring import TransitionStorage
from per_cli.replay.store import RingStore
from per_cli.replay.writers.base import Writer
from per_cli.replay.writers.hindsight import HindsightWriter

from .support import leave


def _memory(seed: int, n: int, capacity: int = 50, window: int | None = None, sampler=PrioritizedSampler, **kw):
    rng = np.random.default_rng(100 + seed)
    storage = TransitionStorage(capacity, (3,), np.float32)
    kwargs = {"window": window} if sampler is not RecentSampler else {}
    memory = ReplayMemory(storage, sampler(storage, np.random.default_rng(seed), **kwargs, **kw))
    for i in range(n):  # wraps when n > capacity; episodes of 7
        memory.add(rng.normal(size=3), int(rng.integers(2)), float(rng.normal()), rng.normal(size=3), i % 7 == 6, False)
    if sampler in (PrioritizedSampler, RankSampler):
        ids = np.arange(max(0, n - capacity), n)
        memory.update_priorities(ids, rng.exponential(size=ids.size))
    return memory


def _fields(batch) -> dict:
    return {k: (v.dtype, v.tobytes()) for k, v in dataclasses.asdict(batch).items()}


KINDS = [PrioritizedSampler, RankSampler, UniformSampler, CombinedSampler, RecentSampler]


WINDOWED = [kind for kind in KINDS if kind is not RecentSampler]  # (none has no window: it is W = B already)


@pytest.mark.parametrize(("sampler", "window"), [(kind, None) for kind in KINDS] + [(kind, 20) for kind in WINDOWED])
def test_each_member_gets_its_solo_batch_and_generator_state(sampler, window):
    """Window 20: active on every member; on the one that added 64 it wraps past the end of its ring of 50."""
    sizes = ((1, 30), (2, 80), (3, 50), (4, 64))
    memories = [_memory(seed, n, sampler=sampler, window=window) for seed, n in sizes]
    alone = copy.deepcopy(memories)
    sampling = CohortSampling(memories)
    which, betas = [3, 0, 1], [0.4, 0.7, 1.0]
    for _ in range(5):
        batches = sampling.sample(which, 16, betas)
        for i, beta, batch in zip(which, betas, batches, strict=True):
            assert _fields(batch) == _fields(alone[i].sample(16, beta))
    for i in range(4):
        assert memories[i].sampler.rng.bit_generator.state == alone[i].sampler.rng.bit_generator.state


@pytest.mark.parametrize("sampler", KINDS)
def test_a_members_state_is_its_row_of_the_cohorts_blocks_whoever_writes_it(sampler):
    """Building a cohort moves the rings' columns, counters and ids and the kinds' structures into blocks with a
    seed axis, each memory keeping views of its rows: a member's own add, priority update and checkpoint load
    after that are what the cohort's draw reads, and the cohort's store is what the member's own draw reads (a
    view left on an old array would split them)."""
    memories = [_memory(seed, 30 + 20 * seed, sampler=sampler) for seed in (1, 2, 3)]
    alone = copy.deepcopy(memories)
    sampling = CohortSampling(memories)
    counters = sampling._lists.counters
    assert type(counters) is np.ndarray and counters.shape == (3,)
    assert all(np.shares_memory(m.storage.counters, counters[i]) for i, m in enumerate(memories))
    saved = _memory(9, 70, sampler=sampler).state_dict()
    rng = np.random.default_rng(5)
    memories[0].load_state_dict(copy.deepcopy(saved))
    alone[0].load_state_dict(copy.deepcopy(saved))
    for memory in (memories[1], alone[1]):
        memory.add(np.ones(3), 1, 2.0, np.ones(3), False, False)
        memory.update_priorities(np.array([60, 61]), np.array([3.0, 0.5]))
    for _ in range(3):
        for i, batch in enumerate(sampling.sample([0, 1, 2], 16, [0.5] * 3)):
            assert _fields(batch) == _fields(alone[i].sample(16, 0.5))
    rows = (rng.normal(size=(3, 3)), np.array([0, 1, 1]), rng.normal(size=3), rng.normal(size=(3, 3)))
    sampling.store(np.arange(3), *rows, np.zeros(3, dtype=bool), np.zeros(3, dtype=bool))
    for i, (memory, own) in enumerate(zip(memories, alone, strict=True)):
        own.add(*(row[i] for row in rows), False, False)
        assert _fields(memory.sample(16, 0.5)) == _fields(own.sample(16, 0.5))


@pytest.mark.parametrize("sampler", KINDS)
def test_a_members_batches_do_not_depend_on_the_cohort_it_is_drawn_in(sampler):
    """The same member drawn alone, first of two, and last of seven (the others' memories differ, in how much
    they hold too): the same batches, a large memory (12,000 held, batches of 400) included."""

    def member():
        return _memory(1, 12_000, capacity=12_000, sampler=sampler)

    alone, pair = member(), [member(), _memory(2, 800, capacity=12_000, sampler=sampler)]
    seven = [_memory(seed, 600 + seed, capacity=12_000, sampler=sampler) for seed in range(2, 8)] + [member()]
    cohorts = (CohortSampling([alone]), CohortSampling(pair), CohortSampling(seven))
    for _ in range(3):
        drawn = [c.sample([k], 400, [0.5])[0] for c, k in zip(cohorts, (0, 0, 6), strict=True)]
        assert _fields(drawn[0]) == _fields(drawn[1]) == _fields(drawn[2])
        seven_all = cohorts[2].sample(list(range(7)), 50, [0.5] * 7)
        assert all(b is not None for b in seven_all[:6])
        pair_all = cohorts[1].sample([1, 0], 50, [0.5, 0.5])
        assert _fields(pair_all[1]) == _fields(cohorts[0].sample([0], 50, [0.5])[0]) == _fields(seven_all[6])


@pytest.mark.parametrize("sampler", [UniformSampler, PrioritizedSampler, RankSampler])
def test_the_episodes_each_memory_holds_are_its_own_count(sampler):
    """Empty, partly filled, full and wrapped rings (episodes of 7: some end exactly at the ring's end)."""
    sizes = (0, 1, 6, 7, 30, 49, 50, 51, 64, 113, 200)
    memories = [_memory(seed, n, sampler=sampler) for seed, n in enumerate(sizes)]
    sampling = CohortSampling(memories)
    which = [10, 0, 3, 5, 1, 7, 2, 9, 4, 6, 8]
    expected = [memories[i].episodes_held() for i in which]
    assert sampling.episodes_held(which).tolist() == expected
    assert expected[1:3] == [0, 1] and len(set(expected)) > 4  # (the cases differ)


def test_rank_members_read_one_cdf_where_theirs_are_equal_and_still_draw_their_own_batches():
    """The rank CDF depends only on (capacity, α): members whose CDFs are equal share one row in the draw (one
    copy in cache, not one per member); a member with another α reads its own, and every batch is still the
    member's solo batch."""
    memories = [_memory(seed, 60, sampler=RankSampler) for seed in (1, 2)]
    memories.append(_memory(3, 60, sampler=RankSampler, alpha=0.5))
    alone = copy.deepcopy(memories)
    sampling = CohortSampling(memories)
    own = sampling._lists.own
    assert own.cums.shape == (2, 50) and own.cum_of.tolist() == [0, 0, 1]
    for i in range(3):
        assert own.cums[own.cum_of[i]].tobytes() == memories[i].sampler.cum.tobytes()
    for _ in range(3):
        for i, batch in enumerate(sampling.sample([0, 1, 2], 16, [0.5, 0.5, 0.5])):
            assert _fields(batch) == _fields(alone[i].sample(16, 0.5))


def test_the_latest_transitions_are_each_memorys_own():
    """``latest``: one compiled gather of each member's newest transition, as its storage holds it and with its
    newest id (a ring that wrapped, one that did not)."""
    memories = [_memory(seed, n) for seed, n in ((1, 30), (2, 80), (3, 50))]
    got = CohortSampling(memories).latest([2, 0]).arrays
    for k, i in enumerate([2, 0]):
        storage = memories[i].storage
        own = storage.gather(np.array([storage.latest_slot]))
        np.testing.assert_array_equal(got.obs[k], own["obs"])
        np.testing.assert_array_equal(got.next_obs[k], own["next_obs"])
        np.testing.assert_array_equal(got.actions[k], own["actions"])
        np.testing.assert_array_equal(got.rewards[k], own["rewards"])
        np.testing.assert_array_equal(got.terminated[k], own["terminated"].astype(np.float32))
        np.testing.assert_array_equal(got.indices[k], [storage.added - 1])


def test_a_failing_draw_raises_its_own_error_and_the_others_go_on():
    memories = [_memory(1, 40), _memory(2, 40)]
    alone = copy.deepcopy(memories)
    for memory in (memories[0], alone[0]):
        memory.sampler.tree.tree[:] = 0.0  # no mass: the solo draw raises
    sampling = CohortSampling(memories)
    first, second = sampling.sample([0, 1], 8, [0.5, 0.5])
    assert first is None and _fields(second) == _fields(alone[1].sample(8, 0.5))
    drawn = memories[0].sampler.rng.bit_generator.state
    with pytest.raises(ValueError) as cohort_error:
        sampling.raise_failed(0)  # (the error its draw's status means: nothing drawn again)
    assert memories[0].sampler.rng.bit_generator.state == drawn
    with pytest.raises(ValueError) as solo_error:
        alone[0].sample(8, 0.5)
    assert str(cohort_error.value) == str(solo_error.value)


@pytest.mark.parametrize("sampler", [RecentSampler, CombinedSampler])
def test_phase_samplers_give_each_member_its_solo_batches_across_phases(sampler):
    """``none`` and ``combined`` plan each burst of gradient steps (``begin_phase``). On rings that have wrapped
    and rings that have not, bursts of 1-3 batches with 1-8 transitions added before each, and a batch past each
    burst (outside a phase): every member's batches, generator and phase are its solo memory's."""
    memories = [_memory(seed, n, sampler=sampler) for seed, n in ((1, 30), (2, 80), (3, 50), (4, 64))]
    alone = copy.deepcopy(memories)
    sampling = CohortSampling(memories)
    rng, which = np.random.default_rng(11), [3, 0, 1, 2]
    for burst in (1, 3, 3, 1, 2, 3):
        for _ in range(int(rng.integers(1, 9))):  # the phase's new transitions
            row = (rng.normal(size=3), int(rng.integers(2)), float(rng.normal()), rng.normal(size=3), False, False)
            for memory in (*memories, *alone):
                memory.add(*row)
        for memory in (*memories, *alone):
            memory.begin_phase(burst)
        for _ in range(burst + 1):
            for i, batch in zip(which, sampling.sample(which, 16, [1.0] * 4), strict=True):
                assert _fields(batch) == _fields(alone[i].sample(16, 1.0))
    for memory, own in zip(memories, alone, strict=True):
        assert memory.sampler.rng.bit_generator.state == own.sampler.rng.bit_generator.state
        np.testing.assert_array_equal(memory.sampler.phase, own.sampler.phase)


@pytest.mark.parametrize("sampler", [PrioritizedSampler, RankSampler])
def test_a_windowed_draw_that_fails_raises_its_own_error(sampler):
    memories = [_memory(1, 40, window=10, sampler=sampler), _memory(2, 40, window=10, sampler=sampler)]
    alone = copy.deepcopy(memories)
    for memory in (memories[0], alone[0]):  # the solo draw raises: no mass in the window / none of its slots
        if sampler is PrioritizedSampler:
            memory.sampler.tree.tree[:] = 0.0
        else:
            leave(memory, np.arange(30, 40))  # the window's slots leave the heap
    sampling = CohortSampling(memories)
    first, second = sampling.sample([0, 1], 8, [0.5, 0.5])
    assert first is None and _fields(second) == _fields(alone[1].sample(8, 0.5))
    with pytest.raises(ValueError, match="replay window") as cohort_error:
        sampling.raise_failed(0)
    with pytest.raises(ValueError) as solo_error:
        alone[0].sample(8, 0.5)
    assert str(cohort_error.value) == str(solo_error.value)


def test_image_rings_are_drawn_and_gathered_as_alone():
    """A ring of image states is served by the same store, draw and gather: each member's batch is its solo
    memory's."""
    memories = []
    for seed in (1, 2):
        images = TransitionStorage(50, (2, 2), np.uint8)
        memory = ReplayMemory(images, RankSampler(images, np.random.default_rng(seed)), n_step=3)
        for t in range(30 + seed):
            memory.add(np.full((2, 2), t), t % 2, float(t), np.full((2, 2), t + 1), t % 7 == 6, False)
        memories.append(memory)
    alone = copy.deepcopy(memories)
    sampling = CohortSampling(memories)
    assert type(sampling.storer) is RingStore
    for i, batch in zip([1, 0], sampling.sample([1, 0], 8, [0.5, 0.5]), strict=True):
        own = alone[i].sample(8, 0.5)
        assert batch.obs.dtype == np.uint8 and batch.obs.shape == (8, 2, 2)
        for name in ("obs", "actions", "rewards", "next_obs", "terminated", "indices", "weights", "ages", "episodes"):
            np.testing.assert_array_equal(getattr(batch, name), getattr(own, name))


def test_what_it_does_not_draw_is_said():
    small = CohortSampling([_memory(1, 40, sampler=UniformSampler), _memory(2, 5, sampler=UniformSampler)])
    first, second = small.sample([0, 1], 8, [1.0, 1.0])  # fewer transitions than a batch: its own error
    assert first is not None and second is None and 1 in small.failed
    with pytest.raises(ValueError, match="cannot sample 8 transitions from a memory holding 5"):
        small.raise_failed(1)
    with pytest.raises(ValueError, match="memories of one kind"):
        CohortSampling([_memory(1, 20, sampler=RankSampler), _memory(1, 20)])
    with pytest.raises(ValueError, match="memories of one kind"):
        CohortSampling([_memory(1, 20), _memory(1, 20, sampler=UniformSampler)])
    packed = PackedTransitionStorage(20, (2, 2))
    with pytest.raises(ValueError, match="one storage class"):
        CohortSampling([_memory(1, 20), ReplayMemory(packed, PrioritizedSampler(packed, np.random.default_rng(1)))])
    ring = TransitionStorage(50, (3,), np.float32)
    three_step = ReplayMemory(ring, PrioritizedSampler(ring, np.random.default_rng(2)), n_step=3)
    with pytest.raises(ValueError, match="one n-step"):  # (a member's n-step is the cohort's, not the first's)
        CohortSampling([_memory(1, 20), three_step])
    with pytest.raises(ValueError, match="one capacity"):  # (one config: the members' state has one shape)
        CohortSampling([_memory(1, 20), _memory(2, 20, capacity=60)])


def test_batched_priority_updates_equal_each_members_own():
    memories = [_memory(seed, n) for seed, n in ((1, 30), (2, 80), (3, 50))]
    alone = copy.deepcopy(memories)
    sampling = CohortSampling(memories)
    rng = np.random.default_rng(5)
    which = [2, 0]
    ids = [np.array([49, 10, 3, 49]), np.array([0, 29, 7, 7])]  # repeated ids; memory 2 holds ids 0..49
    td = [rng.normal(size=4).astype(np.float32) for _ in which]
    assert sampling.update_priorities(which, ids, td).tolist() == [True, True]
    for i, member_ids, member_td in zip(which, ids, td, strict=True):
        alone[i].update_priorities(member_ids, member_td)
    for memory, reference in zip(memories, alone, strict=True):
        assert memory.sampler.tree.tree.tobytes() == reference.sampler.tree.tree.tobytes()
    stale = [np.array([0, 60]), np.array([1, 2])]  # memory 1 (80 added, capacity 50) no longer holds id 0
    bad = [np.array([0.5, 0.25], np.float32), np.array([np.nan, 1.0], np.float32)]
    before = memories[0].sampler.tree.tree.copy()
    assert sampling.update_priorities([1, 0], stale, bad).tolist() == [True, False]
    alone[1].update_priorities(stale[0], bad[0])
    assert memories[1].sampler.tree.tree.tobytes() == alone[1].sampler.tree.tree.tobytes()
    assert np.array_equal(memories[0].sampler.tree.tree, before)  # a non-finite TD error changes nothing


def test_batched_rank_updates_equal_each_members_own_and_resort_when_due():
    """Heap updates in one call; each member's re-sort comes when its own updates make one due (resort_period
    2 on member 1: every second update call)."""
    memories = [_memory(1, 30, sampler=RankSampler), _memory(2, 80, sampler=RankSampler, resort_period=2)]
    alone = copy.deepcopy(memories)
    sampling = CohortSampling(memories)
    rng = np.random.default_rng(5)
    for _ in range(3):
        ids = [rng.integers(0, 80, size=6) for _ in range(2)]  # some stale in member 1, unknown in member 0
        td = [rng.normal(size=6).astype(np.float32) for _ in range(2)]
        assert sampling.update_priorities([1, 0], ids, td).tolist() == [True, True]
        for i, member_ids, member_td in zip([1, 0], ids, td, strict=True):
            alone[i].update_priorities(member_ids, member_td)
        for memory, reference in zip(memories, alone, strict=True):
            assert memory.sampler.keys.tobytes() == reference.sampler.keys.tobytes()
            assert memory.sampler.pos_of.tobytes() == reference.sampler.pos_of.tobytes()
            assert (memory.sampler.sorts, memory.sampler.updated_since_sort) == (
                reference.sampler.sorts, reference.sampler.updated_since_sort,
            )  # fmt: skip
    assert memories[1].sampler.sorts == 2  # (4 update calls: the one _memory makes, then 3)
    keys = memories[0].sampler.keys.copy()
    bad = [np.array([0.5, np.nan], np.float32)]
    assert sampling.update_priorities([0], [np.array([1, 2])], bad).tolist() == [False]
    assert np.array_equal(memories[0].sampler.keys, keys)  # a non-finite TD error changes nothing


def test_a_draws_batches_are_read_only_rows_of_its_stacked_arrays():
    memories = [_memory(seed, 40, sampler=UniformSampler) for seed in (1, 2, 3)]
    sampling = CohortSampling(memories)
    batches = sampling.sample([0, 1, 2], 8, [1.0, 1.0, 1.0])
    stacked = stacked_rows(batches)
    assert stacked is batches[0].rows.arrays  # every row, in order: the draw's own arrays, not a copy
    for k, batch in enumerate(batches):
        for field, array in zip(dataclasses.fields(Batch), stacked, strict=True):
            assert getattr(batch, field.name).tobytes() == array[k].tobytes()
    with pytest.raises(AttributeError, match="read-only"):
        batches[1].obs = np.zeros((8, 3), np.float32)
    some = stacked_rows([batches[2], batches[0]])  # a subset, out of order: those rows
    assert all(a.tobytes() == np.stack([w[2], w[0]]).tobytes() for a, w in zip(some, stacked, strict=True))
    plain = Batch(*dataclasses.astuple(batches[0]))
    other = sampling.sample([1], 8, [1.0])[0]
    for mixed in ([batches[0], plain], [batches[0], other]):  # not all rows of one draw: each field stacked
        together = stacked_rows(mixed)
        for field in dataclasses.fields(Batch):
            expected = np.stack([getattr(b, field.name) for b in mixed])
            assert getattr(together, field.name).tobytes() == expected.tobytes()


def test_uniform_priority_updates_only_check_the_td_errors():
    memories = [_memory(seed, 40, sampler=UniformSampler) for seed in (1, 2)]
    sampling = CohortSampling(memories)
    td = [np.ones(4, np.float32), np.array([1.0, np.inf, 0.0, 2.0], np.float32)]
    ids = [np.arange(4), np.arange(4)]
    assert sampling.update_priorities([0, 1], ids, td).tolist() == [True, False]
    memories[0].update_priorities(ids[0], td[0])  # (finite: no error)
    with pytest.raises(FloatingPointError, match="non-finite TD error"):  # the member's own update: its error
        memories[1].update_priorities(ids[1], td[1])


@pytest.mark.parametrize("sampler", KINDS)
def test_a_stored_transition_is_what_each_memorys_own_add_stores(sampler):
    """Members 2, 0 (of 3) add 60 transitions each in one compiled call per step, wrapping their rings and
    ending episodes; storage, counters and priorities end as under ReplayMemory.add."""
    memories = [_memory(seed, n, sampler=sampler) for seed, n in ((1, 30), (2, 80), (3, 0))]
    alone = copy.deepcopy(memories)
    sampling = CohortSampling(memories)
    assert type(sampling.storer) is RingStore
    which, rng = np.array([2, 0], dtype=np.int64), np.random.default_rng(9)
    for step in range(60):
        obs, next_obs = (rng.normal(size=(2, 3)).astype(np.float32) for _ in range(2))
        actions, rewards = rng.integers(0, 2, size=2), rng.normal(size=2).astype(np.float32)
        terminated, truncated = rng.random(2) < 0.1, np.array([step % 13 == 12, False])
        errors = sampling.store(which, obs, actions, rewards, next_obs, terminated, truncated)
        with pytest.raises(TypeError):  # (the mapping every error-free store returns is shared: read-only)
            errors[0] = RuntimeError("a caller's own note")
        for k, i in enumerate(which):
            ends = bool(terminated[k]), bool(truncated[k])
            alone[i].add(obs[k], int(actions[k]), float(rewards[k]), next_obs[k], *ends)
    for memory, own in zip(memories, alone, strict=True):
        ours, theirs = memory.state_dict(), own.state_dict()
        for key, value in theirs["storage"].items():
            np.testing.assert_array_equal(ours["storage"][key], value, err_msg=key)
        if sampler is PrioritizedSampler:
            np.testing.assert_array_equal(memory.sampler.tree.tree, own.sampler.tree.tree)
        if sampler is RankSampler:
            assert memory.sampler.n == own.sampler.n
            np.testing.assert_array_equal(memory.sampler.keys, own.sampler.keys)
            np.testing.assert_array_equal(memory.sampler.pos_of, own.sampler.pos_of)


def test_a_member_whose_writer_raises_fails_alone_and_the_others_store_as_alone():
    """float64 rings behind writers of their own: a member whose writer raises is reported by its row, and the
    others stored what each would alone."""

    class Refusing(Writer):
        def add(self, rows):
            raise OSError("a writer that cannot write")

    def memory(seed: int) -> ReplayMemory:
        storage = TransitionStorage(20, (3,), np.float64)
        return ReplayMemory(storage, PrioritizedSampler(storage, np.random.default_rng(seed)))

    memories = [memory(seed) for seed in (1, 2, 3)]
    alone = copy.deepcopy(memories)
    memories[1].writer = Refusing()
    sampling = CohortSampling(memories)
    which, rng = np.array([2, 1, 0], dtype=np.int64), np.random.default_rng(4)
    for _ in range(30):
        obs, next_obs = rng.normal(size=(3, 3)), rng.normal(size=(3, 3))
        actions, rewards = rng.integers(0, 2, size=3), rng.normal(size=3)
        terminated, truncated = rng.random(3) < 0.2, np.zeros(3, dtype=bool)
        errors = sampling.store(which, obs, actions, rewards, next_obs, terminated, truncated)
        assert list(errors) == [1] and isinstance(errors[1], OSError)
        for k in (0, 2):
            alone[which[k]].add(obs[k], int(actions[k]), float(rewards[k]), next_obs[k], bool(terminated[k]), False)
    assert len(memories[1]) == 0
    for i in (0, 2):
        for key, value in alone[i].state_dict()["storage"].items():
            np.testing.assert_array_equal(memories[i].state_dict()["storage"][key], value, err_msg=key)
        np.testing.assert_array_equal(memories[i].sampler.tree.tree, alone[i].sampler.tree.tree)


def _cohort_stores_as_alone(memories, states, steps: int, ends_every: int) -> None:
    """Members 1, 0 (of 2) store ``steps`` transitions each in one cohort call per step; every storage column and
    counter, every priority, and each writer's state end as under each memory's own ``add``."""
    alone = copy.deepcopy(memories)
    sampling = CohortSampling(memories)
    assert type(sampling.storer) is RingStore
    which, rng = np.array([1, 0], dtype=np.int64), np.random.default_rng(5)
    for step in range(steps):
        obs, next_obs = states(rng), states(rng)
        actions, rewards = rng.integers(0, 2, size=2), rng.normal(size=2).astype(np.float32)
        terminated, truncated = rng.random(2) < 0.05, np.array([step % ends_every == ends_every - 1, False])
        assert not sampling.store(which, obs, actions, rewards, next_obs, terminated, truncated)
        for k, i in enumerate(which):
            alone[i].add(
                obs[k], int(actions[k]), float(rewards[k]), next_obs[k], bool(terminated[k]), bool(truncated[k])
            )
    for memory, own in zip(memories, alone, strict=True):
        ours, theirs = memory.state_dict(), own.state_dict()
        for key, value in theirs["storage"].items():
            np.testing.assert_array_equal(ours["storage"][key], value, err_msg=key)
        np.testing.assert_array_equal(memory.sampler.tree.tree, own.sampler.tree.tree)
        assert memory.writer.stats() == own.writer.stats() and len(memory) == len(own) > 0


@pytest.mark.parametrize("strategy", ["future", "random"])
def test_hindsight_members_store_their_episodes_and_copies_as_alone(strategy):
    """Relabelling writers pass on each member's episode with its copies at its end; the cohort stores every
    member's rows in one call, and each memory ends as under its own ``add`` (the relabelling draws too)."""
    layout = dataclasses.make_dataclass("Layout", [])()
    layout.achieved, layout.desired = slice(0, 1), slice(1, 2)
    layout.compute_reward = lambda a, d: -np.any(a != d, axis=-1).astype(np.float32)
    layout.compute_success = lambda a, d: np.all(a == d, axis=-1)
    layout.terminate_on_success = True

    def memory(seed: int) -> ReplayMemory:
        storage = TransitionStorage(120, (2,), np.float32)
        writer = HindsightWriter(layout, strategy, 2, np.random.default_rng(seed + 10), storage)
        return ReplayMemory(storage, PrioritizedSampler(storage, np.random.default_rng(seed)), writer)

    states = lambda rng: rng.integers(0, 3, size=(2, 2)).astype(np.float32)  # noqa: E731 - goals that repeat
    _cohort_stores_as_alone([memory(1), memory(2)], states, steps=70, ends_every=6)


def test_bit_packed_members_store_as_alone():
    """MinAtar's bool states are bit-packed for every row at once and stored in one call, as each memory's own
    ``add`` packs and stores them."""

    def memory(seed: int) -> ReplayMemory:
        storage = PackedTransitionStorage(40, (3, 3, 2))
        return ReplayMemory(storage, PrioritizedSampler(storage, np.random.default_rng(seed)))

    states = lambda rng: rng.random((2, 3, 3, 2)) < 0.3  # noqa: E731
    _cohort_stores_as_alone([memory(1), memory(2)], states, steps=60, ends_every=9)
