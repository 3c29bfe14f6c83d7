"""UpdateResults, the one result type over the seed axis: rows, subsets, joins, and results still on their way."""

from __future__ import annotations

import numpy as np
import torch

from per_cli.rl.agent import DeferredResult
from per_cli.rl.results import Pending, UpdateResults


def results(s: int, batch: int = 4, start: float = 0.0) -> UpdateResults:
    td = (start + np.arange(s * batch, dtype=np.float32)).reshape(s, batch)
    return UpdateResults(td, 2 * td, start + np.arange(s, dtype=np.float64), -np.arange(s, dtype=np.float64))


def test_rows_subsets_and_joins_keep_each_members_values():
    r = results(3)
    row = r.member(2)
    assert row.td_errors.tolist() == r.td[2].tolist() and row.losses.tolist() == r.losses[2].tolist()
    assert (row.loss, row.q_mean) == (2.0, -2.0) and isinstance(row.loss, float)
    kept = r.take([2, 0])
    assert kept.td.tolist() == [r.td[2].tolist(), r.td[0].tolist()] and kept.loss.tolist() == [2.0, 0.0]
    joined = UpdateResults.rows([results(1), results(2, start=10.0)])
    assert joined.td.shape == (3, 4) and joined.loss.tolist() == [0.0, 10.0, 11.0]
    assert [m.loss for m in joined.members()] == [0.0, 10.0, 11.0]
    r.loss[1] = np.nan
    assert r.finite().tolist() == [True, False, True]


def test_pending_results_are_each_agents_deferred_update_read_once():
    parts = [
        DeferredResult(torch.full((4,), float(i)), torch.full((4,), 2.0 * i), torch.tensor(i + 0.5), torch.tensor(-i))
        for i in range(3)
    ]
    pending = Pending(parts)
    got = pending.take([2, 1]).wait()
    assert got.td.tolist() == [[2.0] * 4, [1.0] * 4] and got.losses.tolist() == [[4.0] * 4, [2.0] * 4]
    assert got.loss.tolist() == [2.5, 1.5] and got.q_mean.tolist() == [-2.0, -1.0]
    assert pending.wait() is pending.wait() and pending.wait().wait() is pending.wait()
