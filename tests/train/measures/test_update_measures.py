"""The per-update measures' one path (per_cli.train.measures.update_measures.measure_table): every array served, each
measure its definition computed one update at a time by numpy, and an update's row the same whether it was measured
alone (S = 1) or with a cohort step's other updates."""

from __future__ import annotations

from itertools import combinations
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from per_cli.config import AgentConfig
from per_cli.rl.engines import make_agent
from per_cli.rl.engines.stacked import StackedEngine
from per_cli.train.measures import update_measures
from per_cli.train.measures.iid import batch_variances, state_view
from per_cli.train.measures.update_measures import Measure, measure_table, row_layout
from per_cli.train.measures.update_window import UpdateWindow
from tests.train.measures.test_update_window import _memory, add

pytestmark = pytest.mark.filterwarnings("error")


def rows_of(window: UpdateWindow, *arrays) -> list[tuple[np.ndarray, np.ndarray | None]]:
    """``measure_table``'s rows: per update, its row and its states' feature variances (or None)."""
    table, variances = measure_table(window, *arrays)
    return list(zip(table, variances if variances is not None else [None] * len(table), strict=True))


def _draws(memory, steps: int, members: int, batch: int, seed: int):
    """Per step: stacked (members, batch) arrays of ``members`` batches of the memory, with TD errors and each
    sample's loss (as an engine returns them), each member's loss and mean Q."""
    rng = np.random.default_rng(seed)
    for step in range(steps):
        batches = [memory.sample(batch) for _ in range(members)]
        stacked = {key: np.stack([getattr(b, key) for b in batches]) for key in ("obs", "weights", "ages", "episodes")}
        stacked["obs"][0, : step % 3] = stacked["obs"][0, 0]  # repeated states
        stacked["weights"] = rng.uniform(0.1, 1, size=(members, batch)).astype(np.float32)
        td = (rng.standard_normal((members, batch)) * 10.0 ** rng.uniform(-3, 3, size=(members, 1))).astype(np.float32)
        td[0, :3] = np.round(td[0, :3])  # ties
        stacked["losses"] = rng.exponential(size=(members, batch)).astype(np.float32)
        losses, q_means = rng.standard_normal(members), rng.standard_normal(members)
        yield stacked, td, losses, q_means


@pytest.mark.parametrize("threshold, iid", [(0.8, True), (None, True), (0.5, False), (None, False)])
def test_a_cohort_steps_rows_pop_as_its_updates_added_one_at_a_time_bit_for_bit(threshold, iid):
    """Windows that measured each update alone (``add``: S = 1) and windows that kept rows measured with the
    step's other members (S = 5) pop the same values, bit for bit: each row's values are its own."""
    memory = _memory((4,), episode_length=7)
    members, held = 5, memory.episodes_held()
    alone = [UpdateWindow(threshold, iid=iid, refresh_every=20, seed=k) for k in range(members)]
    together = [UpdateWindow(threshold, iid=iid, refresh_every=20, seed=k) for k in range(members)]
    tags = [key for key, _ in row_layout(threshold is not None, iid)] + ["iid/state_diversity"] * iid
    pops = 0
    for step, (s, td, losses, q_means) in enumerate(_draws(memory, 45, members, 32, seed=1)):
        rows = rows_of(together[0], td, s["losses"], s["weights"], s["ages"], s["obs"], s["episodes"],
                            [held] * members, losses, q_means)  # fmt: skip
        for k in range(members):
            batch = SimpleNamespace(**{key: s[key][k] for key in s})
            result = SimpleNamespace(td_errors=td[k], losses=s["losses"][k], loss=float(losses[k]),
                                     q_mean=float(q_means[k]))  # fmt: skip
            add(alone[k], batch, result, memory)
            together[k].add_measured(*rows[k])
        if step % 9 == 8 or step % 13 == 12:  # pops at logs and episode ends
            for k in range(members):
                want, got = alone[k].pop(memory), together[k].pop(memory)
                assert list(got) == list(want) == tags
                for key in want:
                    assert got[key].dtype == want[key].dtype and got[key].tobytes() == want[key].tobytes(), key
                pops += 1
    assert pops == 5 * 8


