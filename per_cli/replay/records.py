"""Counters by name: a storage's or a sampler's counters are one 0-d numpy structured array of int64 fields.

The compiled calls read and move them in place by name (``c.cursor += 1``: numba passes a record by reference),
over a cohort's block of them (:func:`~per_cli.replay.storage.ring.member_axis`, row s member s's) as over one
member's; Python reads them through :class:`Counter` attributes."""

from __future__ import annotations

from typing import Any

import numpy as np


def counters_dtype(*names: str) -> np.dtype:
    """A structured dtype of int64 fields ``names``, in this order."""
    return np.dtype([(name, np.int64) for name in names])


def new_counters(dtype: np.dtype, **values: int) -> np.ndarray:
    """A 0-d array of ``dtype``: zeros but for ``values``."""
    counters = np.zeros((), dtype=dtype)
    for name, value in values.items():
        counters[name] = value
    return counters


class Counter:
    """An attribute over field ``name`` (the attribute's own name unless given; or an entry of a plain array) of the
    counters array at attribute ``array``, read as ``kind``."""

    def __init__(self, doc: str, array: str = "counters", kind: type = int, name: str | int | None = None):
        self.__doc__, self.array, self.kind, self.name = doc, array, kind, name

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name if self.name is None else self.name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        return self if obj is None else self.kind(getattr(obj, self.array)[self.name])

    def __set__(self, obj: Any, value: Any) -> None:
        getattr(obj, self.array)[self.name] = value
