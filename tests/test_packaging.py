"""A wheel carries the shipped configs, and an install from it runs the design card's commands from any
directory (issue 13). The wheel is built from a copy of the sources, so the checkout gets no build/ folder."""

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from per_cli.config.shipped import shipped_configs, shipped_root

from .conftest import REPO

pytestmark = pytest.mark.slow  # a wheel build and three fresh interpreters: about 20 s


@pytest.fixture(scope="module")
def wheel_install(tmp_path_factory) -> tuple[Path, Path]:
    """(the wheel, a folder with the wheel installed into it, to put first on PYTHONPATH)."""
    src = tmp_path_factory.mktemp("src")
    shutil.copy(REPO / "pyproject.toml", src)
    shutil.copy(REPO / "README.md", src)
    ignore = shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc", "*.pyc")
    shutil.copytree(REPO / "per_cli", src / "per_cli", ignore=ignore)
    nested = src / "per_cli" / "configs" / "zz_nested_test" / "deeper.yaml"  # subfolders ship too
    nested.parent.mkdir()
    nested.write_text("# A nested config (packaging test).\nseed: 4\n")
    out = tmp_path_factory.mktemp("wheel")
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", str(src), "-w", str(out)]
    subprocess.run(cmd, check=True, capture_output=True)
    (wheel,) = out.glob("per_cli-*.whl")
    site = tmp_path_factory.mktemp("site")
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-compile", "-q", "--target", str(site), str(wheel)]
    subprocess.run(cmd, check=True, capture_output=True)
    return wheel, site


def test_the_wheel_carries_every_shipped_config(wheel_install):
    wheel, _ = wheel_install
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {f"per_cli/configs/{p.relative_to(shipped_root()).as_posix()}" for p in shipped_configs().values()}
    assert shipped and shipped <= names, sorted(shipped - names)
    assert "per_cli/configs/zz_nested_test/deeper.yaml" in names


def _per(site: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run(
        [sys.executable, "-m", "per_cli", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )


def test_the_design_card_commands_work_from_a_wheel_outside_the_repository(wheel_install, tmp_path):
    _, site = wheel_install
    listed = _per(site, tmp_path, "configs")
    assert listed.returncode == 0, listed.stderr
    assert f"configs in {site / 'per_cli' / 'configs'}" in listed.stdout  # the installed copy, not the checkout
    assert "pong_per " in listed.stdout and "zz_nested_test/deeper" in listed.stdout

    tiny = ["train.total_steps=120", "train.learning_starts=60", "train.eval_every=1000", "train.eval_episodes=0",
            "replay.capacity=200", "replay.batch_size=8", "env.max_episode_steps=100", "device=cpu"]  # fmt: skip
    sets = [a for kv in tiny for a in ("--set", kv)]
    trained = _per(site, tmp_path, "train", "--config", "pong_per.yaml", *sets, "--name", "pong", "--quiet")
    assert trained.returncode == 0, trained.stderr[-2000:]
    assert "status: completed" not in trained.stderr
    assert (tmp_path / "runs" / "pong" / "summary.json").is_file()
    assert "id: pong" in (tmp_path / "runs" / "pong" / "config.yaml").read_text()

    dry = _per(site, tmp_path, "grid", "--envs", "cartpole", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "cartpole__prioritized__s1" in dry.stdout or "cartpole" in dry.stdout
    assert not (tmp_path / "runs" / "grid").exists() and sorted(p.name for p in (tmp_path / "runs").iterdir()) == [
        "pong"
    ]
