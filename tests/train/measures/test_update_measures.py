"""A cohort step's update measures (per_cli.train.measures.update_measures) equal what the update window's pop computes
from the raw updates, bit for bit, whether a window holds measured updates only or both kinds."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from per_cli.rl.losses import TDLoss
from per_cli.train.measures.update_measures import measure_rows
from per_cli.train.measures.update_window import UpdateWindow
from tests.train.measures.test_update_window import _memory


def _draws(memory, steps: int, members: int, batch: int, seed: int):
    """Per step: stacked (members, batch) arrays of ``members`` batches of the memory, with TD errors."""
    rng = np.random.default_rng(seed)
    for step in range(steps):
        batches = [memory.sample(batch) for _ in range(members)]
        stacked = {key: np.stack([getattr(b, key) for b in batches]) for key in ("obs", "weights", "ages", "episodes")}
        stacked["obs"][0, : step % 3] = stacked["obs"][0, 0]  # repeated states
        stacked["weights"] = rng.uniform(0.1, 1, size=(members, batch)).astype(np.float32)
        td = (rng.standard_normal((members, batch)) * 10.0 ** rng.uniform(-3, 3, size=(members, 1))).astype(np.float32)
        td[0, :3] = np.round(td[0, :3])  # ties
        losses, q_means = rng.standard_normal(members), rng.standard_normal(members)
        yield stacked, td, losses, q_means


@pytest.mark.parametrize(
    "threshold, iid, loss",
    [(0.8, True, "huber"), (None, True, "mse"), (0.5, False, "huber"), (None, False, TDLoss("pal", 0.1, 0.6))],
)
def test_measured_updates_pop_as_the_raw_ones_bit_for_bit(threshold, iid, loss):
    memory = _memory((4,), episode_length=7)
    members, held = 5, memory.episodes_held()
    raw = [UpdateWindow(threshold, iid=iid, loss=loss, refresh_every=20, seed=k) for k in range(members)]
    measured = [UpdateWindow(threshold, iid=iid, loss=loss, refresh_every=20, seed=k) for k in range(members)]
    served = 0
    for step, (s, td, losses, q_means) in enumerate(_draws(memory, 45, members, 32, seed=1)):
        rows = measure_rows(measured, td, s["weights"], s["ages"], s["obs"], s["episodes"], [held] * members,
                            losses, q_means)  # fmt: skip
        assert rows is not None
        for k in range(members):
            batch = SimpleNamespace(**{key: s[key][k] for key in s})
            result = SimpleNamespace(td_errors=td[k], loss=float(losses[k]), q_mean=float(q_means[k]))
            raw[k].add(batch, result, memory)
            if (step + k) % 4 == 0:  # some updates come in raw: a window holds both kinds
                measured[k].add(batch, result, memory)
            else:
                measured[k].add_measured(*rows[k], batch.obs)
                served += 1
        if step % 9 == 8 or step % 13 == 12:  # pops at logs and episode ends
            for k in range(members):
                want, got = raw[k].pop(memory), measured[k].pop(memory)
                assert list(got) == list(want)  # the same tags in the same order
                for key in want:
                    assert got[key].dtype == want[key].dtype and got[key].tobytes() == want[key].tobytes(), key
    assert served > 100
    assert ("iid/state_diversity" in want) == iid


def test_arrays_the_kernels_do_not_serve_are_left_to_the_windows():
    memory = _memory((4,))
    windows = [UpdateWindow(0.8, seed=k) for k in range(2)]
    s, td, losses, q_means = next(_draws(memory, 1, 2, 16, seed=0))
    args = (s["weights"], s["ages"], s["obs"], s["episodes"], [memory.episodes_held()] * 2, losses, q_means)
    assert measure_rows(windows, td, *args) is not None
    assert measure_rows(windows, td.astype(np.float64), *args) is None  # not the compiled TD measures' dtype
    assert measure_rows(windows, np.zeros((2, 200), np.float32), *args) is None  # too long a batch
    other = [windows[0], UpdateWindow(0.5, seed=1)]
    assert measure_rows(other, td, *args) is None  # windows measuring differently
    pals = [UpdateWindow(0.8, loss=TDLoss("pal", kappa, 0.6), seed=k) for k, kappa in enumerate((0.1, 0.2))]
    assert measure_rows(pals, td, *args) is None  # their unweighted losses differ
    rows = measure_rows([UpdateWindow(0.8, seed=k) for k in range(2)], td, s["weights"], s["ages"],
                        s["obs"].astype(np.float64), s["episodes"], args[4], losses, q_means)  # fmt: skip
    assert rows is not None and rows[0][1] is None  # no feature variances: pop measures the states
