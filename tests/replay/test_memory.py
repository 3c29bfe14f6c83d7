"""The memory face every kind shares: stale priority updates ignored, non-finite TD errors refused, the
registry and its per-kind defaults, checkpoints."""

import numpy as np
import pytest

from per_cli.config import load_config
from per_cli.replay import make_replay
from per_cli.replay.memory import ReplayMemory
from per_cli.replay.samplers import PrioritizedSampler, RankSampler, UniformSampler
from per_cli.replay.storage.ring import TransitionStorage

from ..conftest import CONFIGS


def filled(sampler_cls, n=8, capacity=8, **kwargs) -> ReplayMemory:
    storage = TransitionStorage(capacity, (1,), np.float32)
    memory = ReplayMemory(storage, sampler_cls(storage, np.random.default_rng(0), **kwargs))
    for i in range(n):
        memory.add(np.array([i]), 0, 0.0, np.array([i]), False, False)
    return memory


def test_stale_priority_update_is_ignored():
    memory = filled(PrioritizedSampler, alpha=1.0, eps=0.0)
    batch = memory.sample(4, 0.4)
    memory.update_priorities(np.arange(8), np.full(8, 2.0))  # every transition now at p = 2
    for i in range(3):  # overwrite ids 0, 1, 2 (slots 0, 1, 2) with new transitions at the max priority
        memory.add(np.array([100 + i]), 0, 0.0, np.array([0]), False, False)
    memory.update_priorities(np.array([0, 1, 2, 5]), np.array([9.0, 9.0, 9.0, 7.0]))  # 0..2 are stale
    values = memory.sampler.tree.values()
    assert list(values[:3]) == [2.0, 2.0, 2.0]  # the new transitions kept their entry priority
    assert values[5] == 7.0  # a current id is updated
    assert batch.indices.max() < 8


def test_stale_update_is_ignored_by_the_rank_sampler_too():
    memory = filled(RankSampler)
    memory.update_priorities(np.arange(8), np.arange(8, dtype=float))
    memory.add(np.array([9]), 0, 0.0, np.array([9]), False, False)  # id 8 overwrites id 0 in slot 0
    memory.update_priorities(np.array([0]), np.array([-100.0]))  # stale: ignored, id 8 stays rank 1
    assert memory.sampler.ranks()[0] == 0
    assert memory.sampler.priorities()[1] == 7.0


@pytest.mark.parametrize("sampler_cls", [PrioritizedSampler, RankSampler])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_td_error_raises_and_changes_nothing(sampler_cls, bad):
    memory = filled(sampler_cls)
    before = memory.sampler.state_dict()
    before = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in before.items()}
    with pytest.raises(FloatingPointError, match="non-finite TD error"):
        memory.update_priorities(np.arange(3), np.array([1.0, bad, 2.0]))
    after = memory.sampler.state_dict()
    for key, value in before.items():
        if isinstance(value, dict):
            np.testing.assert_array_equal(value["tree"], after[key]["tree"])
        else:
            np.testing.assert_array_equal(value, after[key])


def test_non_finite_td_error_raises_for_unprioritized_kinds_too():
    memory = filled(UniformSampler)
    with pytest.raises(FloatingPointError):
        memory.update_priorities(np.arange(2), np.array([np.nan, 0.0]))


def test_float32_td_errors_and_ids_from_a_batch_are_accepted():
    memory = filled(PrioritizedSampler, alpha=1.0, eps=0.0)
    batch = memory.sample(4, 1.0)
    memory.update_priorities(batch.indices, np.full(4, -0.5, dtype=np.float32))  # |δ| is used
    assert set(memory.sampler.tree.values()[batch.indices % 8]) == {0.5}


@pytest.mark.parametrize("kind", ["none", "uniform", "combined", "prioritized", "rank"])
def test_every_kind_builds_from_a_config_and_keeps_one_face(kind):
    cfg = load_config(CONFIGS / "cartpole_uniform.yaml", [f"replay.kind={kind}", "replay.capacity=100"])
    memory = make_replay(cfg, (4,), np.float32, seed=0)
    for i in range(70):
        memory.add(np.full(4, i, np.float32), i % 2, 1.0, np.zeros(4, np.float32), False, False)
    batch = memory.sample(cfg.replay.batch_size, 0.4)
    assert batch.obs.shape == (64, 4) and batch.weights.shape == (64,) and batch.indices.shape == (64,)
    memory.update_priorities(batch.indices, np.ones(64))
    stats = memory.stats()
    if kind in ("prioritized", "rank"):
        assert "priority_max" in stats
    else:
        np.testing.assert_array_equal(batch.weights, 1.0)


