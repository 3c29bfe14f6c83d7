"""preflight(cfg): every check that can be made before a run starts, as one-line ConfigErrors."""

import pytest

from per_cli.config import ConfigError, load_config
from per_cli.config.shipped import shipped_configs
from per_cli.train.preflight import preflight, probe_env


@pytest.mark.parametrize("name", sorted(shipped_configs()))
def test_every_shipped_config_passes(name):
    preflight(load_config(shipped_configs()[name]))


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["replay.kind=unifrom"], "replay.kind: unknown replay kind 'unifrom'; did you mean 'uniform'?"),
        (["env.id=cartpol"], "env.id: unknown env 'cartpol'; did you mean 'cartpole'?"),
        (["env.id=NoSuchEnv-v9"], "env.id: unknown env 'NoSuchEnv-v9'"),
        (["env.n_bits=5"], "env.n_bits: only bit flipping (env.id: bitflip) has bits"),
        (["train.learning_starts=500", "train.total_steps=500"], "train.learning_starts: 500 is not below"),
        (["train.learning_starts=2000", "train.total_steps=500"], "so the agent would never learn"),
        (["agent.network=cnn"], "agent.network: cnn needs (channels, height, width) image observations"),
        (["replay.her_strategy=future"], "replay.her_strategy: relabelling needs a goal-conditioned env"),
        (["env.id=MountainCarContinuous-v0"], "has a Box action space; DQN needs a Discrete one"),
        # issue 45: env.kwargs were passed on unchecked (a truthy 1 turns CartPole's Sutton-Barto reward on)
        (["env.kwargs.sutton_barto_reward=1"], "env.kwargs.sutton_barto_reward: 1 is not true or false"),
        (["env.id=mountaincar", "env.kwargs.goal_velocity=fast"], "env.kwargs.goal_velocity: 'fast' is not a number"),
        (["env.id=bitflip", "env.kwargs.n_bits=true"], "env.kwargs.n_bits: True is not a number"),
    ],
)
def test_settings_that_cannot_run_are_one_line_config_errors(overrides, expected):
    cfg = load_config(None, overrides)  # the config layer alone accepts them
    with pytest.raises(ConfigError) as info:
        preflight(cfg)
    assert expected in str(info.value) and "\n" not in str(info.value)


def test_learning_starts_just_below_total_steps_is_fine():
    preflight(load_config(None, ["train.learning_starts=499", "train.total_steps=500"]))


def test_probe_env_reads_observations_and_goals():
    probe = probe_env(load_config(None, ["env.id=acrobot"]).env)
    assert probe.obs_shape == (6,) and probe.obs_dtype.kind == "f"
    assert "needs a goal-conditioned env" in probe.goal_error
    assert probe_env(load_config(None, ["env.id=bitflip", "env.n_bits=5"]).env).goal_error is None


def test_a_memory_larger_than_the_machine_is_refused_before_allocating():
    cfg = load_config(None, ["replay.capacity=1e12"])
    with pytest.raises(ConfigError, match=r"^replay.capacity: a replay memory of 1,000,000,000,000 transitions needs"):
        preflight(cfg)


@pytest.mark.parametrize(
    "overrides",
    [
        ["agent.hidden_sizes=[1000000,1000000]"],  # issue 45: 10^12 parameters, a traceback from torch's allocator
        ["env.id=bitflip", "env.n_bits=10000", "agent.hidden_sizes=[100000]"],  # wide input and output layers
        ["replay.capacity=1000", "replay.batch_size=1000", "agent.hidden_sizes=[10000000]"],  # the batch's activations
    ],
)
def test_a_network_larger_than_the_machine_is_refused_before_allocating(overrides):
    with pytest.raises(ConfigError, match=r"^agent.hidden_sizes: a Q-network for .* needs [0-9.]+ GB of memory"):
        preflight(load_config(None, overrides))


def test_notes_say_what_runs_but_may_surprise():
    """Issue 35: a linear Q-network and a batch of one run, but are said once before the run starts."""
    from per_cli.config import load_config
    from per_cli.train.preflight import notes

    assert notes(load_config(None)) == []
    said = notes(load_config(None, ["agent.hidden_sizes=[]", "replay.batch_size=1"]))
    assert any("linear" in n for n in said) and any("batch of one" in n for n in said)


def test_env_kwargs_of_the_envs_own_types_run():
    preflight(load_config(None, ["env.kwargs.sutton_barto_reward=true"]))
    preflight(load_config(None, ["env.id=mountaincar", "env.kwargs.goal_velocity=0.5"]))
