"""Reading a run directory's scalars back, from its per-episode ``metrics.csv`` or its TensorBoard event files (what
:mod:`.logger` and :mod:`.events` write)."""

from __future__ import annotations

import contextlib
import csv
import math
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from per_cli.errors import cut
from per_cli.rundir.events import EVENT_FILE_PREFIX, FILE_VERSION, records
from per_cli.rundir.logger import EPISODE_UPDATE_COLUMNS, csv_header

RETURN_TAG = "charts/episodic_return"
LENGTH_TAG = "charts/episodic_length"
# metrics.csv columns as the TensorBoard tags they average (the CSV holds per-episode values)
CSV_TAGS = {
    "return": RETURN_TAG,
    "length": LENGTH_TAG,
    "epsilon": "charts/epsilon",
    "success": "charts/success_rate",
    **{column: tag for tag, column in EPISODE_UPDATE_COLUMNS.items()},
}


class Series(NamedTuple):
    """One tag's logged values and the env steps they were logged at."""

    steps: np.ndarray
    values: np.ndarray


Scalars = dict[str, Series]


def event_files(run_dir: Path) -> list[Path]:
    """The run's TensorBoard event files in the order TensorBoard reads them (by name)."""
    return sorted(p for p in run_dir.iterdir() if p.name.startswith(EVENT_FILE_PREFIX))


class EventsRead(NamedTuple):
    """The scalars of a run's event files, and a line for each file, or part of one, left out (which file, why,
    what to do)."""

    scalars: Scalars
    problems: list[str]


def read_event_files(run_dir: Path) -> EventsRead:
    """Every scalar of the run's event files (version 2, what per and ``SummaryWriter`` write), without
    downsampling, with TensorBoard's purge rule (a ``SessionLog.START`` at step s drops the values logged before it
    at steps >= s); a last record cut short (still being written) is left out. A file that cannot be read is left
    out from where it cannot, with its line in ``problems``: an older version (other purge rules), a record whose
    checksum does not match, or one that is not an event."""
    from google.protobuf.message import DecodeError
    from tensorboard.compat.proto.event_pb2 import Event, SessionLog

    data: dict[str, tuple[list[int], list[float]]] = {}
    problems: list[str] = []
    for path in event_files(run_dir):
        buf = path.read_bytes()
        framing = records(buf)
        if framing.bad_checksum:
            problems.append(_left_out(path, f"byte {framing.at} does not match its checksum (damaged, or not an "
                                            "event file)", framing.starts.size))  # fmt: skip
        for k, (start, length) in enumerate(zip(framing.starts.tolist(), framing.lengths.tolist(), strict=True)):
            try:
                event = Event.FromString(buf[start : start + length])
            except DecodeError:
                problems.append(_left_out(path, f"record {k + 1} is not a TensorBoard event", k))
                break
            kind = event.WhichOneof("what")
            if kind == "summary":
                for value in event.summary.value:
                    if value.WhichOneof("value") == "simple_value":
                        steps, values = data.setdefault(value.tag, ([], []))
                        steps.append(event.step)
                        values.append(value.simple_value)
            elif kind == "file_version" and not _readable_version(event.file_version):
                problems.append(_left_out(path, f"it is of version {event.file_version!r}, older than the "
                                                f"{FILE_VERSION!r} that per reads (and writes)", k))  # fmt: skip
                break
            elif kind == "session_log" and event.session_log.status == SessionLog.START:
                for tag, (steps, values) in data.items():
                    keep = [i for i, step in enumerate(steps) if step < event.step]
                    data[tag] = ([steps[i] for i in keep], [values[i] for i in keep])
    scalars = {
        tag: Series(np.asarray(steps, dtype=np.int64), np.asarray(values, dtype=np.float64))
        for tag, (steps, values) in data.items()
        if steps
    }
    return EventsRead(scalars, problems)


def _readable_version(version: str) -> bool:
    """Whether a ``file_version`` event's version (``brain.Event:2``) is one whose purge rule this reader keeps."""
    try:
        return float(version.rpartition(":")[2]) >= 2
    except ValueError:
        return False


def _left_out(path: Path, why: str, records_read: int) -> str:
    """The line of an event file left out from a record on: which, why, what was kept and what to do."""
    kept = f"its first {records_read} records are read, the rest left out" if records_read else "it is left out"
    return (
        f"{path.name}: {why}; {kept} (per reads only the event files it writes: move this one out of the run "
        "directory, or view it with TensorBoard)"
    )


