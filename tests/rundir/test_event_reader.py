"""per reads TensorBoard event files through its own reader only. A file it cannot read (an older version, a
damaged record, a file that holds no events) costs what it cannot read, named in one line (which file, why, what
to do), never a traceback; per plot still draws every run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.record_writer import RecordWriter

from per_cli.rundir.events import EVENT_FILE_PREFIX
from per_cli.rundir.readers import read_event_files, read_scalars
from tests.runfactory import write_run

from ..conftest import REPO

BETA = "replay/beta"  # (a tag in the event files only: metrics.csv has no column of it)


def _summary_writer_run(path: Path, steps: range) -> Path:
    """A run directory whose event file is torch's ``SummaryWriter``'s: ``BETA`` = step / 100 at ``steps``."""
    return write_run(path, returns=[(s, float(s)) for s in steps], updates={BETA: [(s, s / 100) for s in steps]})


def _the_event_file(run_dir: Path) -> Path:
    (path,) = (p for p in run_dir.iterdir() if p.name.startswith(EVENT_FILE_PREFIX))
    return path


def _version_1_file(run_dir: Path) -> Path:
    """An event file of version 1 (TensorFlow's first; other purge rules), framed as TensorBoard frames it."""
    path = run_dir / f"{EVENT_FILE_PREFIX}1000000000.oldhost.1.0"  # (sorts before SummaryWriter's)
    with path.open("wb") as f:
        records = RecordWriter(f)
        records.write(Event(wall_time=1.0, file_version="brain.Event:1").SerializeToString())
        value = Summary.Value(tag="old/tag", simple_value=1.5)
        records.write(Event(wall_time=2.0, step=7, summary=Summary(value=[value])).SerializeToString())
    return path


def test_a_summary_writer_file_is_read_whole_with_nothing_to_say(tmp_path):
    run_dir = _summary_writer_run(tmp_path / "r", range(10, 101, 10))
    read = read_event_files(run_dir)
    assert read.problems == []
    steps, values = read.scalars[BETA]
    assert steps.tolist() == list(range(10, 101, 10))
    assert values.tolist() == [float(v) for v in (values.astype("float32"))]  # (simple_value: float32)
    assert abs(values[-1] - 1.0) < 1e-6


def test_a_version_1_file_is_named_and_left_out_and_the_runs_other_file_is_read(tmp_path):
    run_dir = _summary_writer_run(tmp_path / "r", range(10, 101, 10))
    old = _version_1_file(run_dir)
    read = read_event_files(run_dir)
    assert "old/tag" not in read.scalars and read.scalars[BETA][0].size == 10
    (line,) = read.problems
    assert line.startswith(f"{old.name}: it is of version 'brain.Event:1', older than the 'brain.Event:2'")
    assert "it is left out" in line and "move this one out of the run directory" in line


def test_a_damaged_record_keeps_the_records_before_it_and_says_where(tmp_path):
    run_dir = _summary_writer_run(tmp_path / "r", range(1, 11))
    path = _the_event_file(run_dir)
    buf = bytearray(path.read_bytes())
    at = -1
    for _ in range(6):  # the sixth BETA value's record (step 6)
        at = buf.index(BETA.encode(), at + 1)
    buf[at] ^= 0x20  # one flipped bit: the record's data no longer matches its checksum
    path.write_bytes(bytes(buf))
    read = read_event_files(run_dir)
    assert read.scalars[BETA][0].tolist() == [1, 2, 3, 4, 5]  # the records before it
    (line,) = read.problems
    assert line.startswith(f"{path.name}: byte ") and "does not match its checksum" in line
    assert "records are read, the rest left out" in line


def test_files_that_hold_no_events_are_named_not_a_traceback(tmp_path):
    run_dir = _summary_writer_run(tmp_path / "r", range(10, 31, 10))
    text = run_dir / f"{EVENT_FILE_PREFIX}1000000000.notes.1.0"
    text.write_text("these are my notes, not events\n" * 3)
    framed = run_dir / f"{EVENT_FILE_PREFIX}1000000001.other.1.0"
    with framed.open("wb") as f:
        RecordWriter(f).write(b"\xff\xff\xff\xff")  # a whole record (checksums right) that is no Event
    read = read_event_files(run_dir)
    assert read.scalars[BETA][0].tolist() == [10, 20, 30]
    assert read.problems[0].startswith(f"{text.name}: byte 0 does not match its checksum (damaged, or not an event")
    assert read.problems[1].startswith(f"{framed.name}: record 1 is not a TensorBoard event; it is left out")


def test_metrics_csv_serves_a_run_whose_event_files_give_nothing(tmp_path):
    run_dir = write_run(tmp_path / "r", returns=[(10, 1.0), (20, 2.0)], tensorboard=False)
    _version_1_file(run_dir)
    read = read_scalars(run_dir)
    assert read.source == "metrics.csv" and read.scalars["charts/episodic_return"][0].tolist() == [10, 20]
    assert len(read.problems) == 1 and "brain.Event:1" in read.problems[0]


def test_per_plot_names_the_file_it_cannot_read_and_draws_every_run(tmp_path):
    runs = tmp_path / "runs"
    _summary_writer_run(runs / "good", range(10, 201, 10))
    bad = _summary_writer_run(runs / "bad", range(10, 201, 10))
    old = _version_1_file(bad)
    done = subprocess.run(
        [sys.executable, "-m", "per_cli", "plot", str(runs), "--metric", BETA, "--workers", "1"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    said = [line for line in (done.stdout + done.stderr).splitlines() if old.name in line]
    assert len(said) == 1 and "bad: " in said[0] and "brain.Event:1" in said[0], done.stdout + done.stderr
    assert any((runs / "plots").glob("*.png"))
