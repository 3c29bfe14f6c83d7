"""Checkpoint files: where a run's state goes on disk so that ``per train --resume RUN_DIR`` continues it.

This module only reads and writes files. What goes into a checkpoint is each component's ``state_dict()``
(``Trainer.state_dict`` gathers them: agent, loop counters, evaluator, RNGs, envs, metrics windows), plain
data apart from the envs' pickled snapshots; what a resume may change is checked in
:mod:`per_cli.train.checkpoints.resume`.

Layout inside the run directory::

    checkpoints/
      latest                  the name of the newest complete checkpoint (written last, atomically)
      step_000000500000/
        trainer.pt            torch.save of Trainer.state_dict()
        replay/               only with train.save_replay: one .npy per large array + tree.pkl

A checkpoint is written into ``.tmp-...``, renamed, and only then named in ``latest``; older ones are
deleted afterwards. A crash at any moment leaves ``latest`` pointing at a complete checkpoint.

With the replay memory saved, a resumed run on the CPU repeats the uninterrupted run exactly (same
``metrics.csv`` apart from wall-clock columns, same TensorBoard scalars apart from ``charts/SPS``).
Without it the resumed run refills the memory for ``train.learning_starts`` steps before it learns again.
Raising ``train.total_steps`` on resume continues past the old end, but the ε and β schedules are
defined over ``total_steps`` and so change from that point on.
"""

from __future__ import annotations

import csv
import errno
import io
import os
import pickle
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from per_cli.errors import ConfigError
from per_cli.train.checkpoints.unpickling import MovedModulesPickle, unpickle
from per_cli.train.rundir.logger import atomic_write_text

CHECKPOINT_DIR = "checkpoints"
TMP_PREFIX = ".tmp-"  # a checkpoint being written (renamed when complete)
# 2: the state is grouped by component (Trainer.state_dict); 3: plain data only (the metrics windows and the
# replay tree no longer pickle per_cli classes; env snapshots stay pickled bytes). Format 2 is still read.
FORMAT_VERSION = 3
READ_FORMATS = (2, 3)
_TREE_FILE = "tree.pkl"  # the replay tree's small values (format 3; format 2 wrote replay.pkl)
# a checkpoint write that failed with less than this free on its disk failed because the disk is full
_FULL_BELOW_BYTES = 1 << 20
_LARGE_ARRAY_BYTES = 1 << 20  # replay arrays above this go to their own .npy (written and read without copies)


# ----------------------------------------------------------------------------------------------------------
# large array trees (the replay memory)


def _save_tree(tree: Any, folder: Path) -> None:
    """Write a tree of dicts into ``folder``: each large array to its own ``.npy``, the rest pickled in
    ``tree.pkl`` as plain data (the tree with None where such an array was, and each ``.npy``'s key path)."""
    folder.mkdir(parents=True)
    arrays: dict[str, list] = {}  # a .npy file's name: the keys leading to its array

    def strip(node: Any, keys: tuple) -> Any:
        if isinstance(node, dict):
            return {k: strip(v, (*keys, k)) for k, v in node.items()}
        if isinstance(node, np.ndarray) and node.nbytes >= _LARGE_ARRAY_BYTES:
            name = f"a{len(arrays)}.npy"
            np.save(folder / name, node, allow_pickle=False)
            arrays[name] = list(keys)
            return None
        return node

    skeleton = strip(tree, ())
    with open(folder / _TREE_FILE, "wb") as f:
        pickle.dump({"tree": skeleton, "npy": arrays}, f)


def _load_tree(folder: Path) -> Any:
    if not (folder / _TREE_FILE).is_file():
        return _load_format2_tree(folder)
    with open(folder / _TREE_FILE, "rb") as f:
        saved = unpickle(f)
    tree = saved["tree"]
    for name, keys in saved["npy"].items():
        node = tree
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = np.load(folder / name, mmap_mode="r")  # memory-mapped: copied straight into the memory
    return tree


class _NpyRef:
    """Where a format-2 tree (``replay.pkl``) had a large array: the name of its ``.npy``. Read only."""

    def __init__(self, name: str):
        self.name = name


def _load_format2_tree(folder: Path) -> Any:
    """A tree written by format 2: pickled with an :class:`_NpyRef` in place of each large array."""
    with open(folder / "replay.pkl", "rb") as f:
        skeleton = unpickle(f)

    def fill(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: fill(v) for k, v in node.items()}
        if isinstance(node, _NpyRef):
            return np.load(folder / node.name, mmap_mode="r")
        return node

    return fill(skeleton)


# ----------------------------------------------------------------------------------------------------------
# the checkpoint directory


