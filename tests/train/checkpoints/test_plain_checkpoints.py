"""Checkpoints hold plain data (dicts, lists, numbers, strings, numpy arrays, torch tensors), no per_cli object
and no pickled bytes, the envs' snapshots included; every file reads with ``torch.load(weights_only=True)`` and
no safe globals added. Checkpoints of formats 2 and 3, which held pickled objects, are refused in one line naming
their format."""

from __future__ import annotations

import pickle
import subprocess
import sys
import zipfile
from collections import deque

import numpy as np
import pytest
import torch

from per_cli.config import load_config
from per_cli.errors import ConfigError
from per_cli.train.checkpoints import checkpoint
from per_cli.train.checkpoints.checkpoint import latest_checkpoint, load_checkpoint
from per_cli.train.checkpoints.safe_read import CheckpointRefused, load_plain, save_plain
from per_cli.train.loop.cohort import Cohort, cohort_configs
from per_cli.train.loop.loop_state import LoopState
from per_cli.train.loop.trainer import build_member, run_member
from per_cli.train.measures.metrics import RunningMeans

from ...conftest import CONFIGS, TINY_CARTPOLE
from .test_checkpoint import CHECKPOINTED

PLAIN = (dict, list, tuple, str, int, float, bool, type(None), np.ndarray, np.generic, torch.Tensor)
# a capacity whose replay arrays are large enough for their own .npy files (the tree's other values in tree.pt)
LARGE_REPLAY = "replay.capacity=100000"


def impure(node, keys: tuple = ()) -> list[str]:
    """Where ``node`` holds anything but plain data: an object of a class defined in per_cli, a type outside
    PLAIN, an object array."""
    where = "/".join(map(str, keys)) or "(root)"
    kind = type(node)
    if kind.__module__.split(".")[0] == "per_cli":
        return [f"{where}: {kind.__module__}.{kind.__qualname__}"]
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
    """The latest checkpoint's trainer state and its replay tree's small part, as a resume reads them."""
    path = latest_checkpoint(run_dir)
    return load_plain(path / "trainer.pt"), load_plain(path / "replay" / "tree.pt")


def test_the_check_finds_what_is_not_plain_data():
    assert impure({"a": [1, 2.0, "x", None, (True,)], "b": np.zeros(3), "c": torch.zeros(2), "d": np.int64(1)}) == []
    assert impure({"env": b"...", "evaluator": {"env": None}}) == ["env: builtins.bytes"]  # (format 4's snapshots)
    assert impure({"loop": LoopState()}) == ["loop: per_cli.train.loop.loop_state.LoopState"]
    assert impure({"metrics": pickle.dumps(RunningMeans())}) == ["metrics: builtins.bytes"]  # (format 2's metrics)
    assert impure({"m": {"w": [np.array([None])]}}) == ["m/w/0: an object array"]
    assert impure({"q": deque([1.0])}) == ["q: collections.deque"]


def test_a_new_checkpoint_holds_only_plain_data(tmp_path):
    """A run's checkpoint and a cohort member's (their windows hold each update's measured row): plain data
    throughout, the large replay arrays in .npy files."""
    solo = load_config(CONFIGS / "cartpole_per.yaml", [*CHECKPOINTED, LARGE_REPLAY, "train.total_steps=300"],
                       device="cpu")  # fmt: skip
    run_member(build_member(solo), tmp_path / "solo")
    cfgs = cohort_configs(load_config(CONFIGS / "cartpole_uniform.yaml", [*CHECKPOINTED, "train.total_steps=300"],
                                      device="cpu"), [1, 2])  # fmt: skip
    Cohort(cfgs).run([tmp_path / f"member{c.seed}" for c in cfgs])
    for run_dir in (tmp_path / "solo", tmp_path / "member1", tmp_path / "member2"):
        path = latest_checkpoint(run_dir)
        for file in (path / "trainer.pt", path / "replay" / "tree.pt"):  # no safe globals added: torch's own reader
            assert isinstance(torch.load(file, weights_only=True), dict)
        state, tree = _saved(run_dir)
        assert state["format"] == checkpoint.FORMAT_VERSION == 5
        assert impure(state) == [] and impure(tree) == []
        window = state["metrics"]["window"]
        assert window["rows"] and type(window["rng"]) is dict  # it held updates at the checkpoint
        assert all(row is not None for row in window["rows"]) and "td" not in window  # measured, no raw arrays
        assert type(state["env"]) is dict and type(state["evaluator"]["env"]) is dict  # (the envs' attribute values)
    _, tree = _saved(tmp_path / "solo")
    folder = latest_checkpoint(tmp_path / "solo") / "replay"
    assert len(tree["npy"]) >= 2 and sorted(p.name for p in folder.glob("*.npy")) == sorted(tree["npy"])


