"""Checkpoints hold plain data (dicts, lists, numbers, strings, numpy arrays, torch tensors), no per_cli object,
apart from the envs' pickled snapshots; checkpoints of format 2, whose metrics windows and replay tree pickled
per_cli classes, still resume exactly."""

from __future__ import annotations

import pickle
from collections import deque

import numpy as np
import pytest
import torch

from per_cli.config import load_config
from per_cli.errors import ConfigError
from per_cli.train.checkpoints import checkpoint
from per_cli.train.checkpoints.checkpoint import latest_checkpoint, load_checkpoint
from per_cli.train.loop.cohort import Cohort, cohort_configs
from per_cli.train.loop.loop_state import LoopState
from per_cli.train.loop.trainer import Trainer
from per_cli.train.measures.metrics import RunningMeans
from per_cli.train.measures.update_window import UpdateWindow

from ...conftest import CONFIGS, TINY_CARTPOLE
from .test_checkpoint import CHECKPOINTED, _crash_at, _params, _rows, _scalars

PLAIN = (dict, list, tuple, str, int, float, bool, type(None), np.ndarray, np.generic, torch.Tensor)
ENV_SNAPSHOTS = {("env",), ("evaluator", "env")}  # pickled envs (snapshot_env): the env library's objects
# a capacity whose replay arrays are large enough for their own .npy files (the tree's other values in tree.pkl)
LARGE_REPLAY = "replay.capacity=100000"


def impure(node, keys: tuple = ()) -> list[str]:
    """Where ``node`` holds anything but plain data: an object of a class defined in per_cli, a type outside
    PLAIN, an object array; bytes only where an env snapshot goes."""
    where = "/".join(map(str, keys)) or "(root)"
    kind = type(node)
    if kind.__module__.split(".")[0] == "per_cli":
        return [f"{where}: {kind.__module__}.{kind.__qualname__}"]
    if isinstance(node, bytes) and keys in ENV_SNAPSHOTS:
        return []
    if not isinstance(node, PLAIN):
        return [f"{where}: {kind.__module__}.{kind.__qualname__}"]
    if isinstance(node, np.ndarray) and node.dtype.hasobject:
        return [f"{where}: an object array"]
    if isinstance(node, dict):
        return [found for key, value in node.items() for found in impure(value, (*keys, key))]
    if isinstance(node, (list, tuple)):
        return [found for k, value in enumerate(node) for found in impure(value, (*keys, k))]
    return []


def _saved(run_dir) -> tuple[dict, dict]:
    """The latest checkpoint's trainer state and its replay tree's pickled part, as stored."""
    path = latest_checkpoint(run_dir)
    state = torch.load(path / "trainer.pt", weights_only=False)
    with open(path / "replay" / "tree.pkl", "rb") as f:
        return state, pickle.load(f)


def test_the_check_finds_what_is_not_plain_data():
    assert impure({"a": [1, 2.0, "x", None, (True,)], "b": np.zeros(3), "c": torch.zeros(2), "d": np.int64(1)}) == []
    assert impure({"env": b"...", "evaluator": {"env": None}}) == []
    assert impure({"loop": LoopState()}) == ["loop: per_cli.train.loop.loop_state.LoopState"]
    assert impure({"metrics": pickle.dumps(RunningMeans())}) == ["metrics: builtins.bytes"]  # format 2's metrics
    assert impure({"m": {"w": [np.array([None])]}}) == ["m/w/0: an object array"]
    assert impure({"q": deque([1.0])}) == ["q: collections.deque"]


def test_a_new_checkpoint_holds_only_plain_data(tmp_path):
    """A run's checkpoint and a cohort member's (their windows hold each update's measured row): plain data
    throughout, the large replay arrays in .npy files."""
    solo = load_config(CONFIGS / "cartpole_per.yaml", [*CHECKPOINTED, LARGE_REPLAY, "train.total_steps=300"],
                       device="cpu")  # fmt: skip
    Trainer(solo).run(tmp_path / "solo")
    cfgs = cohort_configs(load_config(CONFIGS / "cartpole_uniform.yaml", [*CHECKPOINTED, "train.total_steps=300"],
                                      device="cpu"), [1, 2])  # fmt: skip
    Cohort(cfgs).run([tmp_path / f"member{c.seed}" for c in cfgs])
    for run_dir in (tmp_path / "solo", tmp_path / "member1", tmp_path / "member2"):
        state, tree = _saved(run_dir)
        assert state["format"] == checkpoint.FORMAT_VERSION == 3
        assert impure(state) == [] and impure(tree) == []
        window = state["metrics"]["window"]
        assert window["rows"] and type(window["rng"]) is dict  # it held updates at the checkpoint
        assert all(row is not None for row in window["rows"]) and "td" not in window  # measured, no raw arrays
        assert isinstance(state["env"], bytes) and isinstance(state["evaluator"]["env"], bytes)
    _, tree = _saved(tmp_path / "solo")
    folder = latest_checkpoint(tmp_path / "solo") / "replay"
    assert len(tree["npy"]) >= 2 and sorted(p.name for p in folder.glob("*.npy")) == sorted(tree["npy"])


