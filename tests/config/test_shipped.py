"""How ``--config`` finds a file: an existing path first, then a shipped config by name (issue 13)."""

from pathlib import Path

import pytest

from per_cli.config import ConfigError, load_config
from per_cli.config.shipped import (
    describe,
    normalize_name,
    resolve_config,
    shipped_configs,
    shipped_root,
)

from ..conftest import CONFIGS


def test_the_repository_configs_folder_is_the_shipped_one():
    # one copy: the top-level configs/ points into the package
    assert CONFIGS.resolve() == shipped_root().resolve()
    assert shipped_root().is_relative_to(Path(__import__("per_cli").__file__).parent)
    names = shipped_configs()
    assert {"cartpole_per", "cartpole_uniform", "pong_per", "acrobot_rank"} <= set(names)
    assert all(path.is_file() for path in names.values())


@pytest.mark.parametrize(
    "text",
    ["pong_per", "pong_per.yaml", "configs/pong_per.yaml", "./configs/pong_per", "configs/pong_per"],
)
def test_a_shipped_name_resolves_with_or_without_suffix_and_prefix(text, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # outside the repository: nothing of that name on disk here
    resolved = resolve_config(text)
    assert resolved.path.resolve() == (shipped_root() / "pong_per.yaml").resolve()
    assert resolved.name == "pong_per" and resolved.note is None


def _tree(root: Path, *names: str) -> Path:
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {name}: a test config.\nseed: 2\n")
    return root


def test_subfolders_exact_and_unique_bare_names(tmp_path, monkeypatch):
    root = _tree(tmp_path / "shipped", "top.yaml", "seed001/cartpole_per.yaml", "seed001/top.yaml", "a/x.yaml")
    monkeypatch.chdir(tmp_path)
    assert resolve_config("seed001/cartpole_per", root=root).path == root / "seed001/cartpole_per.yaml"
    assert resolve_config("configs/seed001/cartpole_per.yaml", root=root).name == "seed001/cartpole_per"
    assert resolve_config("cartpole_per", root=root).path == root / "seed001/cartpole_per.yaml"  # unique below
    assert resolve_config("top", root=root).path == root / "top.yaml"  # the exact name wins over a subfolder's
    assert resolve_config("x.yaml", root=root).name == "a/x"


def test_ambiguous_and_unknown_names_are_one_line_with_the_closest(tmp_path, monkeypatch):
    root = _tree(tmp_path / "shipped", "a/x.yaml", "b/x.yaml", "cartpole_per.yaml", "cartpole_rank.yaml")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"^--config x: ambiguous; shipped configs of that name: a/x, b/x$"):
        resolve_config("x", root=root)
    with pytest.raises(ConfigError) as info:
        resolve_config("cartpole_pre.yaml", root=root)
    message = str(info.value)
    assert message.startswith("--config cartpole_pre.yaml: no such file and no shipped config of that name")
    assert "closest: cartpole_per" in message and "\n" not in message
    with pytest.raises(ConfigError, match="no shipped config of that name; per configs lists them all"):
        resolve_config("zzzzzzzz", root=root)


def test_a_directory_is_said_to_be_one(tmp_path):
    with pytest.raises(ConfigError, match="is a directory"):
        resolve_config(str(tmp_path))


def test_a_local_file_shadowing_a_shipped_config_is_used_with_a_note(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("cartpole_per.yaml").write_text("# mine\nseed: 5\n")
    resolved = resolve_config("cartpole_per.yaml")
    assert resolved.path == Path("cartpole_per.yaml") and resolved.name is None
    assert "shadows the shipped config 'cartpole_per'" in resolved.note
    assert load_config(resolved.path).seed == 5
    Path("other.yaml").write_text("seed: 5\n")
    assert resolve_config("other.yaml").note is None  # no shipped config of that name: nothing to say


def test_the_repository_path_of_a_shipped_config_is_no_shadow():
    assert resolve_config(str(CONFIGS / "cartpole_per.yaml")).note is None


def test_normalize_name():
    assert normalize_name("./configs/seed001/cartpole_per.yaml") == "seed001/cartpole_per"
    assert normalize_name("pong_per.yml") == "pong_per"


def test_every_shipped_config_has_a_one_line_description():
    for name, path in shipped_configs().items():
        text = describe(path)
        assert text and "\n" not in text and len(text) <= 110, name
    assert describe(shipped_root() / "cartpole_per.yaml").startswith("DQN on CartPole-v1 with proportional prioritized")
