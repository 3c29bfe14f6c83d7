"""The Atari frame storages' store: every member's rows in ONE compiled call (:func:`store_frames_members`), on the
storages' store state moved into blocks with a seed axis (:func:`~per_cli.replay.storage.ring.member_axis`, the
same blocks the cohort's :class:`~per_cli.replay.gather.FrameGather` reads), as the gather is. A solo storage's
``add`` is this store over a list of one (``FrameStackStorage.add``); docs/atari.md has the frame ring's contract.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numba
import numpy as np

from per_cli.replay.records import counters_dtype
from per_cli.replay.storage.ring import member_axis, record_fields
from per_cli.replay.storage.rows import Events, Rows, Stored, no_events

# a frame storage's own counters: frames ever written (the gid of the next one); the last transition left its
# episode open (0 or 1)
FRAME_COUNTERS = counters_dtype("frames_written", "episode_open")
STORED, NOT_SHIFTED, WIDE_ACTION = range(3)  # a row's status after the store


class FrameColumns(NamedTuple):
    """A frame storage's columns (or members' columns over the seed axis), in the order the gather and the store
    take them; ``frames`` as flat rows ``(n_frames, H * W)`` (the store's as words: :func:`words`)."""

    frames: np.ndarray
    frame_gid: np.ndarray
    hist: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    ids: np.ndarray
    episode_ids: np.ndarray
    counters: np.ndarray


@numba.njit(cache=True, nogil=True, inline="always")
def _differ(a, b) -> bool:
    """Whether two 1-D arrays of one length differ anywhere (a branchless reduction: it vectorises)."""
    acc = False
    for f in range(a.shape[0]):
        acc |= a[f] != b[f]
    return acc


@numba.njit(cache=True, nogil=True, inline="always")
def _blank(a) -> bool:
    """Whether a 1-D array is all zeros (a branchless reduction)."""
    acc = False
    for f in range(a.shape[0]):
        acc |= a[f] != 0
    return not acc


@numba.njit(cache=True, nogil=True, inline="always")
def _write_frame(ring, fc, n_frames, source, o_positions, o_members, i, p):
    """The ring's next frame becomes ``source``; its position is reported (entry ``p`` of the ``o_*``)."""
    position = fc.frames_written % n_frames
    ring[position, :] = source
    fc.frames_written += 1
    o_positions[p] = position
    o_members[p] = i
    return p + 1


@numba.njit(cache=True, nogil=True)
def store_frames_members(
    which, obs, actions_in, rewards_in, next_obs, terminated_in, truncated_in, ends_in,
    frames, frame_gid, hist, actions, rewards, terminated, truncated, ids, episode_ids, counters, frame_counters,
    last_next, o_status, o_which, o_slots, o_entering, o_positions, o_members,
):  # fmt: skip
    """For k in range(len(which)): member ``which[k]`` stores row k (frames as flat words, :func:`word`) as its
    storage's ``add`` does. A row whose ``next_obs`` is not ``obs`` shifted by one frame (NOT_SHIFTED) or whose action
    is not a uint8 (WIDE_ACTION) is refused before anything is written. Returns the kind's events, the ring positions
    written and the refused rows. The callers size the ``o_*`` arrays for n (2 stack + 1) events over n rows;
    exceeding that raises RuntimeError rather than writing past them."""
    stack, n_frames = obs.shape[1], frames.shape[1]
    e = p = refused = 0
    for k in range(which.shape[0]):
        i = which[k]
        row, nxt = obs[k], next_obs[k]
        status = STORED
        for s in range(stack - 1):
            if _differ(nxt[s], row[s + 1]):
                status = NOT_SHIFTED
                break
        if status == STORED and not 0 <= actions_in[k] < 256:
            status = WIDE_ACTION
        o_status[k] = status
        if status != STORED:
            refused += 1
            continue
        c, fc, ring, gids, hists, last = counters[i], frame_counters[i], frames[i], frame_gid[i], hist[i], last_next[i]
        capacity = c.capacity
        continues = fc.episode_open != 0
        if continues:
            for s in range(stack):
                if _differ(row[s], last[s]):
                    continues = False
                    break
        if continues:
            h = min(np.int64(hists[(c.cursor - 1) % capacity]) + 1, stack - 1)
        else:  # an episode starts: its first stack, leaving out the leading zero (padding) frames
            pad = 0
            while pad < stack - 1 and _blank(row[pad]):
                pad += 1
            for s in range(pad, stack):
                p = _write_frame(ring, fc, n_frames, row[s], o_positions, o_members, i, p)
            h = stack - 1 - pad
        slot = c.cursor
        gids[slot] = fc.frames_written - 1
        hists[slot] = h
        p = _write_frame(ring, fc, n_frames, nxt[stack - 1], o_positions, o_members, i, p)
        record_fields(k, i, slot, actions_in, rewards_in, terminated_in, truncated_in, ends_in, actions, rewards,
                      terminated, truncated, ids, episode_ids, c)  # fmt: skip
        fc.episode_open = not (terminated_in[k] or truncated_in[k])
        last[:, :] = nxt
        # first_sampleable_id past the live transitions whose oldest frame was overwritten
        entering = e
        o_which[e], o_slots[e] = i, slot
        e += 1
        oldest_kept = fc.frames_written - n_frames
        first = start = max(c.first_sampleable_id, c.added - c.size)
        while first < c.added:
            old = first % capacity
            if gids[old] - np.int64(hists[old]) >= oldest_kept:
                break
            first += 1
        c.first_sampleable_id = first
        if e + first - start > o_slots.shape[0]:  # (never, by the bound below; an error, not a write past it)
            raise RuntimeError("store_frames_members: more events than its bound (a frame storage's state broken)")
        for dropped in range(start, first):
            o_which[e], o_slots[e], o_entering[e] = i, dropped % capacity, False
            e += 1
        o_entering[entering] = ids[i][slot] >= first
    return e, p, refused


def frame_blocks(storages: Sequence[Any]) -> FrameColumns:
    """The frame storages' columns as blocks with a seed axis (:func:`~per_cli.replay.storage.ring.member_axis`), as
    the gather and the store take them: the frame rings moved lazily, only the frames written so far copied."""
    written = [min(s.frames_written, s.n_frames) for s in storages]  # (the rest of each ring: zeros)
    return FrameColumns(*(member_axis(storages, name, written if name == "frames" else None)
                          for name in FrameColumns._fields))  # fmt: skip


def word(dtype: np.dtype, frame_shape: tuple[int, ...]) -> np.dtype:
    """The words a frame of ``frame_shape`` ``dtype`` values is seen as: for an integer or bool dtype unsigned
    integers of the widest size that divides its bytes (equal words are equal values, a zero word zero values, so
    the store compares, tests and copies frames a word at a time), else the dtype itself."""
    if dtype.kind not in "uib":
        return dtype
    width = int(np.prod(frame_shape)) * dtype.itemsize
    return np.dtype(f"u{next(size for size in (8, 4, 2, 1) if width % size == 0)}")


def words(array: np.ndarray, rows: tuple[int, ...], as_word: np.dtype) -> np.ndarray:
    """``array`` (C-contiguous) as ``rows`` of frames of words ``as_word`` (:func:`word`)."""
    return array.reshape(*rows, -1).view(as_word)


class FrameStore:
    """``FrameStore(storages)(rows) -> Stored``: the frame storages' rows stored in ONE :func:`store_frames_members`
    call on their state as seed-axis blocks. Row k is member ``rows.which[k]``'s; a refused row (``Stored.errors[k]``,
    the ValueError its ``add`` raises) writes nothing. The new frames reach each device mirror in one copy per call."""

    def __init__(self, storages: Sequence[Any]):
        ((self.stack, self.frame_shape, self.dtype, n_frames, self.obs_shape),) = {
            (s.stack, s.frame_shape, s.obs_dtype, s.n_frames, s.obs_shape) for s in storages
        }  # (one config: one shape)
        n = len(storages)
        blocks = frame_blocks(storages)
        self.word = word(self.dtype, self.frame_shape)
        self.columns = blocks._replace(frames=words(blocks.frames, (n, n_frames), self.word))
        self.frame_counters = member_axis(storages, "frame_counters")
        self.last_next = words(member_axis(storages, "_last_next"), (n, self.stack), self.word)
        self.storages = list(storages)
        if n > 1:
            for storage in self.storages:
                storage.adopted()  # (its own store viewed the arrays that moved)

    def __call__(self, rows: Rows) -> Stored:
        n, stack = rows.which.shape[0], self.stack
        obs, next_obs = np.asarray(rows.obs), np.asarray(rows.next_obs)
        if obs.shape[1:] != self.obs_shape or next_obs.shape[1:] != self.obs_shape:
            error = ValueError(
                f"expected observations of shape {self.obs_shape}, got {obs.shape[1:]} and {next_obs.shape[1:]}"
            )
            return Stored(no_events(), dict.fromkeys(range(n), error))
        if n == 0:
            return Stored(no_events())
        obs = words(np.ascontiguousarray(obs, dtype=self.dtype), (n, stack), self.word)
        next_obs = words(np.ascontiguousarray(next_obs, dtype=self.dtype), (n, stack), self.word)
        status = np.empty(n, dtype=np.int8)
        bound = n * (2 * stack + 1)  # (store_frames_members' bound on its events; more than the frames written)
        which, slots, positions, members = np.empty((4, bound), dtype=np.int64)
        entering = np.empty(bound, dtype=np.bool_)
        events, written, refused = store_frames_members(
            rows.which, obs, rows.actions, rows.rewards, next_obs, rows.terminated, rows.truncated, rows.ends,
            *self.columns, self.frame_counters, self.last_next, status, which, slots, entering, positions, members,
        )  # fmt: skip
        self._mirror(positions[:written], members[:written])
        stored = Stored(Events(which[:events], slots[:events], entering[:events]))
        return stored._replace(errors=_errors(rows, status)) if refused else stored

    def _mirror(self, positions: np.ndarray, members: np.ndarray) -> None:
        """The frames written at ``positions`` (of ``members``) copied to the storages that mirror their ring."""
        for i, storage in enumerate(self.storages):
            if storage.mirror is not None:
                mine = positions[members == i]
                if mine.size:
                    storage.mirror.write_many(mine, storage.frames)


def _errors(rows: Rows, status: np.ndarray) -> dict[int, Exception]:
    """The ValueError each refused row's ``add`` raises (``status``: :func:`store_frames_members`')."""
    return {
        k: ValueError("FrameStackStorage needs next_obs to be obs shifted by one frame (a frame stack)")
        if status[k] == NOT_SHIFTED
        else ValueError(f"FrameStackStorage keeps actions as uint8 (Atari has <= 18), got {rows.actions[k]}")
        for k in status.nonzero()[0].tolist()
    }
