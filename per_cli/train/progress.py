"""Progress reporting for long work: a rich bar on a terminal, a few plain lines otherwise."""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


def _fmt(value: float | None, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


class RichTrainProgress:
    def __init__(self, total: int, description: str):
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[stats]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
        )
        self._task = self._progress.add_task(description, total=total, stats="")

    def __enter__(self) -> RichTrainProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def update(self, step: int, info: dict[str, Any]) -> None:
        stats = (
            f"{info['sps']:.0f} steps/s  return {_fmt(info['recent_return'])}  "
            f"eval {_fmt(info['eval_return'])}  ε {info['epsilon']:.3f}"
        )
        self._progress.update(self._task, completed=step, stats=stats)


class PlainTrainProgress:
    """About ``lines`` lines over a run: for logs, pipes and ``--quiet``-less non-terminal output."""

    def __init__(self, total: int, description: str, lines: int = 10, stream=None):
        self.total, self.description = total, description
        self.every = max(total // lines, 1)
        self._next = self.every
        self.stream = stream or sys.stderr

    def __enter__(self) -> PlainTrainProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def update(self, step: int, info: dict[str, Any]) -> None:
        if step < self._next and (step < self.total or self._next > self.total + self.every):
            return
        self._next = (step // self.every + 1) * self.every
        print(
            f"{self.description}: step {step}/{self.total}  {info['sps']:.0f} steps/s  "
            f"episodes {info['episodes']}  return {_fmt(info['recent_return'])}  "
            f"eval {_fmt(info['eval_return'])}  ε {info['epsilon']:.3f}",
            file=self.stream,
            flush=True,
        )


class SilentProgress:
    def __enter__(self) -> SilentProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def update(self, step: int, info: dict[str, Any]) -> None:
        pass


def train_progress(total: int, description: str, quiet: bool):
    if quiet:
        return SilentProgress()
    if sys.stderr.isatty():
        return RichTrainProgress(total, description)
    return PlainTrainProgress(total, description)
