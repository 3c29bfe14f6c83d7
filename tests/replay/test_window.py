"""``replay.window``: only the W most recent transitions are drawn, with each sampler's own distribution
inside the window (chi-square), and bad windows are config errors."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chisquare

from per_cli.config import ConfigError, load_config
from per_cli.replay.memory import ReplayMemory
from per_cli.replay.samplers import CombinedSampler, PrioritizedSampler, RankSampler, UniformSampler
from per_cli.replay.storage.ring import TransitionStorage

SIGNIFICANCE = 1e-3  # a correct sampler fails a fixed-seed test with this probability; the seeds are fixed
WINDOWED = [UniformSampler, CombinedSampler, PrioritizedSampler, RankSampler]


def memory_with(sampler_cls, added: int, capacity: int, window, seed: int = 0, **kwargs) -> ReplayMemory:
    storage = TransitionStorage(capacity, (1,), np.float32)
    memory = ReplayMemory(storage, sampler_cls(storage, np.random.default_rng(seed), window=window, **kwargs))
    for i in range(added):
        memory.add(np.array([i]), 0, 0.0, np.array([i + 1]), False, False)
    return memory


def window_slots(memory: ReplayMemory, window: int) -> np.ndarray:
    """Slots of the W newest transitions, oldest first."""
    s = memory.storage
    return (s.cursor - window + np.arange(window)) % s.capacity


def test_windowed_uniform_is_uniform_over_the_window_and_nothing_else():
    capacity, window, batch = 100, 30, 8
    memory = memory_with(UniformSampler, 250, capacity, window)  # wrapped: the window straddles slot 0
    counts = np.zeros(capacity, dtype=np.int64)
    for _ in range(4_000):
        slots, _ = memory.draw(batch, 1.0)
        assert len(set(slots.tolist())) == batch  # without replacement
        np.add.at(counts, slots, 1)
    inside = window_slots(memory, window)
    assert counts.sum() == counts[inside].sum()  # nothing outside the window
    result = chisquare(counts[inside])
    assert result.pvalue > SIGNIFICANCE, result
    assert set(memory.storage.ids[inside]) == set(range(250 - window, 250))


def test_windowed_prioritized_is_proportional_within_the_window_with_its_own_weights():
    capacity, window, alpha, beta = 64, 40, 0.7, 0.5
    memory = memory_with(PrioritizedSampler, 100, capacity, window, alpha=alpha, eps=0.01)
    td = np.random.default_rng(3).exponential(size=capacity)
    memory.update_priorities(memory.storage.ids.copy(), td)
    inside = window_slots(memory, window)  # 36 .. 63 and 0 .. 11: wraps around the leaf array
    p = (td + 0.01) ** alpha
    expected = p[inside] / p[inside].sum()
    counts = np.zeros(capacity, dtype=np.int64)
    for _ in range(2_000):
        slots, weights = memory.draw(32, beta)
        np.add.at(counts, slots, 1)
        np.testing.assert_allclose(weights, (p[slots] / p[inside].min()) ** -beta, rtol=1e-5)
    assert counts.sum() == counts[inside].sum()
    result = chisquare(counts[inside], expected * counts.sum())
    assert result.pvalue > SIGNIFICANCE, result
    whole = p / p.sum()  # power: the whole memory's distribution, restricted, is not what is drawn
    assert chisquare(counts[inside], whole[inside] / whole[inside].sum() * counts.sum()).pvalue < 1.0


def test_windowed_rank_follows_the_rank_distribution_within_the_window():
    capacity, window, alpha = 50, 20, 0.7
    memory = memory_with(RankSampler, 80, capacity, window, alpha=alpha, resort_period=1)
    td = np.random.default_rng(4).permutation(capacity).astype(float) + 1.0  # distinct priorities
    memory.update_priorities(memory.storage.ids.copy(), td)  # one call: re-sorted exactly (period 1)
    inside = window_slots(memory, window)
    order = inside[np.argsort(-td[inside])]  # rank 1 first, among the window only
    ranks = np.arange(1, window + 1, dtype=float) ** -alpha
    expected = ranks / ranks.sum()
    counts = np.zeros(capacity, dtype=np.int64)
    for _ in range(3_000):
        slots, weights = memory.draw(16, 0.5)
        np.add.at(counts, slots, 1)
        rank_of = {int(s): r + 1 for r, s in enumerate(order)}
        np.testing.assert_allclose(
            weights, (np.array([rank_of[int(s)] for s in slots]) / window) ** (alpha * 0.5), rtol=1e-5
        )
    assert counts.sum() == counts[order].sum()
    result = chisquare(counts[order], expected * counts.sum())
    assert result.pvalue > SIGNIFICANCE, result


@pytest.mark.parametrize("sampler_cls", WINDOWED)
def test_a_window_of_the_whole_memory_is_ordinary_replay(sampler_cls):
    a = memory_with(sampler_cls, 90, 60, window=None, seed=7)
    b = memory_with(sampler_cls, 90, 60, window=60, seed=7)
    for _ in range(20):
        ba, bb = a.sample(16, 0.5), b.sample(16, 0.5)
        np.testing.assert_array_equal(ba.indices, bb.indices)
        np.testing.assert_array_equal(ba.weights, bb.weights)
        a.update_priorities(ba.indices, np.sin(ba.indices) * 3)
        b.update_priorities(bb.indices, np.sin(bb.indices) * 3)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    sampler_idx=st.integers(0, len(WINDOWED) - 1),
    capacity=st.integers(8, 150),
    extra=st.integers(0, 300),
    window_frac=st.floats(0.0, 1.0),
    batch=st.integers(1, 8),
    seed=st.integers(0, 2**16),
)
def test_nothing_outside_the_window_is_ever_drawn(sampler_idx, capacity, extra, window_frac, batch, seed):
    batch = min(batch, capacity)
    window = batch + int(window_frac * (capacity - batch))
    added = capacity + extra
    memory = memory_with(WINDOWED[sampler_idx], added, capacity, window, seed=seed)
    rng = np.random.default_rng(seed)
    for _ in range(5):
        memory.begin_phase(2)
        out = memory.sample(batch, 0.4)
        assert (out.ages < window).all(), (out.ages, window)
        if sampler_idx < 2:  # uniform and combined draw without replacement (prioritized kinds need not)
            assert len(set(out.indices.tolist())) == batch
        memory.update_priorities(out.indices, rng.exponential(size=batch) * rng.choice([1e-3, 1, 1e3]))
        memory.add(np.array([0.0]), 0, 0.0, np.array([0.0]), False, False)


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        (["replay.batch_size=64", "replay.window=32"], "replay.window: 32 must lie between"),
        (["replay.capacity=1000", "replay.window=2000"], "replay.window: 2000 must lie between"),
        (["replay.kind=none", "replay.window=128"], "replay.window: kind none"),
        (["replay.batch_size=64", "replay.chunk=6"], "replay.chunk: 6 must divide replay.batch_size"),
    ],
)
def test_bad_windows_are_config_errors(overrides, match):
    with pytest.raises(ConfigError, match=match):
        load_config(None, overrides)


@pytest.mark.parametrize("kind", ["none", "combined"])
def test_a_built_in_kind_without_run_starts_refuses_chunks_at_preflight(kind):
    """Which kinds draw runs is the registry's (their KindSpec's takes_chunks), so preflight judges it, by name."""
    from per_cli.train.preflight import check_names

    with pytest.raises(ConfigError, match=f"replay.chunk: kind {kind} draws no run starts; use one of uniform, "):
        check_names(load_config(None, [f"replay.kind={kind}", "replay.chunk=8"]))


def test_chunk_reaches_the_sampler_and_a_kind_without_run_starts_is_refused_by_name():
    from per_cli.replay import KINDS, KindSpec, make_replay, register_kind
    from per_cli.replay.samplers import UniformSampler
    from per_cli.train.preflight import check_names

    cfg = load_config(None, ["replay.kind=rank", "replay.capacity=500", "replay.chunk=8"])
    assert make_replay(cfg, (2,), np.float32, seed=0).sampler.chunk == 8
    register_kind(KindSpec("no_runs_test", type("NoRuns", (UniformSampler,), {}), takes_chunks=False))
    try:
        with pytest.raises(ConfigError, match="replay.chunk: kind no_runs_test draws no run starts; use one of"):
            check_names(load_config(None, ["replay.kind=no_runs_test", "replay.chunk=8"]))
    finally:
        del KINDS["no_runs_test"]


def test_window_reaches_the_sampler():
    from per_cli.replay import make_replay

    cfg = load_config(None, ["replay.kind=prioritized", "replay.capacity=500", "replay.window=100"])
    memory = make_replay(cfg, (2,), np.float32, seed=0)
    assert memory.sampler.window == 100


@pytest.mark.parametrize(
    "setting",
    [
        "replay.window=8",
        "replay.window=1000000000",
        "replay.capacity=10000000000",
        "replay.kind=hindsight",
        "replay.chunk=0",
        "replay.chunk=7",
    ],  # fmt: skip
)
def test_bad_replay_settings_are_one_line_exit_2_and_nothing_on_disk(tmp_path, setting):
    from typer.testing import CliRunner

    from per_cli.cli import app

    from ..conftest import CONFIGS

    runs = tmp_path / "runs"
    result = CliRunner().invoke(
        app, ["train", "--config", str(CONFIGS / "cartpole_uniform.yaml"), "--set", setting, "--runs-dir", str(runs)]
    )
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1 and "replay." in result.output
    assert not runs.exists() or not any(runs.iterdir())
