"""Reading a run directory's checkpoint files without running code: a run directory is input."""

from __future__ import annotations

import pickle
import pickletools
import warnings
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from per_cli.errors import ConfigError

FORMAT_VERSION = 5  # the checkpoint format written and read (checkpoint.py's layout)
# each older format: the commit from which per wrote the next one (a refusal names it, with the fix)
_REPLACED_AT = {1: "15c726c", 2: "2e1fc4d", 3: "32aba4e", 4: "875fb49"}
_ARRAY = "__per_ndarray__"  # {_ARRAY: tensor}: a numpy array
_SCALAR = "__per_npscalar__"  # {_SCALAR: 0-d tensor}: a numpy scalar (np.float64(1.0), ...)


class CheckpointRefused(ConfigError):
    """A checkpoint that is not loaded because loading it could run code, or this version cannot read it (an
    older format). Unlike a damaged file, a grid never starts such a run again over its files."""


def encode(node: Any) -> Any:
    """``node`` with every numpy array and scalar replaced by a marked tensor (a copy of it, C-contiguous), so
    that a weights-only load reads the tree. TypeError for an array of objects or strings (not plain data)."""
    if isinstance(node, dict):
        return {key: encode(value) for key, value in node.items()}
    if isinstance(node, list | tuple):  # (a tuple of any kind comes back a plain tuple)
        items = [encode(value) for value in node]
        return items if isinstance(node, list) else tuple(items)
    if isinstance(node, (np.ndarray, np.generic)):
        array = np.asarray(node)
        if array.dtype.hasobject or array.dtype.kind in "USV":
            raise TypeError(f"a checkpoint holds arrays of numbers only, not of dtype {array.dtype}")
        tensor = torch.from_numpy(np.array(array, order="C", copy=True))  # (ascontiguousarray makes 0-d 1-d)
        return {(_SCALAR if isinstance(node, np.generic) else _ARRAY): tensor}
    return node


def decode(node: Any) -> Any:
    """The inverse of :func:`encode`: marked tensors back into numpy arrays and scalars."""
    if isinstance(node, dict):
        if len(node) == 1 and (_ARRAY in node or _SCALAR in node):
            ((key, tensor),) = node.items()
            array = tensor.numpy()
            return array[()] if key == _SCALAR else array
        return {key: decode(value) for key, value in node.items()}
    if isinstance(node, list | tuple):
        items = [decode(value) for value in node]
        return items if isinstance(node, list) else tuple(items)
    return node


def save_plain(tree: Any, path: Path) -> None:
    """Write ``tree`` for :func:`load_plain`. The file is ours to close: torch's writer, given a path, keeps it
    open when a write fails (a full disk), and the checkpoint's cleanup could not free its space."""
    with open(path, "wb") as f:
        torch.save(encode(tree), f)


def load_plain(path: Path, map_location: Any = "cpu") -> Any:
    """The tree :func:`save_plain` wrote, read with ``weights_only=True``. CheckpointRefused when the file
    names anything a weights-only load refuses (older formats, crafted pickles); ConfigError when it is damaged."""
    try:
        with warnings.catch_warnings():  # (torch warns about a crafted file's protocol before refusing it)
            warnings.simplefilter("ignore")
            tree = torch.load(path, map_location=map_location, weights_only=True)
    except FileNotFoundError:
        raise ConfigError(f"--resume: {path} is missing; the checkpoint is incomplete") from None
    except Exception as exc:  # noqa: BLE001 - a refused global, or a damaged file: bad input either way
        if isinstance(exc, pickle.UnpicklingError):  # (how torch's weights-only reader refuses what it will not run)
            raise refusal(path) from None
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise ConfigError(f"--resume: cannot read {path}: {type(exc).__name__}: {first}") from None
    return decode(tree)


def refusal(path: Path) -> CheckpointRefused:
    """Why ``path``, a file a weights-only load refused, is not loaded, found without running it: the checkpoint
    format it names, else the globals it would have loaded."""
    written = written_format(path)
    if written is not None and written < FORMAT_VERSION:
        return older_format(path.parent, written)
    try:
        names = torch.serialization.get_unsafe_globals_in_checkpoint(path)
    except Exception:  # noqa: BLE001 - not torch's zip format (a bare pickle, ...)
        names = []
    what = f"names {', '.join(names[:4])}, which per never writes into a checkpoint" if names else (
        "is not a checkpoint per wrote (a weights-only load refused it)"
    )
    return CheckpointRefused(
        f"--resume: {path} {what} (the file was not written by per, or was altered); it was not loaded, and "
        "nothing in it ran"
    )


def older_format(folder: Path, written: int) -> CheckpointRefused:
    """The one-line refusal of checkpoint ``folder``, written in format ``written`` (older than FORMAT_VERSION):
    this version has no reader for it."""
    until = _REPLACED_AT.get(written)
    by = f"per before commit {until}" if until else "an older per"
    return CheckpointRefused(
        f"--resume: {folder} was written by per format {written} ({by}); this version reads format {FORMAT_VERSION}; "
        f"start the run again without --resume, or finish it with {by}"
    )


def written_format(path: Path) -> int | None:
    """The ``format`` a per checkpoint file records, read from its pickle's opcodes (nothing is executed); None
    if it records none. Every per format ended its top-level dict with ``"format": N``."""
    try:
        with zipfile.ZipFile(path) as archive:
            name = next(n for n in archive.namelist() if n.endswith("/data.pkl"))
            data = archive.read(name)
        ops = list(pickletools.genops(data))
    except Exception:  # noqa: BLE001 - not a torch zip file, or a broken pickle: no format to name
        return None
    found, memo, last, after_key = None, {}, None, False
    for op, arg, _ in ops:  # ("format" may come from the memo: a config key of that name was pickled before)
        if op.name in ("BINPUT", "LONG_BINPUT", "PUT"):
            memo[arg] = last
            continue
        if op.name == "MEMOIZE":
            memo[len(memo)] = last
            continue
        value = memo.get(arg) if op.name in ("BINGET", "LONG_BINGET", "GET") else arg
        if after_key and op.name.startswith("BININT"):
            found = arg
        last = value
        after_key = isinstance(value, str) and value == "format"
    return found


def inside(root: Path, name: str) -> Path:
    """``root / name``, for a ``name`` read from a run directory: ConfigError unless it is a plain name (no
    separator, not ``..``) whose resolved path (symlinks followed) stays inside ``root``'s resolved path."""
    path = root / name
    if not name or name in (".", "..") or "/" in name or "\\" in name or not path.resolve().is_relative_to(
        root.resolve()
    ):
        raise CheckpointRefused(f"--resume: {root} names {name!r}, which leads outside it; it was not followed")
    return path
