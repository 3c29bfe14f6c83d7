"""The one registry of replay kinds (per_cli/replay/kinds.py): what each built-in kind's spec says, and how a
config's kind-dependent values are filled in where a run is built (the config layer cannot see the registry)."""

from __future__ import annotations

import dataclasses

import pytest
import yaml
from typer.testing import CliRunner

from per_cli.analysis.style import kind_color
from per_cli.cli import app
from per_cli.config import ConfigError, load_config, to_dict
from per_cli.replay import KINDS, KindSpec, register_kind, resolve_config
from per_cli.replay.samplers import UniformSampler
from per_cli.rl.losses import loss_name


def test_the_built_in_kinds_in_their_order_with_what_each_brings():
    assert list(KINDS)[:7] == ["none", "uniform", "combined", "prioritized", "rank", "lap", "pal"]
    assert {k: s.loss for k, s in KINDS.items() if s.loss} == {"lap": "lap", "pal": "pal"}
    assert [k for k in list(KINDS)[:7] if KINDS[k].takes_chunks] == ["uniform", "prioritized", "rank", "lap", "pal"]
    assert (KINDS["prioritized"].priority_defaults, KINDS["rank"].priority_defaults) == ((0.6, 0.4), (0.7, 0.5))
    rank = KINDS["rank"].priority_defaults
    assert (rank.alpha, rank.beta0) == (0.7, 0.5)  # (named: a spec's plain pair is taken as PriorityDefaults)
    colours = (kind_color("prioritized+her"), kind_color("rank"), kind_color("oracle"))
    assert colours == ("#d62728", "#ff7f0e", "#9467bd")  # (the oracle is no kind: the Blind Cliffwalk's)


def test_the_loss_follows_the_kinds_spec():
    assert loss_name(load_config(None, ["replay.kind=lap", "agent.loss=mse"])) == "lap"
    assert loss_name(load_config(None, ["replay.kind=rank", "agent.loss=mse"])) == "mse"


def test_resolving_fills_the_kinds_defaults_once_and_leaves_the_dump_as_before():
    raw = load_config(None, ["replay.kind=rank"])
    assert (raw.replay.alpha, raw.replay.beta0) == (None, None)  # the config layer knows no kind
    resolved = resolve_config(raw)
    assert (resolved.replay.alpha, resolved.replay.beta0) == (0.7, 0.5)
    assert resolve_config(resolved) == resolved
    assert "params" not in to_dict(resolved)["replay"]  # a kind without parameters: config.yaml as before


def test_per_configs_prints_the_kinds_defaults(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("replay:\n  kind: rank\n")
    result = CliRunner().invoke(app, ["configs", str(path)])
    assert result.exit_code == 0, result.output
    printed = yaml.safe_load(result.output)["replay"]
    assert (printed["alpha"], printed["beta0"]) == (0.7, 0.5)


def test_an_unknown_kind_is_named_with_the_registered_ones():
    with pytest.raises(ConfigError, match="replay.kind: unknown replay kind 'rnak'; did you mean 'rank'"):
        resolve_config(load_config(None, ["replay.kind=rnak"]))


def test_a_kinds_params_must_be_a_dataclass():
    with pytest.raises(TypeError, match="is not a dataclass"):
        register_kind(KindSpec("params_not_a_dataclass", UniformSampler, params=dict))
    assert "params_not_a_dataclass" not in KINDS


def test_a_kind_with_params_gets_them_checked_and_defaulted():
    @dataclasses.dataclass(frozen=True)
    class Width:
        width: int = dataclasses.field(default=3, metadata={"lo": 1, "hi": 10})

    register_kind(KindSpec("with_width_test", UniformSampler, params=Width))
    try:
        assert KINDS["with_width_test"].parse_params({}) == Width(3)
        cfg = resolve_config(load_config(None, ["replay.kind=with_width_test", "replay.params.width=7"]))
        assert cfg.replay.params == {"width": 7} and to_dict(cfg)["replay"]["params"] == {"width": 7}
        with pytest.raises(ConfigError, match=r"replay.params.width: 11 is out of range; must be in \[1, 10\]"):
            resolve_config(load_config(None, ["replay.kind=with_width_test", "replay.params.width=11"]))
        with pytest.raises(ConfigError, match=r"replay.params.xxxx\S*\.\.\.\(5,000 characters\): not a param") as err:
            KINDS["with_width_test"].parse_params({"x" * 5000: 1})  # (a hostile key: a short line, not 5 kB)
        assert len(str(err.value)) < 200
    finally:
        del KINDS["with_width_test"]
