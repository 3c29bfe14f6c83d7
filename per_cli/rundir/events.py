"""A run's TensorBoard event file, written in the calling thread: what torch's ``SummaryWriter`` writes (name, version
event, purge marker, ``simple_value`` scalars), without its thread, framed with a compiled CRC32C (TensorBoard's own
is pure Python) and buffered; and the framing read back (:func:`records`), every checksum checked."""

from __future__ import annotations

import itertools
import os
import socket
import time
from pathlib import Path
from typing import NamedTuple

import numba
import numpy as np

FLUSH_EVERY_S = 5.0
EVENT_FILE_PREFIX = "events.out.tfevents."  # then the second, host, pid and counter, as SummaryWriter names them
FILE_VERSION = "brain.Event:2"
_WRITER = "tensorboard.summary.writer.event_file_writer"  # what SummaryWriter's files name as their writer


def _crc32c_table() -> np.ndarray:
    """The byte table of CRC-32C (Castagnoli, reflected polynomial 0x82F63B78)."""
    table = np.empty(256, dtype=np.int64)
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table[byte] = crc
    return table


_TABLE = _crc32c_table()


@numba.njit(cache=True, nogil=True)
def _masked_crc(data, table):
    """The TFRecord format's masked CRC-32C of ``data``."""
    crc = 0xFFFFFFFF
    for j in range(data.shape[0]):
        crc = table[(crc ^ data[j]) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


@numba.njit(cache=True, nogil=True)
def _put_masked_crc(out, at, data, table):
    """``out[at:at + 4]``: the masked CRC-32C of ``data``, little-endian."""
    crc = _masked_crc(data, table)
    for m in range(4):
        out[at + m] = (crc >> (8 * m)) & 0xFF


@numba.njit(cache=True, nogil=True)
def _le(buf, at, size):
    """The little-endian unsigned integer of ``buf[at:at + size]``."""
    value = 0
    for m in range(size):
        value |= np.int64(buf[at + m]) << (8 * m)
    return value


@numba.njit(cache=True, nogil=True)
def _framed(data, table):
    """The TFRecord of ``data`` (uint8), in one compiled pass: uint64 length, its masked CRC, the data, the data's
    masked CRC (all little-endian)."""
    n = data.shape[0]
    out = np.empty(n + 16, dtype=np.uint8)
    out[12 : 12 + n] = data
    for m in range(8):
        out[m] = (n >> (8 * m)) & 0xFF
    _put_masked_crc(out, 8, out[:8], table)
    _put_masked_crc(out, 12 + n, out[12 : 12 + n], table)
    return out


@numba.njit(cache=True, nogil=True)
def _walk(buf, table, starts, lengths):
    """Record by record, each one's data (start, length) into ``starts``/``lengths`` while its checksums match;
    returns (records, whether a checksum stopped the walk, the byte where it stopped)."""
    pos, n, end = 0, 0, buf.shape[0]
    while pos + 12 <= end:
        if _masked_crc(buf[pos : pos + 8], table) != _le(buf, pos + 8, 4):
            return n, True, pos
        length = _le(buf, pos, 8)
        if length < 0 or length > end - pos - 16:  # cut short (< 0: a length of 2⁶³ or more, never written)
            break
        data = buf[pos + 12 : pos + 12 + length]
        if _masked_crc(data, table) != _le(buf, pos + 12 + length, 4):
            return n, True, pos
        starts[n], lengths[n] = pos + 12, length
        n += 1
        pos += length + 16
    return n, False, pos


class Records(NamedTuple):
    """The whole records of an event file, in order: record k is ``buf[starts[k]:starts[k] + lengths[k]]``. They
    stop at byte ``at``: ``bad_checksum``, at a record whose length or data does not match its checksum (damaged, or
    not an event file); else at the file's end or in a last record cut short (a writer still writing it, or a run
    killed while it wrote)."""

    starts: np.ndarray
    lengths: np.ndarray
    bad_checksum: bool
    at: int


def records(buf: bytes) -> Records:
    """The TFRecord framing of ``buf`` read back in one compiled pass, both checksums of every record checked
    (what TensorBoard's reader checks, at compiled speed)."""
    data = np.frombuffer(buf, dtype=np.uint8)
    most = len(buf) // 16 + 1  # (a record takes 16 bytes and its data)
    starts, lengths = np.empty(most, dtype=np.int64), np.empty(most, dtype=np.int64)
    n, bad_checksum, at = _walk(data, _TABLE, starts, lengths)
    return Records(starts[:n], lengths[:n], bool(bad_checksum), int(at))


def tfrecord(data: bytes) -> bytes:
    """The TFRecord framing of one record (what TensorBoard's ``RecordWriter`` writes for ``data``)."""
    return _framed(np.frombuffer(data, dtype=np.uint8), _TABLE).tobytes()


def _file_counter():
    """The process-wide counter that ends an event file's name: TensorBoard's own (shared with every
    SummaryWriter of the process, so files of one second sort as theirs do), else one of ours."""
    try:
        from tensorboard.summary.writer.event_file_writer import _global_uid

        return _global_uid.get
    except ImportError:  # a TensorBoard without it: names stay unique within this process
        return itertools.count().__next__


class EventFile:
    """A new event file in ``run_dir``; ``purge_step`` (a resumed run): TensorBoard hides this directory's
    older events at steps >= it, as with ``SummaryWriter(purge_step=...)``."""

    def __init__(self, run_dir: Path, purge_step: int | None = None):
        from tensorboard.compat.proto import event_pb2, summary_pb2

        self._event, self._summary = event_pb2.Event, summary_pb2.Summary
        name = f"{EVENT_FILE_PREFIX}{int(time.time()):010d}.{socket.gethostname()}.{os.getpid()}.{_file_counter()()}"
        self.path = run_dir / name
        self._file = open(self.path, "wb")  # noqa: SIM115 - closed in close()
        source = event_pb2.SourceMetadata(writer=_WRITER)
        self._write(event_pb2.Event(wall_time=time.time(), file_version=FILE_VERSION, source_metadata=source))
        if purge_step is not None:
            self._write(event_pb2.Event(wall_time=time.time(), step=purge_step, file_version=FILE_VERSION))
            start = event_pb2.SessionLog(status=event_pb2.SessionLog.START)
            self._write(event_pb2.Event(wall_time=time.time(), step=purge_step, session_log=start))
        self.flush()

    def scalars(self, values: dict[str, float], step: int) -> None:
        """One event at ``step`` with a float32 ``simple_value`` per tag: what one ``add_scalar`` per tag writes,
        to every reader."""
        value = self._summary.Value
        summary = self._summary(value=[value(tag=tag, simple_value=float(v)) for tag, v in values.items()])
        self._write(self._event(wall_time=time.time(), step=int(step), summary=summary))
        if time.monotonic() - self._flushed >= FLUSH_EVERY_S:
            self.flush()

    def _write(self, event) -> None:
        self._file.write(tfrecord(event.SerializeToString()))

    def flush(self) -> None:
        self._file.flush()
        self._flushed = time.monotonic()

    def close(self) -> None:
        self._file.close()