def _by_definition(td, losses, weights, ages, obs, episodes, held, threshold) -> dict[str, float]:
    """One update's measures by their definitions, in numpy, from its own 1-D arrays (the unweighted loss: the
    mean of the engine's per-sample losses)."""
    d = np.abs(td.astype(np.float64))
    unweighted = losses.astype(np.float64).mean()
    flat = obs.reshape(len(obs), -1).astype(np.float64)
    pairs = 0
    for i, j in combinations(range(len(flat)), 2):
        a, b = flat[i] - flat[i].mean(), flat[j] - flat[j].mean()
        norm = np.sqrt(a @ a) * np.sqrt(b @ b)
        pairs += norm > 0 and abs(a @ b) / norm > threshold
    return {
        "td_error/mean": d.mean(), "td_error/median": np.median(d), "td_error/max": d.max(), "td_error/std": d.std(),
        "losses/td_loss_unweighted": unweighted, "replay/is_weight_mean": np.mean(weights.astype(np.float64)),
        "replay/sample_age": np.mean(ages.astype(np.float64)), "replay/correlation_count": pairs,
        "iid/episode_diversity": len(set(episodes.tolist())) / min(len(episodes), max(held, 1)),
    }  # fmt: skip


# (name, how the stacked arrays are handed over): what the engines give, and what no engine gives but is served
LAYOUTS = {
    "engine": lambda a: a,
    "strided": lambda a: np.repeat(a, 2, axis=1)[:, ::2],  # views, not C arrays
    "float64 td": lambda a: a.astype(np.float64) if a.dtype == np.float32 and a.ndim == 2 else a,
    "int32 ids": lambda a: a.astype(np.int32) if a.dtype == np.int64 else a,  # ages and episodes: taken as int64
}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("batch", [1, 16, 129])
def test_every_array_is_measured_as_its_definition(layout, batch):
    """Whatever the dtype, layout and batch size (one past numpy's pairwise block of 128), each update's row is
    its measures by definition (float32 ones to float32 rounding, the counts and the age exactly), in
    ``row_layout``'s order; the states' feature variances come with every batch (NaN for a batch of one)."""
    memory = _memory((4,), episode_length=7, n=600)
    windows = [UpdateWindow(0.5, seed=k) for k in range(3)]
    s, td, losses, q_means = next(_draws(memory, 1, 3, batch, seed=batch))
    td[1, 0] = -0.0
    held = [memory.episodes_held(), 3, 1]
    change = LAYOUTS[layout]
    rows = rows_of(windows[0], change(td), change(s["losses"]), change(s["weights"]), change(s["ages"]),
                        change(s["obs"]), change(s["episodes"]), held, losses, q_means)  # fmt: skip
    layout_keys = [key for key, _ in row_layout(True, True)]
    assert len(rows) == 3
    for k, (row, variances) in enumerate(rows):
        assert row.dtype == np.float64 and row.shape == (len(layout_keys),)
        values = dict(zip(layout_keys, row, strict=True))
        assert values["losses/td_loss"] == losses[k] and values["losses/q_values"] == q_means[k]
        want = _by_definition(td[k], s["losses"][k], s["weights"][k], s["ages"][k], s["obs"][k], s["episodes"][k],
                              held[k], 0.5)  # fmt: skip
        for key, value in want.items():
            if key in ("replay/correlation_count", "replay/sample_age", "iid/episode_diversity"):
                assert values[key] == value, key
            else:
                assert values[key] == pytest.approx(value, rel=2e-6, abs=1e-30), key
        if batch > 1:
            np.testing.assert_array_equal(variances, batch_variances(state_view(s["obs"][k : k + 1], 1))[0])
            assert variances == pytest.approx(s["obs"][k].astype(np.float64).var(axis=0, ddof=1), rel=1e-9)
        else:
            assert np.isnan(variances).all()  # (a batch of one has no variance)
    counts = [row[layout_keys.index("replay/correlation_count")] for row, _ in rows]
    assert sum(counts) > 0 or batch == 1  # the data did exercise the count


