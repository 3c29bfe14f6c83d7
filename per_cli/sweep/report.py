"""What ``per grid`` prints: the dry-run plan, a progress line per finished run, and the end table with the
exit code. Every table is read from the run directories on disk, the only truth."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any, NamedTuple, TextIO

from per_cli.analysis.text import num, print_table
from per_cli.sweep.plan import GridPlan, RunSpec
from per_cli.sweep.status import (
    COMPLETED,
    FAILED,
    INTERRUPTED,
    UNFINISHED,
    UNREADABLE,
    action_for,
    run_state,
    skip_note,
)

FULL_TABLE_MAX_RUNS = 60
EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130


def dry_run_table(plan: GridPlan, grid_dir: Path, exists: bool, retry_failed: bool) -> None:
    rows = []
    for spec in plan.runs:
        state = run_state(grid_dir / spec.name).state if exists else "new"
        action = action_for(state, retry_failed, grid_dir / spec.name)
        rows.append((spec.name, spec.source, str(spec.total_steps), state, action))
    grid_state = "exists: resuming" if exists else "new"
    print(f"grid {shlex.quote(str(grid_dir))} ({grid_state}); dry run, nothing is written")
    print_table(("run", "config", "steps", "state", "action"), rows, sys.stdout)
    skipped = sum(action == "skip" for *_, action in rows)
    print(f"{len(rows)} runs: {len(rows) - skipped} to run, {skipped} to skip")


def _row_label(state: str, summary: dict, result: dict | None, ran: bool, retry_failed: bool) -> tuple[str, str]:
    """(status shown, note) of one run at the end of an invocation; ``ran``: started in this invocation."""
    if result is not None and result.get("status") == "busy":
        return "busy", "locked by another process; not run"
    if state == COMPLETED:
        return (COMPLETED, (result or {}).get("note", "")) if ran else ("skipped", skip_note(state))
    if ran and (result or {}).get("status") == FAILED and state not in (COMPLETED, FAILED, UNREADABLE):
        # the worker failed the run but its summary.json says otherwise: it could not be written (a full disk)
        return FAILED, str(result.get("error") or "")[:100] + " (its summary.json could not record it)"
    if state in (FAILED, UNREADABLE):
        if ran:
            return state, str(summary.get("error", "")).split("\n")[0][:100]
        return state, "not reached" if retry_failed else skip_note(state)
    return (INTERRUPTED if state == INTERRUPTED else UNFINISHED), "interrupted" if ran else "not reached"


class EndRow(NamedTuple):
    """A run's row of the end table, its cells as printed."""

    name: str
    status: str
    steps: str
    wall_s: str
    return_: str
    eval: str
    note: str


def report(plan: GridPlan, grid_dir: Path, ran: dict[str, dict], started: set[str], retry_failed: bool,
           interrupted: bool, out: TextIO) -> int:  # fmt: skip
    """The end table and the exit code: 0 all completed, 1 any not completed, 130 interrupted."""
    rows, counts = [], {}
    for spec in plan.runs:
        state, summary = run_state(grid_dir / spec.name)
        summary = summary or {}
        result = ran.get(spec.name)
        label, note = _row_label(state, summary, result, result is not None or spec.name in started, retry_failed)
        counts[label] = counts.get(label, 0) + 1
        cells = [num(summary.get(k)) for k in ("wall_time_s", "final_return_mean", "eval_return_mean")]
        rows.append(EndRow(spec.name, label, str(summary.get("total_steps", "-")), *cells, note))
    show = rows if len(rows) <= FULL_TABLE_MAX_RUNS else [r for r in rows if r.status not in ("completed", "skipped")]
    print_table(("run", "status", "steps", "wall_s", "return", "eval", "note"), show, out)
    order = ["completed", "skipped", "failed", "unreadable", "interrupted", "unfinished", "busy"]
    tally = ", ".join(f"{counts[k]} {k}" for k in order if counts.get(k))
    print(f"grid {shlex.quote(str(grid_dir))}: {tally}", file=out)
    print(f"plot: per plot {shlex.quote(str(grid_dir))}", file=out)
    if interrupted:
        print("interrupted: run the same command again to resume", file=out)
        return EXIT_INTERRUPTED
    return EXIT_OK if set(counts) <= {"completed", "skipped"} else EXIT_FAILED


class GridProgress:
    """An overall bar (env steps of the runs to do) plus a line per finished run; plain lines off a terminal."""

    def __init__(self, total_runs: int, total_steps: int):
        self.stream = sys.stderr
        self.total_runs, self.done_runs = total_runs, 0
        self.steps: dict[str, int] = {}
        self._rich = None
        if self.stream.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            self._rich = Progress(
                TextColumn("[bold]grid"),
                BarColumn(),
                TextColumn("{task.fields[runs]}"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=Console(file=self.stream),
            )
            self._task = self._rich.add_task("grid", total=max(total_steps, 1), runs=self._runs_text())

    def _runs_text(self) -> str:
        return f"{self.done_runs}/{self.total_runs} runs"

    def __enter__(self) -> GridProgress:
        if self._rich is not None:
            self._rich.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._rich is not None:
            self._rich.stop()

    def line(self, text: str) -> None:
        if self._rich is not None:
            self._rich.console.print(text, markup=False, highlight=False)
        else:
            print(text, file=self.stream, flush=True)

    def step(self, name: str, step: int) -> None:
        self.steps[name] = step
        if self._rich is not None:
            self._rich.update(self._task, completed=sum(self.steps.values()))

    def finished(self, spec: RunSpec, result: dict[str, Any]) -> None:
        self.done_runs += 1
        self.step(spec.name, spec.total_steps)
        if self._rich is not None:
            self._rich.update(self._task, runs=self._runs_text())
        status = result.get("status", "?")
        detail = ""
        if status == COMPLETED:
            detail = f"{num(result.get('wall_time_s'))} s, return {num(result.get('final_return_mean'))}"
        elif result.get("error"):
            detail = str(result["error"]).splitlines()[0][:160]
        if result.get("note"):
            detail += f" ({result['note']})"
        if result.get("host"):  # Ray: the node that trained it
            detail += f" [on {result['host']}]"
        self.line(f"[{self.done_runs}/{self.total_runs}] {status:<11} {spec.name}  {detail}".rstrip())
