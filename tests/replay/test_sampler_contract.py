"""The sampler contract, checked for every registered kind (the built-in ones and docs/extending.md's examples,
examples/samplers/stratified.py and floored.py, a kind with its own replay.params): draws follow the kind's stated
distribution (χ²), stay inside the window and the sampleable ids, stale ids and non-finite TD errors are handled,
a checkpoint continues the same batches, and a member's batches are the same alone and in a cohort. A new kind is
checked by registering it."""

from __future__ import annotations

import copy
import dataclasses
import os

import numpy as np
import pytest
from scipy.stats import chisquare

from per_cli.config import Config, apply_override, from_dict, to_dict
from per_cli.plugins import load_plugins
from per_cli.replay import KINDS as REGISTRY
from per_cli.replay import ReplayMemory
from per_cli.replay.cohort import CohortSampling
from per_cli.replay.storage.ring import TransitionStorage

from ..conftest import REPO
from .support import leave

# at collection, so the registry holds them: the example, and a user's own plugins (PER_TEST_PLUGINS=a.py:b.py)
load_plugins(
    [
        str(REPO / "examples" / "samplers" / "stratified.py"),
        str(REPO / "examples" / "samplers" / "floored.py"),
        *filter(None, os.environ.get("PER_TEST_PLUGINS", "").split(":")),
    ]
)
KINDS = list(REGISTRY)
CHUNKED = [k for k, spec in REGISTRY.items() if spec.takes_chunks]
WINDOWED = [k for k in KINDS if k != "none"]  # (none has no window: it is W = B already)


class OldestLost(TransitionStorage):
    """A ring whose oldest held transitions lost their history (as a frame storage's do): sampleable ids are
    ``first_sampleable_id .. added - 1``."""

    def sampleable(self, slots):
        return self.ids[np.asarray(slots)] >= self.first_sampleable_id


def _memory(
    kind: str, seed: int = 1, added: int = 200, capacity: int = 150, window=None, storage=TransitionStorage, chunk=1
):
    data = to_dict(Config())
    for key, value in {"replay.kind": kind, "replay.capacity": capacity, "replay.window": window,
                       "replay.batch_size": 16, "replay.chunk": chunk}.items():  # fmt: skip
        apply_override(data, key, value)
    cfg = from_dict(data)
    store = storage(capacity, (3,), np.float32)
    memory = ReplayMemory(store, REGISTRY[kind].build(cfg.replay, store, np.random.default_rng(seed)))
    memory.sampler.chunk = cfg.replay.chunk  # (as make_replay sets it)
    rng = np.random.default_rng(100 + seed)
    for i in range(added):  # wraps; episodes of 9
        memory.add(rng.normal(size=3), int(rng.integers(2)), float(rng.normal()), rng.normal(size=3), i % 9 == 8, False)
    held = np.arange(max(0, added - capacity), added)
    memory.update_priorities(held, rng.exponential(size=held.size) * rng.choice([0.1, 1, 10], size=held.size))
    return memory


def _fields(batch) -> dict:
    return {k: v.tobytes() for k, v in dataclasses.asdict(batch).items()}


@pytest.mark.parametrize(("kind", "window"), [(k, None) for k in KINDS] + [(k, 40) for k in WINDOWED])
def test_draws_follow_the_kinds_stated_distribution(kind, window):
    """3,000 batches of 16 from a wrapped ring of 150: each slot's count against ``expected_counts`` (a slot
    expected never is never drawn; the rest pass a χ² test)."""
    memory, batch, draws = _memory(kind, window=window), 16, 3000
    expected = memory.sampler.expected_counts(batch) * draws
    counts = np.zeros(memory.storage.capacity)
    for _ in range(draws):
        np.add.at(counts, memory.sample(batch, 0.5).indices % memory.storage.capacity, 1)
    assert counts.sum() == pytest.approx(expected.sum())
    assert not counts[expected == 0].any()
    live = expected > 0
    assert chisquare(counts[live], expected[live]).pvalue > 1e-4


@pytest.mark.parametrize("kind", KINDS)
def test_a_batch_holds_only_sampleable_ids_inside_the_window(kind):
    memory = _memory(kind, window=50 if kind != "none" else None, storage=OldestLost)
    memory.storage.first_sampleable_id = 170  # ids 50 .. 169 lost their history
    leave(memory, np.arange(50, 170) % 150)
    low = 170 if kind == "none" else max(170, 200 - 50)
    for _ in range(200):
        ids = memory.sample(16, 0.5).indices
        assert ((ids >= low) & (ids < 200)).all()


