"""A run's TensorBoard event file, written in the calling thread: what torch's ``SummaryWriter`` writes (name, version
event, purge marker, ``simple_value`` scalars), without its thread, with a compiled CRC32C and buffered writes."""

from __future__ import annotations

import itertools
import os
import socket
import struct
import time
from pathlib import Path

import numba
import numpy as np

FLUSH_EVERY_S = 5.0
EVENT_FILE_PREFIX = "events.out.tfevents."  # then the second, host, pid and counter, as SummaryWriter names them
_FILE_VERSION = "brain.Event:2"
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
def _crc32c(data, table):
    crc = 0xFFFFFFFF
    for j in range(data.shape[0]):
        crc = table[(crc ^ data[j]) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


@numba.njit(cache=True, nogil=True)
def _put_masked_crc(out, at, data, table):
    """``out[at:at + 4]``: the TFRecord format's masked CRC-32C of ``data``, little-endian."""
    crc = _crc32c(data, table)
    crc = (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF
    for m in range(4):
        out[at + m] = (crc >> (8 * m)) & 0xFF


@numba.njit(cache=True, nogil=True)
def _frame(out, n, table):
    """Make ``out`` (n + 16 bytes, the record's data at 12 .. 12 + n) a TFRecord: uint64 length, its masked
    CRC, the data, the data's masked CRC (all little-endian)."""
    for m in range(8):
        out[m] = (n >> (8 * m)) & 0xFF
    _put_masked_crc(out, 8, out[:8], table)
    _put_masked_crc(out, 12 + n, out[12 : 12 + n], table)


@numba.njit(cache=True, nogil=True)
def _framed(data, table):
    """The TFRecord of ``data`` (uint8), in one compiled pass."""
    n = data.shape[0]
    out = np.empty(n + 16, dtype=np.uint8)
    out[12 : 12 + n] = data
    _frame(out, n, table)
    return out


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


def _varint(n: int) -> bytes:
    """Protobuf's base-128 varint of ``n`` (0 <= n < 2⁶⁴)."""
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


class ScalarEvents:
    """The serialized ``Event(wall_time, step, summary=Summary(value=[Value(tag, simple_value), ...]))``, byte for byte
    as protobuf writes it, and its TFRecord, from a cached template per tag sequence whose 4-byte float holes one
    compiled call fills before it frames the record (:func:`_scalar_record`). What protobuf would refuse, it
    refuses: a step outside int64 (ValueError), a tag that is not a str (TypeError) or not UTF-8."""

    def __init__(self) -> None:
        self._templates: dict[tuple, tuple[np.ndarray, np.ndarray, bytes]] = {}

    def record(self, values: dict[str, float], step: int, wall_time: float) -> bytes:
        """The event's TFRecord (see the class)."""
        if not -(2**63) <= step < 2**63:
            raise ValueError(f"Value out of range: {step} (an event's step is an int64)")
        tags = tuple(values)
        template = self._templates.get(tags)
        if template is None:
            template = self._templates[tags] = _template(tags)
        floats = np.fromiter(map(float, values.values()), dtype=np.float64, count=len(tags))
        summary, holes, length = template
        wall = struct.pack("<d", wall_time)
        head = b"" if wall == bytes(8) else b"\x09" + wall
        if step:
            head += b"\x10" + _varint(step % 2**64)
        head = np.frombuffer(head + length, dtype=np.uint8)
        return _scalar_record(head, summary, holes, floats, _TABLE).tobytes()


def _template(tags: tuple) -> tuple[np.ndarray, np.ndarray, bytes]:
    """(the Summary's bytes with zeros for the float32 values, where each value's 4 bytes start, the field
    header of the Summary: its tag and length)."""
    parts, holes, at = [], [], 0
    for tag in tags:
        if type(tag) is not str:
            raise TypeError(f"a tag must be a str, not {type(tag).__name__}")
        name = tag.encode("utf-8")
        value = (b"\x0a" + _varint(len(name)) + name if name else b"") + b"\x15"  # + the float32's 4 bytes
        part = b"\x0a" + _varint(len(value) + 4) + value
        holes.append(at + len(part))
        parts.append(part + bytes(4))
        at += len(parts[-1])
    summary = b"".join(parts)
    return np.frombuffer(summary, dtype=np.uint8).copy(), np.asarray(holes, dtype=np.int64), b"\x2a" + _varint(at)


@numba.njit(cache=True, nogil=True)
def _scalar_record(head, summary, holes, values, table):
    """The TFRecord of the event ``head`` + ``summary`` with ``values`` as little-endian float32 at ``holes``
    of ``summary`` (LLVM's fptrunc: the C cast, round to nearest, ±inf beyond float32's range, NaN kept, and
    no floating-point warnings)."""
    h, n = head.shape[0], head.shape[0] + summary.shape[0]
    out = np.empty(n + 16, dtype=np.uint8)
    out[12 : 12 + h] = head
    out[12 + h : 12 + n] = summary
    floats = values.astype(np.float32).view(np.uint8)
    for k in range(holes.shape[0]):
        for m in range(4):
            out[12 + h + holes[k] + m] = floats[4 * k + m]
    _frame(out, n, table)
    return out


class EventFile:
    """A new event file in ``run_dir``; ``purge_step`` (a resumed run): TensorBoard hides this directory's
    older events at steps >= it, as with ``SummaryWriter(purge_step=...)``."""

    def __init__(self, run_dir: Path, purge_step: int | None = None):
        from tensorboard.compat.proto import event_pb2

        self._encoder = ScalarEvents()
        name = f"{EVENT_FILE_PREFIX}{int(time.time()):010d}.{socket.gethostname()}.{os.getpid()}.{_file_counter()()}"
        self.path = run_dir / name
        self._file = open(self.path, "wb")  # noqa: SIM115 - closed in close()
        source = event_pb2.SourceMetadata(writer=_WRITER)
        self._write(event_pb2.Event(wall_time=time.time(), file_version=_FILE_VERSION, source_metadata=source))
        if purge_step is not None:
            self._write(event_pb2.Event(wall_time=time.time(), step=purge_step, file_version=_FILE_VERSION))
            start = event_pb2.SessionLog(status=event_pb2.SessionLog.START)
            self._write(event_pb2.Event(wall_time=time.time(), step=purge_step, session_log=start))
        self.flush()

    def scalars(self, values: dict[str, float], step: int) -> None:
        """One event at ``step`` with a float32 ``simple_value`` per tag: what one ``add_scalar`` per tag writes,
        to every reader."""
        self._file.write(self._encoder.record(values, int(step), time.time()))
        if time.monotonic() - self._flushed >= FLUSH_EVERY_S:
            self.flush()

    def _write(self, event) -> None:
        self._file.write(tfrecord(event.SerializeToString()))

    def flush(self) -> None:
        self._file.flush()
        self._flushed = time.monotonic()

    def close(self) -> None:
        self._file.close()
