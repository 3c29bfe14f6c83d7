"""What one update of S >= 1 members returns, whichever engine made it: :class:`UpdateResults`, over the seed axis.
Row k is the k-th member's of the call (the order of ``which``); the phases read the arrays whole, a member's own
objects take its row (:meth:`UpdateResults.member`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np


class UpdateResult(NamedTuple):
    """One member's row of :class:`UpdateResults`."""

    td_errors: np.ndarray  # (B,) δ = target − Q(s, a), the δ that updates priorities
    losses: np.ndarray  # (B,) each sample's loss without its IS weight (see UpdateResults.losses)
    loss: float
    q_mean: float


class UpdateResults(NamedTuple):
    """The values of one update of S members, each from that member's weights before its update. ``losses`` is each
    sample's loss without its IS weight (for PAL divided by λ): ``loss`` is their IS-weighted mean, and the measures
    read them rather than recompute the loss."""

    td: np.ndarray  # (S, B) float32
    losses: np.ndarray  # (S, B) float32
    loss: np.ndarray  # (S,) float64
    q_mean: np.ndarray  # (S,) float64

    def member(self, k: int) -> UpdateResult:
        return UpdateResult(self.td[k], self.losses[k], float(self.loss[k]), float(self.q_mean[k]))

    def members(self) -> list[UpdateResult]:
        return [self.member(k) for k in range(len(self.loss))]

    def take(self, ks: Sequence[int]) -> UpdateResults:
        """The rows ``ks``, in that order (members that left a call dropped)."""
        return UpdateResults(self.td[ks], self.losses[ks], self.loss[ks], self.q_mean[ks])

    def wait(self) -> UpdateResults:
        """Itself: the values are on the host (:class:`Pending` waits for them)."""
        return self

    def finite(self) -> np.ndarray:
        """(S,) bool: whether each member's loss and mean Q are finite."""
        return np.isfinite(self.loss) & np.isfinite(self.q_mean)

    @classmethod
    def rows(cls, rows: Sequence[UpdateResults]) -> UpdateResults:
        """Several results (each of any S) as one, their rows in order."""
        if len(rows) == 1:
            return rows[0]
        return cls(*(np.concatenate([getattr(r, f) for r in rows]) for f in cls._fields))


class Scores(NamedTuple):
    """The networks' opinion of S batches without an update (an engine's ``score``), each (S, B): what kinds that
    weigh a batch by the network need (LaBER: |δ| of a large uniform batch; ReLo: the online loss minus the target
    network's). The losses are each sample's, without IS weights and before PAL's 1/λ, against the same TD target
    (the online network's, as an update makes it)."""

    td: np.ndarray  # δ = target − Q(s, a)
    loss: np.ndarray  # l(Q(s, a) − target), the online network's
    target_loss: np.ndarray  # l(Q'(s, a) − target), the target network's


class Pending:
    """Results still on their way from the device (``train.priority_lag``): each member's deferred update,
    read (waited for) when first asked, as one :class:`UpdateResults`."""

    def __init__(self, parts: Sequence):
        self._parts = list(parts)  # each has .wait() -> UpdateResults
        self._done: UpdateResults | None = None

    def wait(self) -> UpdateResults:
        if self._done is None:
            self._done = UpdateResults.rows([p.wait() for p in self._parts])
        return self._done

    def take(self, ks: Sequence[int]) -> Pending:
        """The parts ``ks``, in that order, still unread."""
        return Pending([self._parts[k] for k in ks])
