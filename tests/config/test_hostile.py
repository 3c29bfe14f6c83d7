"""Hostile and broken config files: each refused in one line naming the key or the file, fast, whatever the
bytes (issue 35)."""

import dataclasses
import re
import time
import typing

import pytest

from per_cli.config import Config, ConfigError, load_config, read_yaml
from per_cli.config.reading import MAX_CONFIG_BYTES


def _float_keys(cls: type = Config, prefix: str = "") -> list[str]:
    """Every dotted key whose type admits a float, from the schema itself (so a new float field is covered)."""
    keys = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        if dataclasses.is_dataclass(tp):
            keys += _float_keys(tp, f"{prefix}{f.name}.")
        elif tp is float or float in typing.get_args(tp):
            keys.append(f"{prefix}{f.name}")
    return keys


FLOAT_KEYS = _float_keys()


def test_the_schema_has_the_float_keys_the_issue_names():
    for key in ("agent.gamma", "agent.lr", "agent.adam_eps", "agent.tau", "agent.max_grad_norm", "replay.alpha",
                "replay.beta0", "replay.priority_eps", "train.eps_start", "train.eps_fraction", "train.eval_eps",
                "metrics.correlation_threshold"):
        assert key in FLOAT_KEYS


@pytest.mark.parametrize("key", FLOAT_KEYS)
@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf", "1e400"])
def test_every_float_key_refuses_non_finite_values(key, value):
    with pytest.raises(ConfigError) as info:
        load_config(None, [f"{key}={value}"])
    message = str(info.value)
    assert message.startswith(f"{key}: ") and "not a finite number" in message, message


