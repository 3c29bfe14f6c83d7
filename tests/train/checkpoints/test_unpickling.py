"""Checkpoints written before train/ was split into sub-packages name the old module paths; they still load."""

from __future__ import annotations

import io
import pickle

import pytest

from per_cli.train.checkpoints.unpickling import MovedModulesPickle, unpickle_bytes
from per_cli.train.loop.loop_state import LoopState


def _as_if_written_before_the_move(obj) -> bytes:
    blob = pickle.dumps(obj, protocol=0)  # protocol 0 names classes as text lines: safe to edit
    old = blob.replace(b"per_cli.train.loop.loop_state\n", b"per_cli.train.loop_state\n")
    assert old != blob
    return old


def test_a_class_pickled_under_its_old_module_loads_from_its_new_one():
    state = LoopState()
    state.step, state.episode = 1234, 7
    old = _as_if_written_before_the_move(state)
    with pytest.raises(ModuleNotFoundError):  # plain pickle cannot: the old module is gone
        pickle.loads(old)
    loaded = unpickle_bytes(old)
    assert type(loaded) is LoopState and (loaded.step, loaded.episode) == (1234, 7)


def test_torch_load_reads_an_old_checkpoint_through_the_moved_modules_pickle(tmp_path, monkeypatch):
    import sys
    import types

    import torch

    state = LoopState()
    state.step = 99
    old_module = types.ModuleType("per_cli.train.loop_state")  # where LoopState lived when the file was written
    old_module.LoopState = LoopState
    monkeypatch.setitem(sys.modules, "per_cli.train.loop_state", old_module)
    monkeypatch.setattr(LoopState, "__module__", "per_cli.train.loop_state")
    torch.save({"loop": state}, tmp_path / "trainer.pt")
    monkeypatch.undo()
    with pytest.raises(ModuleNotFoundError):
        torch.load(tmp_path / "trainer.pt", weights_only=False)
    loaded = torch.load(tmp_path / "trainer.pt", weights_only=False, pickle_module=MovedModulesPickle)
    assert type(loaded["loop"]) is LoopState and loaded["loop"].step == 99
    assert MovedModulesPickle.load(io.BytesIO(_as_if_written_before_the_move(state))).step == 99