def _as_format_3(path) -> None:
    """Rewrite checkpoint folder ``path`` as format 3 wrote it: numpy values pickled as numpy pickles them (a
    weights-only load refuses those globals), the replay tree pickled in ``tree.pkl``."""
    state = load_plain(path / "trainer.pt")
    torch.save({**state, "format": 3}, path / "trainer.pt")  # (torch.save pickles the numpy arrays as they are)
    with open(path / "replay" / "tree.pkl", "wb") as f:
        pickle.dump(load_plain(path / "replay" / "tree.pt"), f)
    (path / "replay" / "tree.pt").unlink()


@pytest.mark.parametrize("version", [2, 3])
def test_a_checkpoint_of_an_older_format_is_refused_naming_it(tmp_path, version):
    cfg = load_config(CONFIGS / "cartpole_uniform.yaml", [*TINY_CARTPOLE, "train.total_steps=150",
                                                          "train.checkpoint_every=150", "train.save_replay=true"],
                      device="cpu")  # fmt: skip
    run_member(build_member(cfg), tmp_path / "r")
    path = latest_checkpoint(tmp_path / "r")
    _as_format_3(path)
    if version == 2:  # (format 2 also pickled the metrics windows as bytes)
        state = torch.load(path / "trainer.pt", weights_only=False)
        torch.save({**state, "metrics": pickle.dumps(RunningMeans()), "format": 2}, path / "trainer.pt")
    reads = f"this version reads format {checkpoint.FORMAT_VERSION}"
    with pytest.raises(CheckpointRefused, match=rf"written by per format {version} \(per before commit \w+\); {reads}"):
        load_checkpoint(tmp_path / "r", "cpu")


def test_a_checkpoint_of_another_format_is_refused(tmp_path):
    cfg = load_config(CONFIGS / "cartpole_uniform.yaml", [*TINY_CARTPOLE, "train.total_steps=150",
                                                          "train.checkpoint_every=150"], device="cpu")  # fmt: skip
    run_member(build_member(cfg), tmp_path / "r")
    path = latest_checkpoint(tmp_path / "r") / "trainer.pt"
    state = load_plain(path)
    current = checkpoint.FORMAT_VERSION
    for version in (current + 1, None):
        save_plain({**state, "format": version}, path)
        with pytest.raises(ConfigError, match=f"checkpoint format {version}; this version reads format {current}"):
            load_checkpoint(tmp_path / "r", "cpu")


def test_numpy_values_come_back_as_they_were(tmp_path):
    tree = {"a": np.arange(6, dtype=np.uint64).reshape(2, 3)[:, ::2], "b": [np.float32(1.5), (np.bool_(True),)],
            "c": {3: np.zeros((0, 2), np.int16)}, "d": torch.ones(2), "e": b"bytes", "f": 2**70}  # fmt: skip
    save_plain(tree, tmp_path / "t.pt")
    with zipfile.ZipFile(tmp_path / "t.pt") as archive:  # (no numpy global in the file: a weights-only load reads it)
        assert not any(b"numpy" in archive.read(n) for n in archive.namelist() if n.endswith(".pkl"))
    back = load_plain(tmp_path / "t.pt")
    np.testing.assert_array_equal(back["a"], tree["a"])
    assert back["a"].dtype == np.uint64 and type(back["b"][0]) is np.float32 and type(back["b"][1][0]) is np.bool_
    assert back["c"][3].shape == (0, 2) and back["c"][3].dtype == np.int16
    assert torch.equal(back["d"], tree["d"]) and back["e"] == b"bytes" and back["f"] == 2**70


def test_a_checkpoint_of_format_4_is_refused_in_one_line_naming_the_fix(tmp_path):
    """A run checkpointed by per before format 5, in that format's replay shape (no episode ids, the writer's state
    under ``hindsight``): ``per train --resume`` refuses it at load, exit 2, in one line naming the format, the
    commit that replaced it and the fix; nothing of it is read into a run (there is no reader for older shapes)."""
    cfg = load_config(CONFIGS / "cartpole_uniform.yaml", [*TINY_CARTPOLE, "train.total_steps=150",
                                                          "train.checkpoint_every=150", "train.save_replay=true"],
                      device="cpu")  # fmt: skip
    run_member(build_member(cfg), tmp_path / "r")
    path = latest_checkpoint(tmp_path / "r")
    save_plain({**load_plain(path / "trainer.pt"), "format": 4}, path / "trainer.pt")
    saved = load_plain(path / "replay" / "tree.pt")
    tree = saved["tree"]
    for key in ("episode_ids", "episodes_ended"):
        del tree["storage"][key]
    tree["hindsight"] = tree.pop("writer")
    save_plain(saved, path / "replay" / "tree.pt")
    command = ["train", "--resume", str(tmp_path / "r"), "--set", "train.total_steps=300", "--quiet"]
    result = subprocess.run([sys.executable, "-m", "per_cli", *command], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "written by per format 4 (per before commit 875fb49)" in line and "without --resume" in line
    assert isinstance(checkpoint.refusal_of(tmp_path / "r"), CheckpointRefused)  # (a grid sets it aside)