def test_priority_defaults_follow_the_kind():
    """α and β0 left out are the kind's (its KindSpec's), filled in where a run is built; given ones stay."""
    from per_cli.replay import resolve_config

    per = resolve_config(load_config(None, ["replay.kind=prioritized"])).replay
    rank = resolve_config(load_config(None, ["replay.kind=rank"])).replay
    assert (per.alpha, per.beta0) == (0.6, 0.4)
    assert (rank.alpha, rank.beta0) == (0.7, 0.5)
    explicit = resolve_config(load_config(None, ["replay.kind=rank", "replay.alpha=0.5", "replay.beta0=0.3"])).replay
    assert (explicit.alpha, explicit.beta0) == (0.5, 0.3)
    assert make_replay(load_config(None, ["replay.kind=rank"]), (4,), np.float32, seed=0).sampler.alpha == 0.7


@pytest.mark.parametrize("sampler_cls", [PrioritizedSampler, RankSampler])
def test_checkpoint_round_trip_continues_identically(sampler_cls):
    a = filled(sampler_cls, n=20, capacity=16)
    a.update_priorities(np.arange(4, 20), np.linspace(0.1, 3, 16))
    b = filled(sampler_cls, n=3, capacity=16)
    b.load_state_dict(a.state_dict())
    for _ in range(5):
        ba, bb = a.sample(8, 0.7), b.sample(8, 0.7)
        np.testing.assert_array_equal(ba.indices, bb.indices)
        np.testing.assert_array_equal(ba.weights, bb.weights)
        a.update_priorities(ba.indices, np.cos(ba.indices))
        b.update_priorities(bb.indices, np.cos(bb.indices))


class RecordingSampler(UniformSampler):
    """A kind whose ``update_members`` is plain Python: the framework hands it each member's rows (a solo memory's
    as a list of one), and it applies the stale-id rule itself (``structures/ids.py``)."""

    def __init__(self, storage, rng):
        super().__init__(storage, rng)
        self.updates = []

    @classmethod
    def update_members(cls, lists, which, ids, td_errors):
        finite = np.isfinite(td_errors).all(axis=1)
        for k, i in enumerate(which.tolist()):
            stored = lists.stored_ids[i]
            slots = ids[k] % stored.shape[0]
            current = stored[slots] == ids[k]
            if finite[k] and current.any():
                td_abs = np.abs(td_errors[k][current].astype(np.float64))
                lists.samplers[i].updates.append((slots[current].tolist(), td_abs.tolist()))
        return finite


def test_generic_update_path_filters_stale_ids_and_passes_abs_td():
    memory = filled(RecordingSampler, n=10, capacity=8)  # ids 8, 9 overwrote ids 0, 1
    memory.update_priorities(np.array([0, 1, 2, 9]), np.array([1.0, -2.0, -3.0, 4.0], dtype=np.float32))
    assert memory.sampler.updates == [([2, 1], [3.0, 4.0])]
    memory.update_priorities(np.array([0]), np.array([5.0]))  # all stale: no call
    assert len(memory.sampler.updates) == 1


# ----------------------------------------------------------------------------------------------------------
# memory budget (issue 16): a memory that cannot fit is a config error before anything is allocated


@pytest.mark.parametrize("kind", ["uniform", "prioritized", "rank"])
def test_a_capacity_that_cannot_fit_is_a_config_error_and_allocates_nothing(kind):
    import tracemalloc

    from per_cli.errors import ConfigError

    cfg = load_config(None, [f"replay.kind={kind}", "replay.capacity=10000000000000"])  # 1e13: ~650 TB
    tracemalloc.start()
    try:
        with pytest.raises(ConfigError, match=r"^replay.capacity: .* needs .* GB .* at most|^replay.capacity: "):
            make_replay(cfg, (4,), np.float32, seed=0)
        with pytest.raises(ConfigError, match="replay.capacity"):
            TransitionStorage(10**13, (4,), np.float32)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 10**7  # nothing of the memory's size was allocated


def test_memory_bytes_matches_what_is_allocated():
    from per_cli.replay import memory_bytes

    for kind in ("uniform", "prioritized", "rank"):
        cfg = load_config(None, [f"replay.kind={kind}", "replay.capacity=5000"])
        memory = make_replay(cfg, (6,), np.float32, seed=0)
        arrays = [v for v in vars(memory.storage).values() if isinstance(v, np.ndarray)]
        arrays += [v for v in vars(memory.sampler).values() if isinstance(v, np.ndarray)]
        if kind == "prioritized":
            arrays += [memory.sampler.tree.tree, memory.sampler.tree.mark]
        allocated = sum({id(a): a.nbytes for a in arrays if a.base is None}.values())
        assert abs(memory_bytes(cfg, (6,), np.float32) - allocated) <= 0.01 * allocated, kind
