"""Reading pickles that name modules which have moved since they were written.

A pickle names each class by its module's path, so one written before ``per_cli/train`` was split into
sub-packages (loop, measures, rundir, checkpoints) names the old paths. Checkpoints of format 2 pickled the
metrics windows (``UpdateWindow``, ``RunningMeans``) and the replay tree's ``_NpyRef``; format 3 holds plain data
and pickles only the envs' snapshots (an env with its wrappers, some of them per_cli's). These readers map old
paths to where the modules are now; writing is plain pickle.
"""

from __future__ import annotations

import io
import pickle
from typing import Any

_MOVED_MODULES = {
    f"per_cli.train.{name}": f"per_cli.train.{package}.{name}"
    for package, names in {
        "loop": ("trainer", "lockstep", "cohort", "loop_state", "periodic", "setup", "stopping",
                 "evaluation", "reporting", "trainer_state"),
        "measures": ("metrics", "iid", "update_window", "update_measures", "reference"),
        "rundir": ("logger", "events", "progress"),
        "checkpoints": ("checkpoint", "env_state", "resume"),
    }.items()
    for name in names
}  # fmt: skip

# classes that moved to another module: the metrics window left per_cli.train.metrics for update_window
_MOVED_CLASSES = {
    ("per_cli.train.metrics", "UpdateWindow"): ("per_cli.train.measures.update_window", "UpdateWindow"),
}


class _Unpickler(pickle.Unpickler):
    """pickle's Unpickler, reading a moved module's classes from where they are now."""

    def find_class(self, module: str, name: str) -> Any:
        module, name = _MOVED_CLASSES.get((module, name), (module, name))
        return super().find_class(_MOVED_MODULES.get(module, module), name)


class MovedModulesPickle:
    """The ``pickle_module`` torch.load is given: its Unpickler subclasses ours (torch's wrapper calls ours)."""

    Unpickler = _Unpickler

    @staticmethod
    def load(file, **kwargs) -> Any:
        return _Unpickler(file, **kwargs).load()


def unpickle(file) -> Any:
    """``pickle.load`` that also reads checkpoints written before a module moved."""
    return _Unpickler(file).load()


def unpickle_bytes(blob: bytes) -> Any:
    """``pickle.loads`` likewise (the blobs inside a checkpoint: env snapshots, metrics windows)."""
    return unpickle(io.BytesIO(blob))
