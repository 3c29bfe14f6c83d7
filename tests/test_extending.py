"""docs/extending.md's examples, end to end: a user's sampler in one file (examples/samplers/stratified.py),
named in ``plugins``, runs solo, in a cohort (each member its solo run), under ``per grid`` and on Ray, with real
processes; so does a prioritized-like kind with a parameter of its own (examples/samplers/floored.py,
``replay.params``), whose bad parameters are one line and exit 2, as is a plugin that cannot be imported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from per_cli.config import load_config
from per_cli.replay import KINDS, KindSpec, make_replay, register_kind
from per_cli.replay.samplers import UniformSampler

from .conftest import CONFIGS, REPO
from .train.checkpoints.test_checkpoint import _rows

PLUGIN = str(REPO / "examples" / "samplers" / "stratified.py")
TINY = [
    "train.total_steps=400", "train.learning_starts=100", "train.train_freq=4", "train.eval_episodes=1",
    "replay.capacity=1000", "replay.batch_size=32", "agent.hidden_sizes=[32]", "log.tensorboard=false",
    f"plugins=[{PLUGIN}]", "replay.kind=stratified",
]  # fmt: skip


FLOORED = str(REPO / "examples" / "samplers" / "floored.py")
TINY_FLOORED = [*TINY[:-2], f"plugins=[{FLOORED}]", "replay.kind=floored"]


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
    register_kind(KindSpec("uniform", UniformSampler))  # the same class again: a no-op (a plugin imported twice)
    with pytest.raises(ValueError, match="already registered"):
        register_kind(KindSpec("uniform", type("Other", (UniformSampler,), {})))
    with pytest.raises(TypeError, match="not a Sampler subclass"):
        register_kind(KindSpec("mine", np.ndarray))
    with pytest.raises(ValueError, match="letters, digits and underscores"):
        register_kind(KindSpec("my kind", UniformSampler))
    assert "mine" not in KINDS and "my kind" not in KINDS


def test_a_kind_with_a_parameter_of_its_own_is_one_short_file():
    assert len(Path(FLOORED).read_text().splitlines()) <= 80


def test_a_kinds_own_parameter_reaches_its_sampler_and_its_default_fills_the_config():
    from per_cli.replay import resolve_config

    cfg = load_config(None, [f"plugins=[{FLOORED}]", "replay.kind=floored", "replay.params.floor=0.5"])
    memory = make_replay(cfg, (4,), np.float32, seed=0)
    assert (memory.sampler.floor, memory.sampler.alpha) == (0.5, 0.6)
    default = resolve_config(load_config(None, [f"plugins=[{FLOORED}]", "replay.kind=floored"])).replay
    assert (default.params, default.alpha, default.beta0) == ({"floor": 0.1}, 0.6, 0.4)


def test_a_users_kind_with_its_own_parameter_runs_solo_and_in_a_cohort(tmp_path):
    config = str(CONFIGS / "cartpole_uniform.yaml")
    sets = _sets([*TINY_FLOORED, "replay.params.floor=0.5"])
    solo = _per("train", "--config", config, "--seed", "2", "--runs-dir", str(tmp_path / "solo"), *sets)
    assert solo.returncode == 0, solo.stderr
    cohort = _per("train", "--config", config, "--seeds", "1-2", "--runs-dir", str(tmp_path / "cohort"), *sets)
    assert cohort.returncode == 0, cohort.stderr
    (solo_dir,) = (tmp_path / "solo").iterdir()
    member = next(d for d in (tmp_path / "cohort").iterdir() if "__s2__" in d.name)
    assert _summary(member)["replay"] == "floored" and _summary(solo_dir)["status"] == "completed"
    assert yaml.safe_load((member / "config.yaml").read_text())["replay"]["params"] == {"floor": 0.5}
    assert _rows(member) == _rows(solo_dir)  # the cohort's member is its solo run, episode by episode


def test_a_users_kind_with_its_own_parameter_runs_under_per_grid_with_the_parameter_swept(tmp_path):
    config = str(CONFIGS / "cartpole_uniform.yaml")
    args = ["grid", "--config", config, "--runs-dir", str(tmp_path / "runs"), "--envs", "cartpole"]
    args += ["--replays", "floored", "--seeds", "1", "--workers", "2", "--sweep", "replay.params.floor=0.01,1.0"]
    done = _per(*args, *_sets([s for s in TINY_FLOORED if not s.startswith("replay.kind")]))
    assert done.returncode == 0, done.stderr
    (grid,) = (tmp_path / "runs").iterdir()
    runs = sorted(d for d in grid.iterdir() if (d / "summary.json").is_file())
    floors = sorted(yaml.safe_load((d / "config.yaml").read_text())["replay"]["params"]["floor"] for d in runs)
    assert floors == [0.01, 1.0]
    assert all(_summary(d)["status"] == "completed" for d in runs)


@pytest.mark.parametrize(
    ("sets", "says"),
    [
        (["replay.params.flor=0.5"], "replay.params.flor: not a parameter of replay.kind floored; did you mean "
                                     "replay.params.floor? its keys: floor"),  # fmt: skip
        (["replay.params.floor=-1"], "replay.params.floor: -1.0 is out of range; must be >= 0.0"),
        (["replay.params.floor=high"], "replay.params.floor: expected a number, got 'high'"),
        (["replay.kind=uniform", "replay.params.floor=0.5"],
         "replay.params.floor: not a parameter of replay.kind uniform; it has no parameters of its own"),
    ],
)
def test_a_bad_kind_parameter_is_one_line_and_exit_2(sets, says, tmp_path):
    config = str(CONFIGS / "cartpole_uniform.yaml")
    done = _per("train", "--config", config, "--runs-dir", str(tmp_path), *_sets([*TINY_FLOORED, *sets]))
    assert done.returncode == 2, done.stderr
    assert says in done.stderr and "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())  # nothing written
