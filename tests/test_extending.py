"""docs/extending.md's example, end to end: a user's sampler in one file (examples/samplers/stratified.py),
named in ``plugins``, runs solo, in a cohort (each member its solo run), under ``per grid`` and on Ray, with real
processes; a plugin that cannot be imported is one line and exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from per_cli.replay import REPLAY_KINDS, register_sampler
from per_cli.replay.samplers import UniformSampler

from .conftest import CONFIGS, REPO
from .train.checkpoints.test_checkpoint import _rows

PLUGIN = str(REPO / "examples" / "samplers" / "stratified.py")
TINY = [
    "train.total_steps=400", "train.learning_starts=100", "train.train_freq=4", "train.eval_episodes=1",
    "replay.capacity=1000", "replay.batch_size=32", "agent.hidden_sizes=[32]", "log.tensorboard=false",
    f"plugins=[{PLUGIN}]", "replay.kind=stratified",
]  # fmt: skip


def _per(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "per_cli", *args], capture_output=True, text=True, timeout=timeout)


def _sets(items) -> list[str]:
    return [arg for kv in items for arg in ("--set", kv)]


def _summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def test_a_users_sampler_runs_solo_and_in_a_cohort_each_member_its_solo_run(tmp_path):
    config = str(CONFIGS / "cartpole_uniform.yaml")
    solo = _per("train", "--config", config, "--seed", "2", "--runs-dir", str(tmp_path / "solo"), *_sets(TINY))
    assert solo.returncode == 0, solo.stderr
    cohort = _per("train", "--config", config, "--seeds", "1-3", "--runs-dir", str(tmp_path / "cohort"), *_sets(TINY))
    assert cohort.returncode == 0, cohort.stderr
    (solo_dir,) = (tmp_path / "solo").iterdir()
    member = next(d for d in (tmp_path / "cohort").iterdir() if "__s2__" in d.name)
    assert _summary(solo_dir)["status"] == _summary(member)["status"] == "completed"
    assert _summary(member)["replay"] == "stratified"
    assert _rows(member) == _rows(solo_dir)  # the cohort's member is its solo run, episode by episode


@pytest.mark.parametrize("backend", ["local", "ray"])
def test_a_users_sampler_runs_under_per_grid(backend, tmp_path):
    if backend == "ray":
        pytest.importorskip("ray")
    config = str(CONFIGS / "cartpole_uniform.yaml")  # (the base config each kind runs from)
    args = ["grid", "--config", config, "--runs-dir", str(tmp_path / "runs"), "--envs", "cartpole"]
    kinds = ("stratified", "uniform") if backend == "local" else ("stratified",)  # (Ray: one task, its start is slow)
    args += ["--replays", ",".join(kinds), "--seeds", "1-2", "--backend", backend, "--workers", "2"]
    done = _per(*args, *_sets([s for s in TINY if not s.startswith("replay.kind")]))
    assert done.returncode == 0, done.stderr
    (grid,) = (tmp_path / "runs").iterdir()
    for kind in kinds:
        for seed in (1, 2):
            summary = _summary(grid / f"cartpole__{kind}__s{seed}")
            assert (summary["status"], summary["replay"]) == ("completed", kind)


@pytest.mark.parametrize(
    ("plugin", "says"),
    [
        ("no/such/file.py", "plugins: no/such/file.py: no such file"),
        ("no_such_module_xyz", "plugins: no_such_module_xyz failed to import: ModuleNotFoundError"),
    ],
)
def test_a_plugin_that_cannot_be_imported_is_one_line_and_exit_2(plugin, says, tmp_path):
    config = str(CONFIGS / "cartpole_uniform.yaml")
    done = _per("train", "--config", config, "--runs-dir", str(tmp_path), "--set", f"plugins=[{plugin}]")
    assert done.returncode == 2
    assert says in done.stderr and "Traceback" not in done.stderr
    assert not any(tmp_path.iterdir())  # nothing written


def test_registering_a_kind_checks_the_class_and_the_name():
    register_sampler("uniform", UniformSampler)  # the same class again: a no-op (a plugin imported twice)
    with pytest.raises(ValueError, match="already registered"):
        register_sampler("uniform", type("Other", (UniformSampler,), {}))
    with pytest.raises(TypeError, match="not a Sampler subclass"):
        register_sampler("mine", np.ndarray)
    with pytest.raises(ValueError, match="letters, digits and underscores"):
        register_sampler("my kind", UniformSampler)
    assert "mine" not in REPLAY_KINDS and "my kind" not in REPLAY_KINDS
