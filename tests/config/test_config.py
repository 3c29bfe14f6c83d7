import dataclasses

import pytest

from per_cli.config import Config, ConfigError, dump_config, from_dict, load_config, parse_override, read_yaml

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
        (["replay.kind=unifrom"], "replay.kind: unknown replay kind 'unifrom'; did you mean 'uniform'?"),
        (["env.id=cartpol"], "env.id: unknown env 'cartpol'; did you mean 'cartpole'?"),
        (["env.id=NoSuchEnv-v9"], "env.id: unknown env 'NoSuchEnv-v9'"),
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
