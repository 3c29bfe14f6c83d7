"""Reading a run directory's scalars back, from its per-episode ``metrics.csv`` or its TensorBoard event files (what
:mod:`.logger` and :mod:`.events` write)."""

from __future__ import annotations

import contextlib
import csv
import math
import struct
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from per_cli.errors import cut
from per_cli.rundir.events import EVENT_FILE_PREFIX
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


def read_tensorboard(run_dir: Path) -> Scalars:
    """Every scalar of the run's event files, without downsampling (TensorBoard's ``EventAccumulator``)."""
    import logging

    from tensorboard.backend.event_processing import event_accumulator as ea

    # a resumed run's events restart at its checkpoint (purge_step): the accumulator drops the stale ones,
    # as it should, but says so on stderr
    logging.getLogger("tensorboard").setLevel(logging.ERROR)
    guidance = {ea.SCALARS: 0, ea.TENSORS: 1, ea.HISTOGRAMS: 1, ea.IMAGES: 1, ea.AUDIO: 1, ea.COMPRESSED_HISTOGRAMS: 1}
    acc = ea.EventAccumulator(str(run_dir), size_guidance=guidance)
    acc.Reload()
    out: Scalars = {}
    for tag in acc.Tags()["scalars"]:
        events = acc.Scalars(tag)
        out[tag] = Series(
            np.fromiter((e.step for e in events), dtype=np.int64, count=len(events)),
            np.fromiter((e.value for e in events), dtype=np.float64, count=len(events)),
        )
    return out


def event_files(run_dir: Path) -> list[Path]:
    """The run's TensorBoard event files in the order TensorBoard reads them (by name)."""
    return sorted(p for p in run_dir.iterdir() if p.name.startswith(EVENT_FILE_PREFIX))


def read_event_files(run_dir: Path) -> Scalars | None:
    """The same scalars as :func:`read_tensorboard`, with TensorBoard's purge rule for version-2 files (a
    ``SessionLog.START`` at step s drops the values logged before it at steps >= s); a truncated last record is left
    out. None for files of an older version (other purge rules): read those with :func:`read_tensorboard`."""
    from tensorboard.compat.proto.event_pb2 import Event, SessionLog

    data: dict[str, tuple[list[int], list[float]]] = {}
    for path in event_files(run_dir):
        buf = path.read_bytes()
        pos, end = 0, len(buf)
        while pos + 12 <= end:  # record: uint64 length, uint32 its CRC, data, uint32 data CRC
            (length,) = struct.unpack_from("<Q", buf, pos)
            start = pos + 12
            pos = start + length + 4
            if pos > end:
                break
            event = Event.FromString(buf[start : start + length])
            kind = event.WhichOneof("what")
            if kind == "summary":
                for value in event.summary.value:
                    if value.WhichOneof("value") == "simple_value":
                        steps, values = data.setdefault(value.tag, ([], []))
                        steps.append(event.step)
                        values.append(value.simple_value)
            elif kind == "file_version":
                if float(event.file_version.rpartition(":")[2] or 0) < 2:
                    return None
            elif kind == "session_log" and event.session_log.status == SessionLog.START:
                for tag, (steps, values) in data.items():
                    keep = [i for i, step in enumerate(steps) if step < event.step]
                    data[tag] = ([steps[i] for i in keep], [values[i] for i in keep])
    return {
        tag: Series(np.asarray(steps, dtype=np.int64), np.asarray(values, dtype=np.float64))
        for tag, (steps, values) in data.items()
        if steps
    }


def damage(run_dir: Path) -> list[str]:
    """What is visibly broken in the run's scalar files, without reading them whole: a ``metrics.csv`` that ends in
    the middle of a line (its partial row is never used), and event files of zero bytes."""
    found = []
    csv_path = run_dir / "metrics.csv"
    try:
        size = csv_path.stat().st_size
        if size:
            with csv_path.open("rb") as f:
                f.seek(size - 1)
                if f.read(1) != b"\n":
                    found.append("metrics.csv ends in the middle of a line (cut short?); its last row is left out")
    except FileNotFoundError:
        pass
    empty = [p.name for p in event_files(run_dir) if p.stat().st_size == 0]
    if empty:
        found.append(f"event file {', '.join(empty)} is empty (0 bytes)")
    return found


def _rows(path: Path) -> tuple[list[str], list[list[str]]]:
    """The CSV's header and its whole rows: a last line without its newline (cut short) is left out, and so
    is any row with another number of cells than the header."""
    with path.open(newline="") as f:
        text = f.read()
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines.pop()
    reader = csv.reader(lines)
    header = next(reader, [])
    return header, [row for row in reader if len(row) == len(header)]


def _number_pairs(rows: list[list[str]], step_at: int, at: int) -> list[tuple[int, float]]:
    """(step, value) of each row whose two cells parse: a blank or damaged cell drops its row."""
    pairs = []
    for row in rows:
        with contextlib.suppress(ValueError):
            pairs.append((int(row[step_at]), float(row[at])))
    return pairs


def read_metrics_csv(path: Path, tags: set[str] | None = None) -> Scalars:
    """The per-episode CSV as scalars over env steps (blank cells are left out); only ``tags`` if given.
    Whole rows only (see :func:`_rows`)."""
    header, rows = _rows(path)
    if "step" not in header:
        return {}
    step_at = header.index("step")
    out: Scalars = {}
    for column, tag in CSV_TAGS.items():
        if column not in header or (tags is not None and tag not in tags):
            continue
        at = header.index(column)
        pairs = _number_pairs(rows, step_at, at)
        if pairs:
            steps, values = zip(*pairs, strict=True)
            out[tag] = Series(np.asarray(steps, dtype=np.int64), np.asarray(values, dtype=np.float64))
    return out


def read_scalars(run_dir: Path, tags: set[str] | None = None) -> tuple[Scalars, str]:
    """(scalars, source). ``tags`` given: ``metrics.csv`` when it has a column for each of them (only those are
    read), else the event files; None: the event files (every value of every tag), else ``metrics.csv``."""
    csv_path = run_dir / "metrics.csv"
    has_csv = csv_path.is_file()
    if tags is not None and has_csv:
        columns = {CSV_TAGS[c] for c in csv_header(csv_path) if c in CSV_TAGS}
        if tags <= columns:
            return read_metrics_csv(csv_path, tags), "metrics.csv"
    if event_files(run_dir):
        scalars = read_event_files(run_dir)
        if scalars is None:
            scalars = read_tensorboard(run_dir)
        if scalars:
            return scalars, "tensorboard"
    if has_csv:
        return read_metrics_csv(csv_path, tags), "metrics.csv"
    return {}, "none"


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