def _as_format_2(path) -> None:
    """Rewrite checkpoint folder ``path`` as format 2 wrote it: the metrics windows pickled in ``metrics`` (as the
    old ``Checkpointed.state_dict`` did: ``pickle.dumps((window, log_means, episode_means))``) and the replay tree
    pickled in ``replay.pkl`` with an ``_NpyRef`` in place of each large array."""
    state = torch.load(path / "trainer.pt", weights_only=False)
    metrics = state["metrics"]
    objects = (UpdateWindow.from_state_dict(metrics["window"]), RunningMeans.from_state_dict(metrics["log_means"]),
               RunningMeans.from_state_dict(metrics["episode_means"]))  # fmt: skip
    torch.save({**state, "metrics": pickle.dumps(objects), "format": 2}, path / "trainer.pt")
    folder = path / "replay"
    with open(folder / "tree.pkl", "rb") as f:
        saved = pickle.load(f)
    tree = saved["tree"]
    for name, keys in saved["npy"].items():
        node = tree
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = checkpoint._NpyRef(name)
    with open(folder / "replay.pkl", "wb") as f:
        pickle.dump(tree, f)
    (folder / "tree.pkl").unlink()


def test_a_format_2_checkpoint_still_resumes_exactly(tmp_path, monkeypatch):
    cfg = load_config(CONFIGS / "cartpole_uniform.yaml", [*CHECKPOINTED, LARGE_REPLAY, "replay.kind=prioritized"],
                      device="cpu")  # fmt: skip
    whole = Trainer(cfg)
    whole_summary = whole.run(tmp_path / "whole")

    _crash_at(monkeypatch, 380)
    with pytest.raises(Exception, match="simulated crash"):
        Trainer(cfg).run(tmp_path / "split")
    monkeypatch.undo()
    run_dir = tmp_path / "split"
    path = latest_checkpoint(run_dir)
    _as_format_2(path)
    old, _ = load_checkpoint(run_dir, "cpu")
    assert old["format"] == 2 and isinstance(old["metrics"], bytes)
    with open(path / "replay" / "replay.pkl", "rb") as f:
        assert "_NpyRef" in repr(pickle.load(f))  # the old tree's references to its .npy files
    assert impure(old) == ["metrics: builtins.bytes"]

    resumed = Trainer(cfg)
    assert resumed.resume(run_dir) == 300
    assert type(resumed._window) is UpdateWindow and len(resumed._window.state_dict()["rows"]) > 0
    summary = resumed.run(run_dir)
    assert summary["status"] == "completed" and summary["resumed_from_step"] == 300
    for key in ("total_steps", "episodes", "updates", "final_return_mean", "eval_return_mean"):
        assert summary[key] == whole_summary[key], key
    assert _rows(run_dir) == _rows(tmp_path / "whole")
    assert _scalars(run_dir) == _scalars(tmp_path / "whole")
    for a, b in zip(_params(resumed), _params(whole), strict=True):
        np.testing.assert_array_equal(a, b)
    state, tree = _saved(run_dir)  # the run's next checkpoints are written in the new format
    assert state["format"] == 3 and impure(state) == [] and impure(tree) == []


def test_a_checkpoint_of_another_format_is_refused(tmp_path):
    cfg = load_config(CONFIGS / "cartpole_uniform.yaml", [*TINY_CARTPOLE, "train.total_steps=150",
                                                          "train.checkpoint_every=150"], device="cpu")  # fmt: skip
    Trainer(cfg).run(tmp_path / "r")
    path = latest_checkpoint(tmp_path / "r") / "trainer.pt"
    state = torch.load(path, weights_only=False)
    for version in (1, 4, None):
        torch.save({**state, "format": version}, path)
        with pytest.raises(ConfigError, match=f"checkpoint format {version}, expected 2 or 3"):
            load_checkpoint(tmp_path / "r", "cpu")
