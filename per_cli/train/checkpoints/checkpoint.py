"""Checkpoint files: a run's state on disk, so that ``per train --resume RUN_DIR`` continues it.

``checkpoints/latest`` names the newest complete ``step_<12 digits>/`` folder, written under ``.tmp-*`` and renamed
first, so a crash leaves ``latest`` at a complete checkpoint; its contents are plain data, read weights-only.
Layout and rules: docs/architecture.md."""

from __future__ import annotations

import csv
import errno
import io
import os
import re
import shutil
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from per_cli.errors import ConfigError
from per_cli.rundir.logger import atomic_write_text
from per_cli.train.checkpoints.safe_read import (
    FORMAT_VERSION,
    CheckpointRefused,
    inside,
    load_plain,
    older_format,
    save_plain,
)

CHECKPOINT_DIR = "checkpoints"
TMP_PREFIX = ".tmp-"  # a checkpoint being written (renamed when complete)
STEP_NAME = re.compile(r"step_\d{12}")  # a checkpoint folder's name: the only names ``latest`` may hold
_TREE_FILE = "tree.pt"  # the replay tree's small values
_NPY_NAME = re.compile(r"a\d+\.npy")  # a replay array's file
# a checkpoint write that failed with less than this free on its disk failed because the disk is full
_FULL_BELOW_BYTES = 1 << 20
_LARGE_ARRAY_BYTES = 1 << 20  # replay arrays above this go to their own .npy (written and read without copies)


class Loaded(NamedTuple):
    """A checkpoint read from disk: the trainer's state and the folder it came from (for its replay memory)."""

    state: dict
    path: Path


def _save_tree(tree: Any, folder: Path) -> None:
    """Write a tree of dicts into ``folder``: each large array to its own ``.npy``, the rest in ``tree.pt``
    (the tree with None where such an array was, and each ``.npy``'s key path)."""
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

    save_plain({"tree": strip(tree, ()), "npy": arrays}, folder / _TREE_FILE)


def _load_tree(folder: Path) -> Any:
    saved = load_plain(inside(folder, _TREE_FILE))
    tree = saved["tree"]
    for name, keys in saved["npy"].items():
        if not isinstance(name, str) or not _NPY_NAME.fullmatch(name):
            raise ConfigError(f"--resume: {folder / _TREE_FILE} names {name!r}, not a replay array file")
        try:
            node = tree
            for key in keys[:-1]:
                node = node[key]
            # memory-mapped: copied straight into the memory
            node[keys[-1]] = np.load(inside(folder, name), mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError, LookupError, TypeError) as exc:
            raise ConfigError(f"--resume: cannot read {folder / name} into the replay tree: {exc}") from None
    return tree


def remove_leftovers(run_dir: Path) -> list[Path]:
    """Remove what a run killed or stopped by a full disk left half-written: checkpoint folders
    ``checkpoints/.tmp-*`` and the atomic writes' ``.NAME.*.tmp`` files (summary.json, latest, metrics.csv).
    Called when a run (re)starts in ``run_dir``; returns what was removed. None of these is ever read."""
    removed = []
    for folder in (run_dir, run_dir / CHECKPOINT_DIR):
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


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The folder ``checkpoints/latest`` names, if it holds a ``trainer.pt``; None when there is none.
    CheckpointRefused when ``latest`` holds anything but a step folder's name, or that folder or its file is a
    symlink leading out of ``checkpoints/``: a run directory's paths resolve inside it."""
    root = run_dir / CHECKPOINT_DIR
    try:
        name = (root / "latest").read_text().strip()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--resume: cannot read {root / 'latest'}: {exc}") from None
    if not STEP_NAME.fullmatch(name):
        raise CheckpointRefused(
            f"--resume: {root / 'latest'} names {name!r}, not a checkpoint folder (step_ and 12 digits) of "
            f"{root}; it was not followed"
        )
    path = inside(inside(run_dir, CHECKPOINT_DIR), name)
    return path if inside(path, "trainer.pt").is_file() else None


def save_checkpoint(run_dir: Path, step: int, state: dict, replay_state: dict | None) -> Path:
    """Write a complete checkpoint, point ``latest`` at it, then delete the older ones. ``state`` gets the
    format version added."""
    root = run_dir / CHECKPOINT_DIR
    root.mkdir(parents=True, exist_ok=True)
    name = f"step_{step:012d}"
    tmp = root / f"{TMP_PREFIX}{name}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        save_plain({**state, "format": FORMAT_VERSION}, tmp / "trainer.pt")
        if replay_state is not None:
            _save_tree(replay_state, tmp / "replay")
        for path in tmp.rglob("*"):
            if path.is_file():
                with open(path, "rb") as f:
                    os.fsync(f.fileno())
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


def load_checkpoint(run_dir: Path, map_location: Any = "cpu") -> Loaded:
    """The state saved in ``run_dir``'s latest checkpoint, and that checkpoint's folder. Nothing in the files
    runs: CheckpointRefused for one this version will not load (older format, crafted, leading outside
    ``run_dir``), ConfigError when there is none or it is damaged."""
    path = latest_checkpoint(run_dir)
    if path is None:
        raise ConfigError(
            f"--resume: {run_dir} has no checkpoint (runs write one every train.checkpoint_every steps; "
            "that key was 0 for this run)"
        )
    state = load_plain(inside(path, "trainer.pt"), map_location)
    found = state.get("format") if isinstance(state, dict) else None
    if type(found) is int and found < FORMAT_VERSION:  # (no reader for an older layout: refused, never converted)
        raise older_format(path, found)
    if found != FORMAT_VERSION:
        raise ConfigError(f"--resume: {path} has checkpoint format {found}; this version reads format {FORMAT_VERSION}")
    return Loaded(state, path)


def refusal_of(run_dir: Path) -> CheckpointRefused | None:
    """Why a resume of ``run_dir`` would refuse its latest checkpoint (its paths, the globals its files name),
    found without running or building anything from it; None when nothing is refused (it may
    still be damaged, or not fit the config: the resume says so). A grid asks this before it resumes a run."""
    try:
        _, path = load_checkpoint(run_dir)
        load_replay(path)
    except CheckpointRefused as exc:
        return exc
    except Exception:  # noqa: BLE001 - damaged, or not a checkpoint's layout: not a refusal (the resume says so)
        return None
    return None


def load_replay(path: Path) -> dict | None:
    """The replay memory's state saved in checkpoint folder ``path``, or None if it was not saved."""
    folder = inside(path, "replay")
    return _load_tree(folder) if folder.is_dir() else None


def truncate_metrics(run_dir: Path, step: int) -> None:
    """Drop ``metrics.csv`` rows logged after the checkpoint (a crashed run wrote them; they come again)."""
    path = run_dir / "metrics.csv"
    if not path.exists():
        return
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows or "step" not in rows[0]:
        return
    header, *body = rows
    col = header.index("step")
    kept = [r for r in body if r and int(float(r[col])) <= step]
    if len(kept) == len(body):
        return
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(header)
    writer.writerows(kept)
    atomic_write_text(path, out.getvalue())