@pytest.mark.parametrize("kind", KINDS)
def test_stale_ids_are_ignored_and_non_finite_errors_refused(kind):
    memory = _memory(kind)
    batch = memory.sample(16, 0.5)
    for _ in range(150):  # every sampled id overwritten
        memory.add(np.zeros(3), 0, 0.0, np.zeros(3), False, False)
    before = copy.deepcopy(memory.state_dict())
    memory.update_priorities(batch.indices, np.full(16, 5.0, dtype=np.float32))
    after = memory.state_dict()
    assert _flat(after["sampler"]) == _flat(before["sampler"])  # stale: nothing changed
    with pytest.raises(FloatingPointError, match="non-finite TD error"):
        memory.update_priorities(np.array([memory.storage.added - 1]), np.array([np.nan], dtype=np.float32))


def _flat(state, prefix: str = "") -> list:
    """A state dict's leaves as (dotted key, bytes), nested dicts included."""
    if not isinstance(state, dict):
        return [(prefix, np.asarray(state).tobytes())]
    return [leaf for k, v in sorted(state.items()) for leaf in _flat(v, f"{prefix}.{k}")]


@pytest.mark.parametrize("kind", KINDS)
def test_a_checkpoint_round_trip_continues_the_same_batches(kind):
    memory = _memory(kind, window=60 if kind != "none" else None)
    memory.sample(16, 0.5)
    restored = _memory(kind, seed=9, added=3, window=60 if kind != "none" else None)
    restored.load_state_dict(copy.deepcopy(memory.state_dict()))
    for _ in range(5):
        memory.begin_phase(1)
        restored.begin_phase(1)
        assert _fields(memory.sample(16, 0.5)) == _fields(restored.sample(16, 0.5))


@pytest.mark.parametrize("kind", KINDS)
def test_a_members_batches_are_the_same_alone_and_in_a_cohort(kind):
    memories = [_memory(kind, seed=s, added=a) for s, a in ((1, 200), (2, 90), (3, 150))]
    alone = copy.deepcopy(memories)
    sampling = CohortSampling(memories)
    for _ in range(4):
        for k, batch in zip([2, 0, 1], sampling.sample([2, 0, 1], 16, [0.4, 0.7, 1.0]), strict=True):
            assert _fields(batch) == _fields(alone[k].sample(16, [0.7, 1.0, 0.4][k]))


@pytest.mark.parametrize(("kind", "window"), [(k, None) for k in CHUNKED] + [(k, 40) for k in CHUNKED])
def test_a_chunked_batch_is_runs_of_consecutive_ids_whose_starts_follow_the_kind(kind, window):
    """``replay.chunk`` 4, batches of 16: every batch is 4 runs of 4 consecutive ids inside the held (and
    windowed) ids, and the runs' starts pass the kind's χ² test (its ``expected_counts`` of 4 draws, over the
    starts whose run fits)."""
    memory, draws, runs = _memory(kind, window=window, chunk=4), 3000, 4
    expected = memory.sampler.expected_counts(runs) * draws
    low = 200 - (window or 150)
    counts = np.zeros(memory.storage.capacity)
    for _ in range(draws):
        ids = memory.sample(16, 0.5).indices.reshape(runs, 4)
        assert (np.diff(ids, axis=1) == 1).all() and (ids >= low).all() and (ids < 200).all()
        np.add.at(counts, ids[:, 0] % memory.storage.capacity, 1)
    assert not counts[expected == 0].any()
    assert expected[(np.arange(197, 200)) % 150].sum() == 0  # (no run may start among the 3 newest)
    live = expected > 0
    assert chisquare(counts[live], expected[live]).pvalue > 1e-4


@pytest.mark.parametrize("kind", CHUNKED)
def test_chunked_batches_are_the_same_alone_and_in_a_cohort(kind):
    memories = [_memory(kind, seed=s, added=a, chunk=8) for s, a in ((1, 200), (2, 90))]
    alone = copy.deepcopy(memories)
    sampling = CohortSampling(memories)
    for _ in range(3):
        for k, batch in enumerate(sampling.sample([0, 1], 16, [0.5, 0.5])):
            assert _fields(batch) == _fields(alone[k].sample(16, 0.5))