def damage(run_dir: Path) -> list[str]:
    """What is visibly broken in the run's scalar files, without reading them whole: a ``metrics.csv`` that ends in
    the middle of a line (its partial row is never used), and event files of zero bytes."""
    found = []
    csv_path = run_dir / "metrics.csv"
    with contextlib.suppress(FileNotFoundError):
        size = csv_path.stat().st_size
        if size:
            with csv_path.open("rb") as f:
                f.seek(size - 1)
                if f.read(1) != b"\n":
                    found.append("metrics.csv ends in the middle of a line (cut short?); its last row is left out")
    empty = [p.name for p in event_files(run_dir) if p.stat().st_size == 0]
    if empty:
        found.append(f"event file {', '.join(empty)} is empty (0 bytes)")
    return found


def read_metrics_csv(path: Path, tags: set[str] | None = None) -> Scalars:
    """The per-episode CSV as scalars over env steps (blank cells are left out); only ``tags`` if given. Whole rows
    only: a last line without its newline (cut short) is left out, and so is any row with another number of cells
    than the header."""
    with path.open(newline="") as f:
        lines = f.read().splitlines(keepends=True)
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines.pop()
    reader = csv.reader(lines)
    header = next(reader, [])
    rows = [row for row in reader if len(row) == len(header)]
    if "step" not in header:
        return {}
    step_at = header.index("step")
    out: Scalars = {}
    for column, tag in CSV_TAGS.items():
        if column not in header or (tags is not None and tag not in tags):
            continue
        at = header.index(column)
        pairs = []
        for row in rows:
            with contextlib.suppress(ValueError):  # a blank or damaged cell drops its row
                pairs.append((int(row[step_at]), float(row[at])))
        if pairs:
            steps, values = zip(*pairs, strict=True)
            out[tag] = Series(np.asarray(steps, dtype=np.int64), np.asarray(values, dtype=np.float64))
    return out


class ScalarsRead(NamedTuple):
    """A run's scalars, where they come from (``tensorboard``, ``metrics.csv`` or ``none``), and a line for each
    event file, or part of one, left out (:class:`EventsRead`)."""

    scalars: Scalars
    source: str
    problems: list[str]


def read_scalars(run_dir: Path, tags: set[str] | None = None) -> ScalarsRead:
    """``tags`` given: ``metrics.csv`` when it has a column for each of them (only those are read), else the event
    files; None: the event files (every value of every tag); ``metrics.csv`` where the event files hold none."""
    csv_path = run_dir / "metrics.csv"
    has_csv = csv_path.is_file()
    if tags is not None and has_csv:
        columns = {CSV_TAGS[c] for c in csv_header(csv_path) if c in CSV_TAGS}
        if tags <= columns:
            return ScalarsRead(read_metrics_csv(csv_path, tags), "metrics.csv", [])
    events = read_event_files(run_dir)
    if events.scalars:
        return ScalarsRead(events.scalars, "tensorboard", events.problems)
    if has_csv:
        return ScalarsRead(read_metrics_csv(csv_path, tags), "metrics.csv", events.problems)
    return ScalarsRead({}, "none", events.problems)


# summary.json keys that are read, with the types they must have: any other value is left out and said
SUMMARY_TYPES: dict[str, tuple[type, ...]] = {
    "env": (str,),
    "replay": (str,),
    "error": (str,),
    "seed": (int,),
    "total_steps": (int, float),
    "wall_time_s": (int, float),
    "final_return_mean": (int, float),
    "eval_return_mean": (int, float),
}


def checked_summary(summary: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The summary without the values of :data:`SUMMARY_TYPES` keys of another type, and a problem line per value left
    out: a hand-edited or damaged summary costs its run those values, never the whole plot."""
    kept, problems = dict(summary), []
    for key, types in SUMMARY_TYPES.items():
        value = kept.get(key)
        if value is None:
            continue
        bad = isinstance(value, bool) or not isinstance(value, types)
        if not bad and isinstance(value, float) and key != "final_return_mean" and key != "eval_return_mean":
            bad = not math.isfinite(value)
        if bad:
            del kept[key]
            problems.append(f"summary.json: {key} is {cut(repr(value), 40, 30)}, not a {_KIND[types]}; left out")
    return kept, problems


_KIND = {(str,): "string", (int,): "whole number", (int, float): "number"}
