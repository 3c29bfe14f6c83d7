"""The per-update measures' one path (per_cli.train.measures.update_measures.measure_table): every array served, each
measure its definition computed one update at a time by numpy, and an update's row the same whether it was measured
alone (S = 1) or with a cohort step's other updates."""

from __future__ import annotations

from itertools import combinations
from types import SimpleNamespace

import numpy as np
import pytest

from per_cli.train.measures.iid import feature_variances
from per_cli.train.measures.update_measures import measure_table, row_layout
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
            together[k].add_measured(*rows[k], batch.obs)
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
    "int32 ids": lambda a: a.astype(np.int32) if a.dtype == np.int64 else a,  # ages and episodes: numpy's pass
}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("batch", [1, 16, 129])
def test_every_array_is_measured_as_its_definition(layout, batch):
    """Whatever the dtype, layout and batch size (one past the compiled TD pass's 128), each update's row is
    its measures by definition (float32 ones to float32 rounding, the counts and the age exactly), in
    ``row_layout``'s order; feature variances come with float32 vector states of 2 to 128 per batch."""
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
        if 2 <= batch <= 128:
            np.testing.assert_array_equal(variances, feature_variances(s["obs"][k : k + 1])[0])
            assert variances == pytest.approx(s["obs"][k].astype(np.float64).var(axis=0, ddof=1), rel=1e-9)
        elif batch == 1:
            assert variances is None  # (a batch of one has no variance)
    counts = [row[layout_keys.index("replay/correlation_count")] for row, _ in rows]
    assert sum(counts) > 0 or batch == 1  # the data did exercise the count


def test_the_compiled_pass_and_numpys_give_the_same_rows():
    """The engines' arrays go through one compiled pass; int32 ages and episode ids (no engine's) through
    numpy's reductions; the rows are the same, bit for bit (the TD measures are ``td_measures``' in both, the
    integer ages' float64 sums exact in any order)."""
    memory = _memory((4,), episode_length=7)
    windows = [UpdateWindow(0.8, seed=k) for k in range(4)]
    s, td, losses, q_means = next(_draws(memory, 1, 4, 64, seed=3))
    held = [memory.episodes_held()] * 4
    compiled = rows_of(windows[0], td, s["losses"], s["weights"], s["ages"], s["obs"], s["episodes"], held, losses,
                            q_means)  # fmt: skip
    numpys = rows_of(windows[0], td, s["losses"], s["weights"], s["ages"].astype(np.int32), s["obs"],
                          s["episodes"].astype(np.int32), held, losses, q_means)  # fmt: skip
    for (a, va), (b, vb) in zip(compiled, numpys, strict=True):
        assert a.tobytes() == b.tobytes() and va.tobytes() == vb.tobytes()


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