def test_a_nan_in_a_file_is_refused_by_key(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("agent:\n  gamma: .nan\n")
    with pytest.raises(ConfigError, match=r"^agent.gamma: nan is not a finite number"):
        load_config(path)


@pytest.mark.parametrize("seed", [-1, 10**20, 1_000_000_001])
def test_a_seed_out_of_range_states_the_range(seed):
    with pytest.raises(ConfigError, match=r"^seed: .* out of range; must be in \[0, 1000000000\]"):
        load_config(None, seed=seed)
    assert load_config(None, seed=1_000_000_000).seed == 1_000_000_000


def test_integers_past_int64_are_refused_by_key():
    with pytest.raises(ConfigError, match=r"^train.total_steps: .* out of range"):
        load_config(None, ["train.total_steps=99999999999999999999"])


@pytest.mark.parametrize("key", ["env.id", "replay.kind"])
def test_a_very_long_name_is_one_short_line(key):
    with pytest.raises(ConfigError) as info:
        load_config(None, [f"{key}={'x' * 5000}"])
    message = str(info.value)
    assert message.startswith(f"{key}: ") and "5,000 characters long" in message
    assert len(message) < 300


def _laughs(levels: int) -> str:
    lines = ['env:', '  kwargs:', '    l0: &l0 "lol"']
    for i in range(1, levels + 1):
        lines.append(f"    l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("levels", [6, 9, 30])
def test_an_alias_bomb_is_refused_in_milliseconds(tmp_path, levels):
    path = tmp_path / "bomb.yaml"
    path.write_text(_laughs(levels))
    started = time.perf_counter()
    with pytest.raises(ConfigError, match="aliases expand to more than 100,000 values"):
        load_config(path)
    assert time.perf_counter() - started < 1.0


@pytest.mark.parametrize(("length", "copies"), [(500_000, 99_000), (20_000, 60), (100, 20_000)])
def test_aliases_of_a_long_string_are_refused_by_their_characters(tmp_path, length, copies):
    # issue 45: under the value limit, yet 50 GB once built (per train's preflight dumped it; grid and plot
    # ran out of memory); also a small file whose few aliases expand past the largest file read without any
    path = tmp_path / "long.yaml"
    path.write_text(f"env:\n  kwargs:\n    a: &s {'x' * length}\n    b: [" + ", ".join(["*s"] * copies) + "]\n")
    started = time.perf_counter()
    with pytest.raises(ConfigError, match="aliases expand to more than 1 MB of text"):
        load_config(path)
    assert time.perf_counter() - started < 1.0


def test_a_few_aliases_still_load(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text(_laughs(2))  # 100 values
    assert len(load_config(path).env.kwargs["l2"]) == 10


def test_an_alias_bomb_in_set_is_refused():
    started = time.perf_counter()
    with pytest.raises(ConfigError, match="aliases expand"):
        load_config(None, ["env.kwargs={" + _laughs(9).split("kwargs:\n", 1)[1].replace("\n    ", ", ")[4:] + "}"])
    assert time.perf_counter() - started < 1.0


def test_a_recursive_alias_is_refused(tmp_path):
    path = tmp_path / "loop.yaml"
    path.write_text("env:\n  kwargs:\n    a: &a [1, *a]\n")
    with pytest.raises(ConfigError, match="recursive YAML alias"):
        load_config(path)


def test_deep_nesting_is_one_line(tmp_path):
    path = tmp_path / "deep.yaml"
    path.write_text("env:\n  kwargs:\n    a: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(ConfigError, match="nest too deep"):
        load_config(path)


def test_a_huge_file_is_refused_before_parsing(tmp_path):
    path = tmp_path / "big.yaml"
    with path.open("w") as handle:
        handle.write("env:\n  kwargs:\n")
        for i in range(MAX_CONFIG_BYTES // 10):
            handle.write(f"    k{i:07d}: 1\n")
    started = time.perf_counter()
    with pytest.raises(ConfigError, match=r"the file is over 1 MB"):
        read_yaml(path)
    assert time.perf_counter() - started < 1.0


def test_bytes_that_are_not_utf8_name_the_line(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("agent:\n  lr: 0.001\n# caf\u00e9\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"byte 0xe9 at line 3 is not UTF-8; save the config as UTF-8"):
        read_yaml(path)


def test_an_unreadable_path_is_one_line(tmp_path):
    with pytest.raises(ConfigError, match="cannot be read"):
        read_yaml(tmp_path / ("x" * 300))


@pytest.mark.parametrize(
    ("override", "message"),
    [
        # issue 45: 1e300 hung the run at "running" (10^300 gradient steps); 1e-300 and 5e-324 were OverflowErrors
        ("train.replay_ratio=1e300", "train.replay_ratio: 1e+300 is out of range; must be in (0.0, 1024]"),
        ("train.replay_ratio=1e-300", "train.replay_ratio: 1e-300 is one update every 1e+300 env steps"),
        ("train.replay_ratio=5e-324", "train.replay_ratio: 4.94066e-324 is one update every inf env steps"),
        ("train.replay_ratio=1e-10", "train.replay_ratio: 1e-10 means one update every 10,000,000,000 steps"),
        ("train.train_freq=100000", "train.train_freq: 100,000 means one update every 100,000 steps"),
        ("train.gradient_steps=1e15", "train.gradient_steps: 1000000000000000 is out of range; must be in [1, 1024]"),
        ("train.eval_episodes=1e9", "train.eval_episodes: 1000000000 is out of range; must be in [0, 10000]"),
        ("env.n_bits=1e9", "env.n_bits: 1000000000 is out of range; must be in [1, 10000]"),
        ("replay.her_k=1e9", "replay.her_k: 1000000000 is out of range"),
        ("env.atari.noop_max=1e9", "env.atari.noop_max: 1000000000 is out of range"),
    ],
)
def test_counts_that_multiply_a_runs_time_are_bounded(override, message):
    with pytest.raises(ConfigError) as caught:
        load_config(None, [override])
    assert str(caught.value).startswith(message)


def test_a_train_freq_that_reaches_one_update_still_loads():
    cfg = load_config(None, ["train.total_steps=1000", "train.learning_starts=0", "train.train_freq=1000"])
    assert cfg.train.train_freq == 1000


@pytest.mark.parametrize("kind", ["prioritized", "rank", "lap", "uniform"])
@pytest.mark.parametrize("alpha", ["11", "1000", "1e300"])
def test_a_priority_exponent_past_float64s_range_is_refused(kind, alpha):
    # issue 45: alpha 1000 trained with IS weights 0 and a loss of 0, and said nothing
    with pytest.raises(ConfigError, match=r"^replay.alpha: .* makes priorities p\^α overflow or vanish"):
        load_config(None, [f"replay.kind={kind}", f"replay.alpha={alpha}"])
    assert load_config(None, [f"replay.kind={kind}", "replay.alpha=10"]).replay.alpha == 10


@pytest.mark.parametrize(
    ("override", "where"),
    [("env.kwargs.sutton_barto_reward=.nan", "env.kwargs.sutton_barto_reward: nan"),
     ("env.kwargs.x=[1,-.inf]", "env.kwargs.x[1]: -inf"), ("env.kwargs.a={b: .nan}", "env.kwargs.a.b: nan")],
)
def test_non_finite_env_kwargs_are_refused(override, where):
    # issue 45: .nan as sutton_barto_reward is truthy, and changed CartPole's reward silently
    with pytest.raises(ConfigError, match=rf"^{re.escape(where)} is not a finite number"):
        load_config(None, [override])
