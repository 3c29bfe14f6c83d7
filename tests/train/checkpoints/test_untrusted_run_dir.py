"""A run directory is input: loading one never runs code (issue 45). Each test crafts a payload whose unpickling
runs a shell command that creates a marker file, puts it where a resume reads, and checks that the resume refuses
in one line (exit 2) and the marker never appears. On the code before checkpoint format 4 each payload ran."""

from __future__ import annotations

import os
import pickle
import shlex
import subprocess
import sys

import pytest
import torch
import yaml
from typer.testing import CliRunner

from per_cli.cli import app
from per_cli.config import load_config
from per_cli.train.checkpoints.checkpoint import latest_checkpoint, load_checkpoint
from per_cli.train.checkpoints.env_state import restore_env, snapshot_env
from per_cli.train.checkpoints.safe_read import FORMAT_VERSION, CheckpointRefused, load_plain, save_plain
from per_cli.train.loop.trainer import build_member, run_member

from ...conftest import CONFIGS, TINY_CARTPOLE

CHECKPOINTED = [*TINY_CARTPOLE, "train.total_steps=200", "train.checkpoint_every=100", "train.save_replay=true",
                "log.tensorboard=false"]  # fmt: skip


class RunsAShellCommand:
    """Unpickled, it runs ``touch marker`` (what a crafted file in a shared run directory would do)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {shlex.quote(str(self.marker))}",))


@pytest.fixture
def run_dir(tmp_path):
    cfg = load_config(CONFIGS / "cartpole_uniform.yaml", CHECKPOINTED, device="cpu")
    run_member(build_member(cfg), tmp_path / "run")
    return tmp_path / "run"


def _resume(run_dir):
    return CliRunner().invoke(app, ["train", "--resume", str(run_dir), "--set", "train.total_steps=400", "--quiet"])


def _refused(result, *words: str) -> None:
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    for word in words:
        assert word in result.output


def test_the_payload_runs_when_unpickled_as_the_old_reader_did(tmp_path):
    """(The payload is real: plain pickle runs it.)"""
    marker = tmp_path / "pwned"
    pickle.loads(pickle.dumps(RunsAShellCommand(marker)))
    assert marker.exists()


@pytest.mark.parametrize("as_zip", [True, False])
def test_a_crafted_trainer_pt_is_refused_and_never_runs(run_dir, tmp_path, as_zip):
    marker = tmp_path / "pwned"
    path = latest_checkpoint(run_dir) / "trainer.pt"
    if as_zip:  # torch.save's own format, a dict of the current format with the payload inside
        torch.save({"format": FORMAT_VERSION, "loop": RunsAShellCommand(marker)}, path)
    else:  # a bare pickle
        path.write_bytes(pickle.dumps(RunsAShellCommand(marker)))
    result = _resume(run_dir)
    _refused(result, "trainer.pt", "nothing in it ran")
    if as_zip:
        assert "system" in result.output
    assert not marker.exists()


@pytest.mark.parametrize("name", ["tree.pt", "tree.pkl"])
def test_a_crafted_replay_file_is_refused_and_never_runs(run_dir, tmp_path, name):
    """tree.pkl is where format 3 kept the replay tree (plain pickle): it is never read now."""
    marker = tmp_path / "pwned"
    folder = latest_checkpoint(run_dir) / "replay"
    if name == "tree.pt":
        torch.save({"tree": RunsAShellCommand(marker), "npy": {}}, folder / name)
    else:
        (folder / name).write_bytes(pickle.dumps({"tree": RunsAShellCommand(marker), "npy": {}}))
        (folder / "tree.pt").unlink()
    _refused(_resume(run_dir), "tree.pt")
    assert not marker.exists()


@pytest.mark.parametrize("form", ["pickle", "another class"])
def test_a_crafted_env_snapshot_is_refused_and_never_runs(run_dir, tmp_path, form):
    """An env snapshot is data set on the env the run's config makes: a pickle's bytes put in its place (what
    format 4 held there), or a snapshot naming another class, is refused in one line; nothing in it runs."""
    marker = tmp_path / "pwned"
    path = latest_checkpoint(run_dir) / "trainer.pt"
    state = load_plain(path)
    if form == "pickle":
        crafted = pickle.dumps((RunsAShellCommand(marker), {}))
    else:
        crafted = {**state["env"], "object": "os.system"}
    save_plain({**state, "env": crafted}, path)
    _refused(_resume(run_dir), "env snapshot does not fit")
    assert not marker.exists()


def test_an_env_snapshot_continues_exactly_on_a_fresh_env():
    import gymnasium as gym

    env = gym.make("CartPole-v1")
    env.reset(seed=3)
    env.step(0)
    copy = restore_env(gym.make("CartPole-v1"), snapshot_env(env))
    assert [env.step(1)[0].tolist() for _ in range(5)] == [copy.step(1)[0].tolist() for _ in range(5)]


def test_a_snapshot_is_plain_data_even_of_an_env_holding_a_crafted_object():
    """Objects an env holds are walked for their data, never pickled: the snapshot of an env holding an object
    whose unpickling would run a command goes through the weights-only reader, and restoring it runs nothing."""
    import io

    import gymnasium as gym

    from per_cli.train.checkpoints.safe_read import decode, encode

    env = gym.make("CartPole-v1")
    env.reset(seed=0)
    env.unwrapped.extra = RunsAShellCommand(tmp_marker := "never-written")
    buffer = io.BytesIO()
    torch.save(encode(snapshot_env(env)), buffer)
    buffer.seek(0)
    snapshot = decode(torch.load(buffer, weights_only=True))
    twin = gym.make("CartPole-v1")
    twin.reset(seed=0)
    twin.unwrapped.extra = RunsAShellCommand("other")
    restore_env(twin, snapshot)
    assert twin.unwrapped.extra.marker == tmp_marker and not os.path.exists(tmp_marker)


def test_latest_naming_a_folder_outside_the_run_is_refused(run_dir, tmp_path):
    cfg = load_config(CONFIGS / "cartpole_uniform.yaml", CHECKPOINTED, device="cpu")
    run_member(build_member(cfg), tmp_path / "elsewhere" / "other")
    step = latest_checkpoint(run_dir).name
    (run_dir / "checkpoints" / "latest").write_text(f"../../elsewhere/other/checkpoints/{step}\n")
    _refused(_resume(run_dir), "it was not followed")


def test_a_checkpoint_folder_linked_outside_the_run_is_refused(run_dir, tmp_path):
    cfg = load_config(CONFIGS / "cartpole_uniform.yaml", CHECKPOINTED, device="cpu")
    run_member(build_member(cfg), tmp_path / "other")
    folder = latest_checkpoint(run_dir)
    os.rename(folder, tmp_path / "moved")
    folder.symlink_to(latest_checkpoint(tmp_path / "other"))
    with pytest.raises(CheckpointRefused, match="leads outside it"):
        load_checkpoint(run_dir)
    _refused(_resume(run_dir), "leads outside")


def test_a_plugin_edited_into_config_yaml_is_refused_before_it_is_imported(run_dir, tmp_path):
    marker = tmp_path / "pwned"
    plugin = tmp_path / "evil_plugin.py"
    plugin.write_text(f"import pathlib\npathlib.Path({str(marker)!r}).touch()\n")
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    config["plugins"] = [str(plugin)]
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config))
    command = ["train", "--resume", str(run_dir), "--set", "train.total_steps=400", "--quiet"]
    result = subprocess.run([sys.executable, "-m", "per_cli", *command], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "plugins: cannot change it when resuming" in result.stderr
    assert not marker.exists()
