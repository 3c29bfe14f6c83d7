"""RowBuffer: rows copied into growing arrays read back as np.stack of them; anything unlike the first row is
refused."""

from __future__ import annotations

import numpy as np

from per_cli.train.rows import RowBuffer


def test_filled_rows_are_np_stack_of_the_appended_arrays_across_growth_and_windows():
    rng = np.random.default_rng(0)
    buffer = RowBuffer(capacity=3)
    for n in (1, 7, 2):  # three windows, the second past two doublings
        appended = [(rng.normal(size=5).astype(np.float32), rng.integers(0, 9, size=(5, 2))) for _ in range(n)]
        for rows in appended:
            assert buffer.append(rows)
        filled = buffer.filled()
        for column, arrays in zip(filled, zip(*appended, strict=True), strict=True):
            want = np.stack(arrays)
            assert column.dtype == want.dtype and column.shape == want.shape and column.tobytes() == want.tobytes()
        buffer.clear()
    assert buffer.filled()[0].shape == (0, 5)


def test_a_row_unlike_the_first_is_refused_and_nothing_of_it_kept():
    buffer = RowBuffer()
    assert buffer.append((np.zeros(4, np.float32), np.zeros(4, np.int64)))
    for unlike in (
        (np.zeros(4, np.float64), np.zeros(4, np.int64)),  # another dtype: would be cast
        (np.zeros(1, np.float32), np.zeros(4, np.int64)),  # another shape: would broadcast
        (np.zeros(4, np.float32), [0, 0, 0, 0]),  # not an array
    ):
        assert not buffer.append(unlike)
    assert buffer.n == 1
    buffer.clear()  # a new window may start with other rows
    assert buffer.append((np.ones(2, np.float64), np.ones(3, np.int64)))
    assert [c.tolist() for c in buffer.filled()] == [[[1.0, 1.0]], [[1, 1, 1]]]
    assert not RowBuffer().append(([1.0], np.zeros(2)))