def _numpys_rows(td, losses, weights, ages, episodes, held, loss, q_means, correlation_counts) -> np.ndarray:
    """Every measure of ``row_layout(True, True)`` by numpy's own reductions over the (S, B) arrays (the route the
    measures had besides their compiled pass, for batches over 128 and ages or ids not int64): the oracle of the
    one route."""
    d = np.abs(td)
    ordered = np.sort(episodes, axis=1)
    distinct = 1 + np.count_nonzero(np.diff(ordered, axis=1), axis=1)
    values = [loss, np.asarray(losses, dtype=np.float64).mean(axis=1), q_means, d.mean(axis=1), np.median(d, axis=1),
              d.max(axis=1), d.std(axis=1), np.add.reduce(ages, axis=1, dtype=np.float64) / ages.shape[1],
              weights.mean(axis=1), correlation_counts,
              distinct / np.minimum(episodes.shape[1], np.maximum(held, 1))]  # fmt: skip
    return np.stack([np.asarray(v).astype(np.float64) for v in values], axis=1)


@pytest.mark.parametrize("batch", [1, 7, 64, 128, 129, 300])
def test_every_row_is_numpys_reductions_bit_for_bit(batch):
    """The one route gives, bit for bit, what numpy's reductions give over the same arrays, for batches within and
    past the 128 that numpy's pairwise sums take in one block, with NaN, -0.0 and ties; int32 ages and episode ids
    (no engine's) are taken as int64: the same rows."""
    memory = _memory((4,), episode_length=7, n=600)
    s, td, losses, q_means = next(_draws(memory, 1, 4, batch, seed=batch))
    td[1, 0], td[2, batch // 2], s["losses"][2, 0] = -0.0, np.nan, np.nan
    held = np.array([memory.episodes_held(), 3, 1, 0])
    arrays = (td, s["losses"], s["weights"], s["ages"], s["obs"], s["episodes"], held, losses, q_means)
    with np.errstate(invalid="ignore"):
        table, _ = measure_table(UpdateWindow(0.8), *arrays)
        narrow, _ = measure_table(UpdateWindow(0.8), *(a.astype(np.int32) if a.dtype == np.int64 else a
                                                       for a in arrays))  # fmt: skip
        counts = table[:, [key for key, _ in row_layout(True, True)].index("replay/correlation_count")]
        want = _numpys_rows(td, s["losses"], s["weights"], s["ages"], s["episodes"], held, losses, q_means, counts)
    assert table.dtype == np.float64 and table.tobytes() == np.ascontiguousarray(table).tobytes()
    assert np.ascontiguousarray(table).tobytes() == want.tobytes()
    assert np.ascontiguousarray(narrow).tobytes() == want.tobytes()


@pytest.mark.parametrize("batch", [64, 160])
def test_a_torch_engine_cohorts_measures_are_numpys_reductions(batch):
    """The torch engine's results (a stacked update of 3 members, as a torch cohort's step hands them over) are
    measured as numpy's reductions measure them, bit for bit (160: past one pairwise block)."""
    cfg = AgentConfig(hidden_sizes=[16], engine="torch")
    agents = [make_agent(cfg, (4,), 2, torch.device("cpu")) for _ in range(3)]
    memory = _memory((4,), episode_length=7, n=600)
    batches = [memory.sample(batch) for _ in range(3)]
    results = StackedEngine(agents).learn([0, 1, 2], batches)
    stacked = {key: np.stack([getattr(b, key) for b in batches]) for key in ("obs", "weights", "ages", "episodes")}
    held = np.full(3, memory.episodes_held())
    table, _ = measure_table(UpdateWindow(0.8), results.td, results.losses, stacked["weights"], stacked["ages"],
                             stacked["obs"], stacked["episodes"], held, results.loss, results.q_mean)  # fmt: skip
    counts = table[:, [key for key, _ in row_layout(True, True)].index("replay/correlation_count")]
    want = _numpys_rows(results.td, results.losses, stacked["weights"], stacked["ages"], stacked["episodes"], held,
                        results.loss, results.q_mean, counts)  # fmt: skip
    assert results.td.dtype == np.float32 and np.ascontiguousarray(table).tobytes() == want.tobytes()


def test_a_measure_is_one_registry_entry(monkeypatch):
    """Adding a measure to ``MEASURES`` (its tag, dtype and function of the step's arrays) is all it takes: rows carry
    it and pops return it, under its tag and in its dtype, for the windows it is on for."""
    memory = _memory((4,))
    s, td, losses, q_means = next(_draws(memory, 1, 2, 16, seed=0))
    extra = {"td_error/min": Measure(np.float32, lambda u: u.td_sorted[:, 0]),
             "iid/first_episode": Measure(np.int64, lambda u: u.episodes[:, 0], "iid")}  # fmt: skip
    monkeypatch.setattr(update_measures, "MEASURES", update_measures.MEASURES | extra)
    update_measures.row_plan.cache_clear()
    try:
        for iid in (False, True):
            window = UpdateWindow(None, iid=iid)
            table, variances = measure_table(window, td, s["losses"], s["weights"], s["ages"], s["obs"], s["episodes"],
                                             [memory.episodes_held()] * 2, losses, q_means)  # fmt: skip
            window.add_measured(table[0], None if variances is None else variances[0])
            values = window.pop(memory)
            assert values["td_error/min"].dtype == np.float32 and values["td_error/min"][0] == np.abs(td[0]).min()
            assert ("iid/first_episode" in values) == iid
            if iid:
                first = values["iid/first_episode"]
                assert first.dtype == np.int64 and first[0] == s["episodes"][0, 0]
    finally:
        update_measures.row_plan.cache_clear()


def test_what_a_measure_needs_must_be_given():
    memory = _memory((4,))
    s, td, losses, q_means = next(_draws(memory, 1, 1, 8, seed=0))
    with pytest.raises(ValueError, match="need the states"):
        rows_of(UpdateWindow(0.8, iid=False), td, s["losses"], s["weights"], s["ages"], None, None, None, losses,
                     q_means)  # fmt: skip
    with pytest.raises(ValueError, match="episodes held"):
        rows_of(UpdateWindow(None), td, s["losses"], s["weights"], s["ages"], s["obs"], s["episodes"], None,
                     losses, q_means)  # fmt: skip
    rows = rows_of(UpdateWindow(None, iid=False), td, s["losses"], s["weights"], s["ages"], None, None, None,
                        losses, q_means)  # fmt: skip
    assert len(rows[0][0]) == 9  # neither the count nor the i.i.d. measures: nothing else needed


@pytest.mark.parametrize("obs_shape", [(2, 9, 9), (70,)])
def test_projected_states_are_measured_per_update_by_the_one_implementation(obs_shape):
    """Image states (and vector states of more than 64 numbers) get their feature variances per update, as
    classic control's do: those of the projected view (U, B, 32), the same compiled pass."""
    memory = _memory(obs_shape, episode_length=7)
    s, td, losses, q_means = next(_draws(memory, 1, 2, 16, seed=3))
    _, variances = measure_table(UpdateWindow(None), td, s["losses"], s["weights"], s["ages"], s["obs"],
                                 s["episodes"], [memory.episodes_held()] * 2, losses, q_means)  # fmt: skip
    views = state_view(s["obs"], len(obs_shape))
    assert variances is not None and variances.shape == (2, 32)
    assert variances.tobytes() == batch_variances(views).tobytes()
    np.testing.assert_allclose(variances, views.var(axis=1, ddof=1), rtol=1e-9)
