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

pytestmark = pytest.mark.slow  # a wheel build and four fresh interpreters: about 20 s on an idle machine


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
    """From a directory with no configs/ and the wheel's per_cli first on the path: the shipped configs are
    found in the installed package (a short Pong run by that name: tests/test_cli.py, in-process)."""
    _, site = wheel_install
    listed = _per(site, tmp_path, "configs")
    assert listed.returncode == 0, listed.stderr
    assert f"configs in {site / 'per_cli' / 'configs'}" in listed.stdout  # the installed copy, not the checkout
    assert "pong_per " in listed.stdout and "zz_nested_test/deeper" in listed.stdout

    shown = _per(site, tmp_path, "configs", "pong_per.yaml")
    assert shown.returncode == 0, shown.stderr
    assert f"# resolved from {site / 'per_cli' / 'configs' / 'pong_per.yaml'}" in shown.stdout
    assert "id: pong" in shown.stdout and "kind: prioritized" in shown.stdout
    assert _per(site, tmp_path, "configs", "zz_nested_test/deeper").returncode == 0

    dry = _per(site, tmp_path, "grid", "--envs", "cartpole", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "cartpole" in dry.stdout and "prioritized" in dry.stdout
    assert sorted(tmp_path.iterdir()) == []  # a dry run writes nothing
