"""The run directory's writers: TensorBoard event files of a resumed run, the summary."""

from __future__ import annotations

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from torch.utils.tensorboard import SummaryWriter

from per_cli.rundir.events import EventFile, tfrecord
from per_cli.rundir.logger import RunLogger

EVENT_FILE_PREFIX = "events.out.tfevents."


def _writer_counter(folder) -> int:
    """The process-wide counter TensorBoard puts last in an event file name, read by making one file."""
    writer = SummaryWriter(str(folder))
    writer.close()
    newest = max(folder.glob(EVENT_FILE_PREFIX + "*"), key=lambda p: int(p.name.rsplit(".", 1)[1]))
    return int(newest.name.rsplit(".", 1)[1])


def test_a_resumed_logger_file_is_read_after_the_crashed_one(tmp_path):
    # The flaky resume test: both runs wrote their event files in the same second, with writer counters 9
    # and 10 (or 99 and 100); by name "...10" sorts before "...9", TensorBoard read the resumed file first
    # and the scalars came back out of order. Reproduce that: bring the counter to just below a power of ten.
    junk = tmp_path / "junk"
    junk.mkdir()
    counter = _writer_counter(junk)
    power = 10
    while power <= counter + 1:
        power *= 10
    while counter + 1 < power - 1:  # the next two files get counters power - 1 and power
        counter = _writer_counter(junk)

    run = tmp_path / "run"
    run.mkdir()
    crashed = RunLogger(run)
    for step in range(1, 11):
        crashed.scalars({"x": float(step)}, step)
    crashed.close()
    resumed = RunLogger(run, append=True, purge_step=6)  # the checkpoint was at step 5
    for step in range(6, 11):
        resumed.scalars({"x": 10.0 * step}, step)
    resumed.close()

    names = sorted(p.name for p in run.glob(EVENT_FILE_PREFIX + "*"))
    assert [n.rsplit(".", 1)[1] for n in names] == [str(power - 1), str(power)]  # the resumed file sorts last
    events = EventAccumulator(str(run), size_guidance={"scalars": 0})
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars("x")] == [
        *((s, float(s)) for s in range(1, 6)),
        *((s, 10.0 * s) for s in range(6, 11)),
    ]


def test_scalars_read_back_as_add_scalar_writes_them(tmp_path):
    """``RunLogger.scalars`` writes one event per call holding every tag; a reader sees what one
    ``add_scalar`` per tag writes: the same tags, steps and float32 values (ints, numpy scalars, NaN, 1e-40)."""
    values = [
        {"a/x": 0.1, "a/n": 7, "b/np": np.float64(1 / 3), "b/f32": np.float32(2.5)},
        {"a/x": float("nan"), "a/n": -3, "b/np": np.float64(1e-40), "b/f32": np.float32(-0.0)},
    ]
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    ours.mkdir()
    logger = RunLogger(ours)
    writer = SummaryWriter(str(theirs))
    for step, scalars in enumerate(values, start=3):
        logger.scalars(scalars, step)
        for tag, value in scalars.items():
            writer.add_scalar(tag, value, step)
    logger.close()
    writer.close()

    def read(folder):
        acc = EventAccumulator(str(folder), size_guidance={"scalars": 0})
        acc.Reload()
        tags = acc.Tags()["scalars"]
        return {tag: [(e.step, np.float32(e.value).tobytes()) for e in acc.Scalars(tag)] for tag in tags}

    assert read(ours) == read(theirs)
    assert sorted(read(ours)) == sorted(values[0])


def test_tfrecord_frames_as_tensorboards_record_writer():
    """The compiled framing is TensorBoard's RecordWriter's (length, masked CRC-32C of each part), for records of
    every length class (empty, one byte, varint edges, long)."""
    from tensorboard.summary.writer.record_writer import RecordWriter

    rng = np.random.default_rng(5)
    for n in (0, 1, 127, 128, 300, 16384, 70_000):
        data = rng.integers(0, 256, n, dtype=np.uint8).tobytes()

        class Sink:
            written = b""

            def write(self, data):
                self.written += data

        sink = Sink()
        RecordWriter(sink).write(data)
        assert tfrecord(data) == sink.written


@pytest.mark.parametrize(
    ("values", "step"),
    [({"x": 1.0}, 2**63), ({"x": 1.0}, -(2**63) - 1), ({"x": None}, 1), ({"x": "one"}, 1), ({"x": 1j}, 1),
     ({1: 1.0}, 1), ({"\ud800": 1.0}, 1)],
)  # fmt: skip
def test_scalar_events_refuse_what_they_cannot_write(tmp_path, values, step):
    """Outside an event's layout (a step beyond int64, a value that is no float, a tag that is no UTF-8 str), the
    writer raises and writes nothing in its stead."""
    events = EventFile(tmp_path)
    size = events.path.stat().st_size
    with pytest.raises((TypeError, ValueError)):
        events.scalars(values, step)
    events.close()
    assert events.path.stat().st_size == size


def test_metrics_csv_holds_whole_rows_and_every_row_after_a_flush(tmp_path):
    logger = RunLogger(tmp_path, tensorboard=False)
    header = (tmp_path / "metrics.csv").read_bytes()
    assert header.startswith(b"step,episode,return") and header.endswith(b"\r\n")
    for step in range(1, 4):
        logger.episode({"step": step, "episode": step, "return": 1.5})
    assert (tmp_path / "metrics.csv").read_bytes() == header  # buffered: no half rows on disk
    logger.flush()  # (a checkpoint)
    rows = (tmp_path / "metrics.csv").read_text().splitlines()[1:]
    assert [r.split(",")[:3] for r in rows] == [[str(s), str(s), "1.5"] for s in range(1, 4)]
    logger.episode({"step": 4, "episode": 4, "return": 2.0})
    logger.close()
    assert (tmp_path / "metrics.csv").read_text().splitlines()[-1].startswith("4,4,2.0")


def test_metrics_csv_is_what_a_dict_writer_writes(tmp_path):
    """Rows with every column, missing columns, None (blank), extra keys (ignored), floats, ints, bools and
    text needing quotes come out as ``csv.DictWriter(fieldnames=EPISODE_COLUMNS, extrasaction="ignore")``
    writes them, header included."""
    import csv
    import io

    from per_cli.rundir.logger import EPISODE_COLUMNS

    rows = [
        {c: k * 0.1 + 1 / 3 for k, c in enumerate(EPISODE_COLUMNS)},
        {"step": 7, "episode": 2, "return": -1.0, "success": None, "extra": "x", "loss": np.float64(2.5)},
        {"step": 8, "wall_time": 1e-20, "epsilon": True, "state_diversity": 'a,"b"'},
        {},
    ]
    logger = RunLogger(tmp_path, tensorboard=False)
    for row in rows:
        logger.episode(row)
    logger.close()
    expected = io.StringIO()
    writer = csv.DictWriter(expected, fieldnames=EPISODE_COLUMNS, extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
    assert (tmp_path / "metrics.csv").read_bytes().decode() == expected.getvalue()
