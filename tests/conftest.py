"""Shared fixtures: paths to the repo's configs and small, fast run configurations."""

from __future__ import annotations

import signal
import subprocess
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CONFIGS = REPO / "configs"


def ctrl_c_as_in_a_terminal() -> None:
    """A child's ``preexec_fn``: SIGINT at its default, so that Python in the child turns Ctrl-C into
    KeyboardInterrupt as in a terminal, even where the test runner itself was started with SIGINT ignored (a
    background job of a non-interactive shell), which children inherit."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


# A CartPole run of a few hundred steps that exercises learning, evaluation and logging.
TINY_CARTPOLE = [
    "train.total_steps=400",
    "train.learning_starts=100",
    "train.eval_every=200",
    "train.eval_episodes=2",
    "train.train_freq=4",
    "train.gradient_steps=1",
    "replay.capacity=1000",
    "replay.batch_size=32",
    "agent.hidden_sizes=[32]",
    "log.every=10",
]


@pytest.fixture
def configs_dir() -> Path:
    return CONFIGS


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MB tmpfs: a real file system that fills up (needs root and mount; skipped where they are missing)."""
    yield from _tmpfs(tmp_path, "1m")


@pytest.fixture
def tiny_disk(tmp_path):
    """A 64 KB tmpfs (see small_disk)."""
    yield from _tmpfs(tmp_path, "64k")


def _tmpfs(tmp_path, size):
    mount = tmp_path / f"disk-{uuid.uuid4().hex[:6]}"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "--lazy", str(mount)], check=True)  # (lazy: a file a failed test left open)