def remove_leftovers(run_dir: Path) -> list[Path]:
    """Remove what a run killed or stopped by a full disk left half-written: checkpoint folders
    ``checkpoints/.tmp-*`` and the atomic writes' ``.NAME.*.tmp`` files (summary.json, latest, metrics.csv).
    Called when a run (re)starts in ``run_dir``; returns what was removed. None of these is ever read."""
    removed = []
    for folder in (run_dir, checkpoints_dir(run_dir)):
        if not folder.is_dir():
            continue
        for path in folder.iterdir():
            if path.is_dir() and path.name.startswith(TMP_PREFIX) and folder.name == CHECKPOINT_DIR:
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
            elif path.is_file() and path.name.startswith(".") and path.name.endswith(".tmp"):
                path.unlink(missing_ok=True)
                removed.append(path)
    return removed


def checkpoints_dir(run_dir: Path) -> Path:
    return run_dir / CHECKPOINT_DIR


def latest_checkpoint(run_dir: Path) -> Path | None:
    pointer = checkpoints_dir(run_dir) / "latest"
    try:
        name = pointer.read_text().strip()
    except FileNotFoundError:
        return None
    path = checkpoints_dir(run_dir) / name
    return path if (path / "trainer.pt").is_file() else None


def _fsync_tree(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            with open(path, "rb") as f:
                os.fsync(f.fileno())


def save_checkpoint(run_dir: Path, step: int, state: dict, replay_state: dict | None) -> Path:
    """Write a complete checkpoint, point ``latest`` at it, then delete the older ones. ``state`` gets the
    format version added."""
    root = checkpoints_dir(run_dir)
    root.mkdir(parents=True, exist_ok=True)
    name = f"step_{step:012d}"
    tmp = root / f"{TMP_PREFIX}{name}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        torch.save({**state, "format": FORMAT_VERSION}, tmp / "trainer.pt")
        if replay_state is not None:
            _save_tree(replay_state, tmp / "replay")
        _fsync_tree(tmp)
    except BaseException as exc:  # a full disk, an interrupt: the half-written checkpoint must not stay behind
        full = isinstance(exc, Exception) and shutil.disk_usage(root).free < _FULL_BELOW_BYTES
        shutil.rmtree(tmp, ignore_errors=True)
        if full and not isinstance(exc, OSError):  # torch.save's writer reports a full disk as a RuntimeError
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp)) from exc
        raise
    final = root / name
    if final.exists():  # the same step saved again (the end of a run that also checkpointed there)
        shutil.rmtree(final)
    os.replace(tmp, final)
    atomic_write_text(root / "latest", name + "\n")
    for old in root.iterdir():
        if old.is_dir() and old.name != name:
            shutil.rmtree(old, ignore_errors=True)
    return final


def load_checkpoint(run_dir: Path, map_location: Any) -> tuple[dict, Path]:
    """The state saved in ``run_dir``'s latest checkpoint, and that checkpoint's folder. ConfigError when
    there is none, it cannot be read, or it has another format."""
    path = latest_checkpoint(run_dir)
    if path is None:
        raise ConfigError(
            f"--resume: {run_dir} has no checkpoint (runs write one every train.checkpoint_every steps; "
            "that key was 0 for this run)"
        )
    try:
        state = torch.load(
            path / "trainer.pt", map_location=map_location, weights_only=False, pickle_module=MovedModulesPickle
        )
    except Exception as exc:  # noqa: BLE001 - a damaged file is bad input, not a crash
        raise ConfigError(f"--resume: cannot read {path / 'trainer.pt'}: {type(exc).__name__}: {exc}") from None
    if state.get("format") not in READ_FORMATS:
        formats = " or ".join(map(str, READ_FORMATS))
        raise ConfigError(f"--resume: {path} has checkpoint format {state.get('format')}, expected {formats}")
    return state, path


def load_replay(path: Path) -> dict | None:
    """The replay memory's state saved in checkpoint folder ``path``, or None if it was not saved."""
    folder = path / "replay"
    return _load_tree(folder) if folder.is_dir() else None


def truncate_metrics(run_dir: Path, step: int) -> None:
    """Drop ``metrics.csv`` rows logged after the checkpoint (a crashed run wrote them; they come again)."""
    path = run_dir / "metrics.csv"
    if not path.exists():
        return
    with open(path, newline="") as f:
        reader = csv.reader(f)
        rows = list(reader)
    if not rows:
        return
    header, body = rows[0], rows[1:]
    col = header.index("step") if "step" in header else None
    if col is None:
        return
    kept = [r for r in body if r and int(float(r[col])) <= step]
    if len(kept) == len(body):
        return
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(header)
    writer.writerows(kept)
    atomic_write_text(path, out.getvalue())
