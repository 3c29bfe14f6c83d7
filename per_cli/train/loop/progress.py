"""Progress reporting for long work: a rich bar on a terminal, a few plain lines otherwise.

The loop calls ``update(step, info)`` every 1,000 steps and once after the final evaluation, so the last line and
the CLI's ``done:`` line (:func:`done_line`) agree. The bar counts episodes under an episode budget, else steps."""

from __future__ import annotations

import re
import sys
import time
from typing import Any, Protocol

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Column

_MIN_BAR = 20
_MAX_BAR = 40
_MIN_NAME = 16
# a typical compact stats text; longer ones are cut with … rather than squeeze the bar
_STATS_WIDTH = len("1234 sps  ret -123.4  eval -123.4  ε 0.050")
# the stats give way to the run's name down to this many columns (speed, return and evaluation still show)
_MIN_STATS = len("1234 sps  ret -123.4  eval -12")
_TIME_STAMP = re.compile(r"__\d{8}-\d{6}")  # in default run names: the same on every run of a session


class ProgressSink(Protocol):
    """What the loop calls on a progress sink (each class here is one)."""

    def update(self, step: int, info: dict[str, Any]) -> None: ...


def _fmt(value: float | None, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


def stats_text(info: dict[str, Any], compact: bool = False) -> str:
    """The numbers of a progress line: speed, recent return, last evaluation, success rate (goal envs), ε.
    ``compact``: shorter words, for the one-line bar."""
    sps, ret, success = ("sps", "ret", "succ") if compact else ("steps/s", "return", "success")
    rate = "" if info.get("success_rate") is None else f"  {success} {info['success_rate']:.2f}"
    return (
        f"{info['sps']:.0f} {sps}  {ret} {_fmt(info['recent_return'])}  eval {_fmt(info['eval_return'])}"
        f"{rate}  ε {info['epsilon']:.3f}"
    )


def done_line(summary: dict[str, Any]) -> str:
    """The CLI's closing line, from the same summary the last progress line was made from. The training return
    names the episodes it is the mean of (``last-8`` until 20 have ended)."""
    success = ""
    if summary.get("final_success_rate") is not None or summary.get("eval_success_rate") is not None:
        success = (
            f"; success rate {_fmt(summary.get('final_success_rate'), '.2f')}, "
            f"eval {_fmt(summary.get('eval_success_rate'), '.2f')}"
        )
    return (
        f"done: {summary['total_steps']} steps, {summary['episodes']} episodes in {summary['wall_time_s']:.1f}s "
        f"({summary['steps_per_second']:.0f} steps/s); last-{summary['final_return_episodes']} return "
        f"{_fmt(summary['final_return_mean'])}, "
        f"eval return {_fmt(summary['eval_return_mean'])}{success}"
    )


class _Budget:
    """What the progress counts: episodes under an episode budget, env steps otherwise."""

    def __init__(self, total_steps: int, total_episodes: int | None):
        self.by_episodes = total_episodes is not None
        self.total = total_episodes if total_episodes is not None else total_steps

    def done(self, step: int, info: dict[str, Any]) -> int:
        return int(info["episodes"]) if self.by_episodes else step


class SilentProgress:
    """No progress shown (``--quiet``, a grid's worker, a member of a cohort after the first); the others' base: a
    progress sink is a context, opened around the run."""

    def __enter__(self) -> SilentProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def update(self, step: int, info: dict[str, Any]) -> None:
        pass


class RichTrainProgress(SilentProgress):
    """A one-line bar. Where the width is short, the run name first loses its time stamp, then the stats give
    way (down to :data:`_MIN_STATS` columns, cut with …), then the name is shortened with … (to no less than 16
    characters); the bar keeps at least 20 columns."""

    def __init__(self, total: int, description: str, total_episodes: int | None = None, console=None):
        self.budget = _Budget(total, total_episodes)
        console = console or Console(stderr=True)
        count_width = 2 * len(str(self.budget.total)) + 1
        fixed = count_width + len("-:--:--") + 4  # 4 spaces between the 5 columns
        if len(description) > console.width - fixed - _STATS_WIDTH - _MIN_BAR:  # the time stamp is what goes first
            description = _TIME_STAMP.sub("", description)
        room = max(console.width - fixed - _MIN_STATS - _MIN_BAR, _MIN_NAME)
        if len(description) > room:
            description = description[: room - 1] + "…"
        bar = max(_MIN_BAR, min(_MAX_BAR, console.width - fixed - _STATS_WIDTH - len(description)))
        stats_room = max(console.width - fixed - bar - len(description), 10)
        self._progress = Progress(
            TextColumn("[bold]{task.description}", table_column=Column(no_wrap=True)),
            BarColumn(bar_width=bar),
            MofNCompleteColumn(),
            TextColumn(
                "{task.fields[stats]}", table_column=Column(no_wrap=True, overflow="ellipsis", max_width=stats_room)
            ),
            TimeRemainingColumn(),
            console=console,
        )
        self._task = self._progress.add_task(description, total=self.budget.total, stats="")

    def __enter__(self) -> RichTrainProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def update(self, step: int, info: dict[str, Any]) -> None:
        stats = stats_text(info, compact=True)
        self._progress.update(self._task, completed=self.budget.done(step, info), stats=stats)


# a plain line at least this often, however long the run
PLAIN_EVERY_S = 60.0


class PlainTrainProgress(SilentProgress):
    """About ``lines`` lines over a run, the first update's line, one a minute at least, and the final one
    once: for logs, pipes and other non-terminals."""

    def __init__(self, total: int, description: str, lines: int = 10, stream=None, total_episodes: int | None = None):
        self.budget = _Budget(total, total_episodes)
        self.description = description
        self.every = max(self.budget.total // lines, 1)
        self._next = self.every
        self.stream = stream or sys.stderr
        self._printed = False
        self._last = time.monotonic()

    def update(self, step: int, info: dict[str, Any]) -> None:
        """A line at each ``every`` units of the budget, and the run's final line (``info["final"]``, sent
        once, after the final evaluation); the trainer sends no other update at the last step."""
        done = self.budget.done(step, info)
        now = time.monotonic()
        first = not self._printed  # the first update (step 1,000): a sign of life, whatever the total
        if not info.get("final") and done < self._next and not first and now - self._last < PLAIN_EVERY_S:
            return
        self._printed, self._last = True, now
        self._next = max(self._next, (done // self.every + 1) * self.every)
        where = f"episode {done}/{self.budget.total}  step {step}" if self.budget.by_episodes else (
            f"step {step}/{self.budget.total}  episodes {info['episodes']}")  # fmt: skip
        print(f"{self.description}: {where}  {stats_text(info)}", file=self.stream, flush=True)


def train_progress(total: int, description: str, quiet: bool, total_episodes: int | None = None):
    """The progress sink for ``per train``: silent, a rich bar on a terminal, or plain lines."""
    if quiet:
        return SilentProgress()
    if sys.stderr.isatty():
        return RichTrainProgress(total, description, total_episodes)
    return PlainTrainProgress(total, description, total_episodes=total_episodes)
