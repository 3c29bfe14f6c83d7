import dataclasses

import pytest

from per_cli.config import (
    Config,
    ConfigError,
    dump_config,
    from_dict,
    load_config,
    parse_override,
    read_yaml,
    to_dict,
)

from ..conftest import CONFIGS


def test_defaults_are_valid():
    cfg = load_config(None)
    assert isinstance(cfg, Config)
    assert cfg.replay.kind == "uniform" and cfg.env.id == "cartpole"


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_config_loads(path):
    cfg = load_config(path)
    assert cfg.train.total_steps > 0


def test_yaml_values_and_overrides():
    cfg = load_config(
        CONFIGS / "cartpole_uniform.yaml",
        ["agent.lr=3e-4", "agent.hidden_sizes=[64, 32]", "env.kwargs.sutton_barto_reward=true", "replay.capacity=1e4"],
        seed=7,
    )
    assert cfg.agent.lr == pytest.approx(3e-4) and isinstance(cfg.agent.lr, float)
    assert cfg.agent.hidden_sizes == [64, 32]
    assert cfg.env.kwargs == {"sutton_barto_reward": True}
    assert cfg.replay.capacity == 10_000 and isinstance(cfg.replay.capacity, int)
    assert cfg.seed == 7
    assert cfg.agent.gamma == 0.99  # untouched keys keep the file's values


def test_parse_override_reads_yaml_scalars():
    assert parse_override("agent.double_dqn=true") == ("agent.double_dqn", True)
    assert parse_override("agent.max_grad_norm=null") == ("agent.max_grad_norm", None)
    assert parse_override("env.id=ALE/Pong-v5") == ("env.id", "ALE/Pong-v5")


def test_dump_round_trips():
    cfg = load_config(CONFIGS / "cartpole_uniform.yaml", ["agent.lr=1e-3"])
    import yaml

    again = from_dict(yaml.safe_load(dump_config(cfg)))
    assert again == cfg
    assert dataclasses.asdict(again)["agent"]["lr"] == 1e-3


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("**/*.yaml")), ids=lambda p: str(p.relative_to(CONFIGS)))
def test_dump_is_the_safe_dumpers_text(path):
    """config.yaml is written by libyaml's emitter where PyYAML has it: its text must be the pure-Python
    SafeDumper's, so a run directory's config.yaml does not depend on how PyYAML was built."""
    import yaml

    data = to_dict(load_config(path))
    assert dump_config(load_config(path)) == yaml.dump(data, Dumper=yaml.SafeDumper, sort_keys=False)


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["agent.lrr=1"], "unknown key 'agent.lrr'; did you mean 'agent.lr'?"),
        (["agnet.lr=1"], "unknown key 'agnet'; did you mean 'agent'?"),
        (["replay.capacity=abc"], "replay.capacity: expected an integer, got 'abc'"),
        (["replay.capacity=-5"], "replay.capacity: -5 is out of range; must be >= 1"),
        (["agent.gamma=1.5"], "agent.gamma: 1.5 is out of range; must be in [0.0, 1.0]"),
        (["agent.lr=0"], "agent.lr: 0.0 is out of range; must be > 0.0"),
        (["agent.double_dqn=yes please"], "agent.double_dqn: expected true or false"),
        (["agent.loss=l1"], "agent.loss: 'l1' is not allowed; choose one of huber, mse"),
        (["agent.hidden_sizes=64"], "agent.hidden_sizes: expected a list of int"),
        (["replay.capacity=10", "replay.batch_size=64"], "replay.batch_size: 64 is larger than replay.capacity (10)"),
        (["agent.lr.x=1"], "'agent.lr' is a value, not a section"),
        (["noequals"], "expected KEY=VALUE"),
    ],
)
def test_bad_values_name_the_key_and_the_fix(overrides, expected):
    with pytest.raises(ConfigError) as info:
        load_config(CONFIGS / "cartpole_uniform.yaml", overrides)
    message = str(info.value)
    assert expected in message
    assert "\n" not in message


