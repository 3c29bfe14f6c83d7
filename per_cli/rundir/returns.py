"""summary.json's measures of a run's training returns: the final return's window and the whole-run measures."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

FINAL_RETURN_WINDOW = 20  # the summary's final_return_mean: the mean over this many last training episodes


def return_measures(returns: Sequence[float], window: int = FINAL_RETURN_WINDOW) -> dict[str, float | None]:
    """summary.json's measures of a run's training returns (one per episode, in order): ``return_auc``, the mean of
    every episode's; ``return_peak``, the best mean of ``window`` consecutive episodes (of all, with fewer);
    ``return_drop``, peak minus the final mean of the last ``window`` (0: it ended at its best). None without any."""
    x = np.asarray(returns, dtype=np.float64)
    if not len(x):
        return {"return_auc": None, "return_peak": None, "return_drop": None}
    width = min(window, len(x))
    csum = np.cumsum(np.insert(x, 0, 0.0))
    peak = float(np.max(csum[width:] - csum[:-width]) / width)
    final = float(np.mean(x[-width:]))
    return {"return_auc": float(x.mean()), "return_peak": peak, "return_drop": peak - final}
