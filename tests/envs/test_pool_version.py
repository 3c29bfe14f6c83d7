"""An EnvPool older than the ``envpool`` extra's floor is refused in one line: EnvPool 0.8 under NumPy 2 steps
without an error but returns wrong arrays. Pure version logic: runs without EnvPool installed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from per_cli.envs.pool import MIN_ENVPOOL, check_envpool_version
from per_cli.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("version", ["0.8.4", "0.9.0", "1.1.1"])
def test_an_envpool_older_than_the_floor_is_refused_naming_the_fix(version):
    with pytest.raises(ConfigError) as caught:
        check_envpool_version(version)
    message = str(caught.value)
    assert f"EnvPool {version} is installed and per needs 1.2 or newer" in message
    assert "pip install -U 'envpool>=1.2'" in message and "\n" not in message


@pytest.mark.parametrize("version", ["1.2.0", "1.2.5", "1.10.0", "2.0.0+cu121"])
def test_an_envpool_at_or_past_the_floor_is_accepted(version):
    check_envpool_version(version)


def test_the_floor_is_the_envpool_extras():
    """(Read as text: tomllib is not in Python 3.10.)"""
    floor = re.search(r'^envpool = \["envpool>=(\d+)\.(\d+)"\]$', (REPO / "pyproject.toml").read_text(), re.M)
    assert floor is not None and tuple(map(int, floor.groups())) == MIN_ENVPOOL
