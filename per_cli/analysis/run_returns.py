"""A completed run's measures of its whole learning curve (``per_cli.rundir.returns.return_measures``): from its
summary.json, else from its logged returns."""

from __future__ import annotations

from typing import NamedTuple

from per_cli.analysis.runs import Run
from per_cli.rundir.readers import RETURN_TAG
from per_cli.rundir.returns import return_measures

KEYS = ("return_auc", "return_peak", "return_drop")
FROM_SUMMARY, FROM_LOGS = "summary.json", "logged returns"


class ReturnMeasures(NamedTuple):
    auc: float | None
    peak: float | None
    drop: float | None
    source: str | None  # FROM_SUMMARY, FROM_LOGS, or None: the run has neither


NONE = ReturnMeasures(None, None, None, None)


def run_return_measures(run: Run) -> ReturnMeasures:
    """The measures of a completed run (:data:`NONE` for any other): its summary's, else its logged returns'."""
    if run.status != "completed":
        return NONE
    values = [run.summary.get(k) for k in KEYS]
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return ReturnMeasures(*(float(v) for v in values), FROM_SUMMARY)
    returns = run.scalars.get(RETURN_TAG)
    if returns is None or not len(returns.values):
        return NONE
    measured = return_measures(returns.values)
    return ReturnMeasures(*(measured[k] for k in KEYS), FROM_LOGS)
