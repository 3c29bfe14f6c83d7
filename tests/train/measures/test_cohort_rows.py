"""A cohort's measured updates kept over the seed axis (per_cli.train.measures.cohort_rows): each member's window,
fed by CohortRows, pops and saves exactly what a window fed one update at a time does, whatever the schedule of
steps, the members in each, the windows' own updates, pops and saves, and however small the ring."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from per_cli.config import Config, ReplayConfig
from per_cli.replay import make_replay
from per_cli.train.measures import cohort_rows
from per_cli.train.measures.cohort_rows import CohortRows
from per_cli.train.measures.update_measures import UpdateArrays, measure_table
from per_cli.train.measures.update_window import UpdateWindow
from tests.train.measures.test_update_window import _result, add

pytestmark = pytest.mark.filterwarnings("error")

SIZE, BATCH = 3, 16


def _memory(seed: int = 0):
    """A real uniform memory of 300 random 4-feature states in episodes of 9."""
    memory = make_replay(Config(replay=ReplayConfig(kind="uniform", capacity=1000, batch_size=BATCH)), (4,),
                         np.dtype(np.float32), seed)  # fmt: skip
    rng = np.random.default_rng(seed)
    for t in range(300):
        obs = rng.random(4).astype(np.float32)
        memory.add(obs, int(rng.integers(2)), 1.0, obs, (t + 1) % 9 == 0, False)
    return memory


MEMORY = _memory()


def _step(members: list[int], seed: int) -> dict:
    """One cohort step's updates of ``members``: real batches of MEMORY and random TD errors, stacked."""
    rng = np.random.default_rng(seed)
    batches = [MEMORY.sample(BATCH) for _ in members]
    for b in batches[: len(batches) // 2]:
        b.obs[:3] = b.obs[0]  # some repeated states
    return {
        "td": rng.standard_normal((len(members), BATCH)).astype(np.float32),
        "sample_losses": rng.exponential(size=(len(members), BATCH)).astype(np.float32),
        "weights": np.stack([b.weights for b in batches]),
        "ages": np.stack([b.ages for b in batches]),
        "obs": np.stack([b.obs for b in batches]),
        "episodes": np.stack([b.episodes for b in batches]),
        "held": [MEMORY.episodes_held()] * len(members),
        "losses": rng.random(len(members)),
        "q_means": rng.random(len(members)),
    }


def _arrays(a: dict, iid: bool) -> UpdateArrays:
    """A step's updates (``_step``) as the loop hands them over: the episode ids and episodes held with iid."""
    return UpdateArrays(a["td"], a["sample_losses"], a["weights"], a["ages"], a["obs"], a["episodes"] if iid else None,
                        a["held"] if iid else None, a["losses"], a["q_means"])  # fmt: skip


def _windows(iid: bool) -> list[UpdateWindow]:
    return [UpdateWindow(0.8 if iid else None, iid=iid, refresh_every=5, seed=k) for k in range(SIZE)]


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(a[k].dtype == b[k].dtype and a[k].tobytes() == b[k].tobytes() for k in a)


EVENTS = st.lists(
    st.tuples(
        st.sampled_from(["step", "step", "step", "own", "pop", "save"]),
        st.lists(st.booleans(), min_size=SIZE, max_size=SIZE),  # the members in a step; the member that pops
        st.integers(0, 2**16),
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=EVENTS, ring=st.integers(1, 4), iid=st.booleans())
def test_windows_fed_by_cohort_rows_pop_and_save_as_windows_fed_each_update(events, ring, iid):
    """The same updates into two sets of windows: through CohortRows (one ``add`` per step over the members in
    it) and one update at a time (``add_measured`` of the same table's rows), with a window's own updates
    (measured alone), pops and saves in between: every pop and save is the same, bit for bit."""
    fed, each = _windows(iid), _windows(iid)
    rows = CohortRows(fed, ring, fed[0])
    for kind, mask, seed in events:
        who = [k for k in range(SIZE) if mask[k]]
        if kind == "step" and who:
            arrays = _arrays(_step(who, seed), iid)
            table, variances = measure_table(fed[0], *arrays)
            index = slice(None) if len(who) == SIZE else np.asarray(who, dtype=np.int64)
            rows.add(index, arrays)
            for j, k in enumerate(who):
                each[k].add_measured(table[j], None if variances is None else variances[j])
        elif kind == "own":  # a member's window takes an update measured alone: after what rows kept
            k = seed % SIZE
            batch = MEMORY.sample(BATCH)
            result = _result(np.random.default_rng(seed).standard_normal(BATCH).astype(np.float32), 0.5, 0.25)
            add(fed[k], batch, result, MEMORY)
            add(each[k], batch, result, MEMORY)
        elif kind == "pop":
            k = seed % SIZE
            assert _same(fed[k].pop(MEMORY), each[k].pop(MEMORY))
        elif kind == "save":
            k = seed % SIZE
            saved, expected = fed[k].state_dict(), each[k].state_dict()
            assert len(saved["rows"]) == len(expected["rows"])
            assert all(a.tobytes() == b.tobytes() for a, b in zip(saved["rows"], expected["rows"], strict=True))
    for a, b in zip(fed, each, strict=True):
        assert _same(a.pop(MEMORY), b.pop(MEMORY))


def test_a_window_attached_again_first_takes_what_the_earlier_rows_kept():
    """A loop built again over the same windows (a second ``Steps``) loses none of the updates the first kept."""
    fed, each = _windows(True), _windows(True)
    first = CohortRows(fed, 8, fed[0])
    arrays = _arrays(_step([0, 1, 2], 5), True)
    table, variances = measure_table(fed[0], *arrays)
    first.add(slice(None), arrays)
    for k in range(SIZE):
        each[k].add_measured(table[k], variances[k])
    CohortRows(fed, 8, fed[0])
    assert all(_same(f.pop(MEMORY), e.pop(MEMORY)) for f, e in zip(fed, each, strict=True))
    assert all(f.pop(MEMORY) == {} for f in fed)


def test_a_measuring_that_raises_keeps_the_updates_and_raises_at_each_pull(monkeypatch):
    """Measuring covers every member's kept updates at once: should it raise, each window's pull raises the error
    and nothing is taken, and once measuring works the windows pop what windows fed each update do."""
    fed, each = _windows(True), _windows(True)
    rows = CohortRows(fed, 8, fed[0])
    for seed in range(3):
        arrays = _arrays(_step([0, 1, 2], seed), True)
        table, variances = measure_table(fed[0], *arrays)
        rows.add(slice(None), arrays)
        for k in range(SIZE):
            each[k].add_measured(table[k], variances[k])

    def broken(*_):
        raise ValueError("a broken measure")

    monkeypatch.setattr(cohort_rows, "measure_table", broken)
    for k in range(SIZE):
        with pytest.raises(ValueError, match="a broken measure"):
            fed[k].pop(MEMORY)
    monkeypatch.undo()
    assert all(_same(f.pop(MEMORY), e.pop(MEMORY)) for f, e in zip(fed, each, strict=True))
