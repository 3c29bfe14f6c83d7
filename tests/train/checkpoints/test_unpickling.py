"""Checkpoints written before train/ was split into sub-packages name the old module paths; they still load."""

from __future__ import annotations

import io
import pickle
from collections import deque

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


def test_a_loop_state_pickled_as_the_dataclass_it_was_loads_into_counters():
    """Checkpoint format 2 pickled LoopState when it was a dataclass: its counters plain attributes. They load
    into the state's row of counters (where the loop's phases move them now)."""
    old = LoopState.__new__(LoopState)
    old.__setstate__({"step": 1234, "episode": 7, "episode_return": 21.5, "episode_length": 30,
                      "recent_returns": deque([1.0, 2.0]), "recent_successes": deque(), "target_syncs": 3})  # fmt: skip
    assert (old.step, old.episode, old.episode_return, old.episode_length, old.target_syncs) == (1234, 7, 21.5, 30, 3)
    assert old._counters.step[old._row] == 1234 and list(old.recent_returns) == [1.0, 2.0]
    again = pickle.loads(pickle.dumps(old))  # (and as it pickles now: with its row)
    assert again.state_dict() == old.state_dict()