def test_unknown_key_in_file_and_wrong_section_type(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("replay:\n  kind: uniform\n  capacityy: 10\n")
    with pytest.raises(ConfigError, match=r"unknown key 'replay.capacityy'; did you mean 'replay.capacity'\?"):
        load_config(path)
    path.write_text("replay: 5\n")
    with pytest.raises(ConfigError, match="replay: expected a mapping"):
        load_config(path)


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        read_yaml(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("agent:\n  lr: [1, 2\n")
    with pytest.raises(ConfigError, match=r"malformed YAML at line \d+, column \d+"):
        read_yaml(bad)
    listy = tmp_path / "list.yaml"
    listy.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        read_yaml(listy)


def test_a_directory_is_named_as_one(tmp_path):
    with pytest.raises(ConfigError, match="is a directory"):
        read_yaml(tmp_path)


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n# and another\n", "{}\n"])
def test_an_empty_config_is_refused(tmp_path, text):
    path = tmp_path / "empty.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="the config is empty"):
        load_config(path)


@pytest.mark.parametrize(
    ("text", "key", "line"),
    [
        ("agent:\n  lr: 1.0e-3\nreplay:\n  kind: uniform\nagent:\n  gamma: 0.9\n", "agent", 5),
        ("agent:\n  lr: 1.0e-3\n  gamma: 0.9\n  lr: 3.0e-4\n", "agent.lr", 4),
        ("env:\n  id: cartpole\n  kwargs: {a: 1, a: 2}\n", "env.kwargs.a", 3),
        ("seed: 1\nseed: 2\n", "seed", 2),
    ],
)
def test_a_key_given_twice_is_refused_by_name(tmp_path, text, key, line):
    path = tmp_path / "dup.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        read_yaml(path)
    assert str(info.value) == f"{path}: duplicate key '{key}' at line {line}; give each key once"


def test_the_same_key_in_two_sections_is_no_duplicate(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text("log:\n  every: 10\nmetrics:\n  correlation: false\ntrain:\n  eval_every: 10\n")
    assert load_config(path).log.every == 10


def test_config_imports_neither_envs_nor_replay():
    """The config layer is below envs and replay (issue 17): loading a config must not pull them in."""
    import subprocess
    import sys

    code = (
        "import sys; import per_cli.config; from per_cli.config import load_config; load_config(None); "
        "bad = sorted(m for m in sys.modules if m.startswith(('per_cli.envs', 'per_cli.replay', 'per_cli.rl'))); "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(("text", "key"), [("replay:\n  her_strategy: off\n", "her_strategy"),
                                          ("replay:\n  kind: prioritized\n  is_weights: off\n", "is_weights")])
def test_a_bare_yaml_off_is_the_choice_off(tmp_path, text, key):
    """YAML 1.1 reads a bare ``off`` as false; for a choice that has ``off`` it means ``off``."""
    path = tmp_path / "c.yaml"
    path.write_text(text)
    assert getattr(load_config(path).replay, key) == "off"
    with pytest.raises(ConfigError, match="not allowed"):
        load_config(path, [f"replay.{key}=true"])  # (no choice "on" there)


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["env.done_reward=-10", "env.id=bitflip", "replay.her_strategy=future"], "with replay.her_strategy: off"),
        (["env.truncation_terminates=true", "env.id=bitflip", "replay.her_strategy=final"], "replay.her_strategy: off"),
        (["replay.beta_increment=0.001", "replay.beta_end_step=1000"], "set one of them to null"),
        (["replay.beta_increment=0"], "replay.beta_increment: 0.0 is out of range; must be > 0.0"),
        (["replay.is_weights=none"], "choose one of memory_max, batch_max, batch_mean, off"),
    ],
)  # fmt: skip
def test_the_store_and_weight_knobs_refuse_what_has_no_meaning(overrides, expected):
    with pytest.raises(ConfigError) as info:
        load_config(CONFIGS / "cartpole_uniform.yaml", overrides)
    assert expected in str(info.value) and "\n" not in str(info.value)
