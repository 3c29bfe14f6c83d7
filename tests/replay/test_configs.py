"""The per-kind configs of the study: each differs from its env's uniform config in the replay section only,
so a comparison of kinds compares replay and nothing else."""

import pytest

from per_cli.config import load_config, to_dict

from ..conftest import CONFIGS

KIND_OF = {"per": "prioritized", "rank": "rank", "combined": "combined", "none": "none"}


@pytest.mark.parametrize("env", ["cartpole", "acrobot", "mountaincar"])
@pytest.mark.parametrize("short", list(KIND_OF))
def test_kind_config_is_the_uniform_config_with_another_replay(env, short):
    uniform = to_dict(load_config(CONFIGS / f"{env}_uniform.yaml"))
    config = to_dict(load_config(CONFIGS / f"{env}_{short}.yaml"))
    assert config["replay"]["kind"] == KIND_OF[short]
    for key in ("capacity", "batch_size"):
        assert config["replay"][key] == uniform["replay"][key]
    config.pop("replay"), uniform.pop("replay")
    assert config == uniform


def test_paper_priority_exponents():
    per = load_config(CONFIGS / "cartpole_per.yaml").replay
    rank = load_config(CONFIGS / "cartpole_rank.yaml").replay
    assert (per.alpha, per.beta0, rank.alpha, rank.beta0) == (0.6, 0.4, 0.7, 0.5)
