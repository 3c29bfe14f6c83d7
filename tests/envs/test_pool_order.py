"""EnvPool returns a call's envs as they finish (``info["env_id"]``); ``pool._order`` puts them back in the order
of the ids sent, and says None where they came in it. Pure array logic: runs without EnvPool installed."""

from __future__ import annotations

import numpy as np

from per_cli.envs.pool import _order


def test_results_in_the_order_sent_need_no_reorder():
    sent = np.array([3, 0, 2], dtype=np.int32)
    assert _order({"env_id": sent.copy()}, sent) is None


def test_results_out_of_order_are_put_back_in_the_order_sent():
    sent = np.array([3, 0, 2, 5], dtype=np.int32)
    got = np.array([2, 5, 3, 0], dtype=np.int32)
    order = _order({"env_id": got}, sent)
    np.testing.assert_array_equal(got[order], sent)


def test_ids_of_another_dtype_take_the_reorder_which_is_right_for_any_order():
    """Bytes are compared within one dtype only; int64 ids take the reorder, which for ids in order is the
    identity."""
    sent = np.array([0, 1], dtype=np.int32)
    np.testing.assert_array_equal(_order({"env_id": np.array([0, 1], dtype=np.int64)}, sent), [0, 1])
