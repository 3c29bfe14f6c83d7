"""Issue 10's loop parts: an episode budget, a target copy at each episode's end, ε over a fixed number
of steps, and β reaching 1 at the end of an episode-budget run."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from per_cli.cli import app
from per_cli.config import load_config
from per_cli.errors import ConfigError
from per_cli.train.loop import trainer_state
from per_cli.train.loop.learning_rules import beta_position
from per_cli.train.loop.member_data import MemberData
from per_cli.train.loop.trainer import build_member, run_member

from ..conftest import CONFIGS, TINY_CARTPOLE


def _member(overrides: list[str]) -> MemberData:
    return build_member(load_config(CONFIGS / "cartpole_uniform.yaml", [*TINY_CARTPOLE, *overrides], device="cpu"))


def test_the_episode_budget_ends_the_run_and_the_target_is_copied_at_each_episode_end(tmp_path):
    member = _member(["train.total_episodes=12", "train.total_steps=100000", "replay.kind=prioritized",
                        "agent.target_update_on_episode_end=true", "agent.target_update_period=1000000"])  # fmt: skip
    summary = run_member(member, tmp_path / "r")
    assert summary["status"] == "completed" and summary["episodes"] == 12
    assert summary["updates"] > 0  # learning happened between the copies
    assert summary["target_syncs"] == 12  # one copy per episode, none by the (huge) period
    rows = (tmp_path / "r" / "metrics.csv").read_text().splitlines()
    assert len(rows) == 1 + 12 and summary["total_steps"] == int(rows[-1].split(",")[0])  # ends with episode 12
    for online, target in zip(member.agent.q_net.parameters(), member.agent.target_net.parameters(), strict=True):
        np.testing.assert_array_equal(online.detach().numpy(), target.detach().numpy())  # copied after the last
    at_end = beta_position(member.cfg)(summary["total_steps"], summary["episodes"])
    assert member.beta(at_end) == 1.0  # β annealed to 1 by the run's end


def test_the_step_budget_still_ends_a_run_first_when_it_is_reached_first(tmp_path):
    summary = run_member(_member(["train.total_episodes=100000", "train.total_steps=150"]), tmp_path / "r")
    assert summary["total_steps"] == 150 and summary["episodes"] < 100000


def test_without_the_option_the_target_follows_its_period_only(tmp_path):
    summary = run_member(_member(["train.total_steps=300", "agent.target_update_period=100"]), tmp_path / "r")
    assert summary["target_syncs"] == len(range(100, 301, 100)) and summary["episodes"] > 3


def test_eps_decay_steps_anneals_over_a_fixed_number_of_steps():
    member = _member(["train.eps_decay_steps=1000", "train.total_steps=60000", "train.eps_end=0.05"])
    assert [member.epsilon(s) for s in (0, 500, 1000, 50000)] == pytest.approx([1.0, 0.525, 0.05, 0.05])
    default = _member(["train.total_steps=60000", "train.eps_fraction=0.1", "train.eps_end=0.05"])
    assert default.epsilon(3000) == pytest.approx(0.525)  # eps_fraction × total_steps otherwise


def test_resuming_a_run_that_spent_its_episode_budget_asks_for_more(tmp_path):
    overrides = ["train.total_episodes=3", "train.total_steps=100000", "train.checkpoint_every=1000"]
    run_member(_member(overrides), tmp_path / "r")
    with pytest.raises(ConfigError, match=r"train.total_episodes: the run already finished 3 episodes"):
        trainer_state.resume(_member(overrides), tmp_path / "r")


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("train.total_episodes=0", "train.total_episodes: 0 is out of range; must be >= 1"),
        ("train.total_episodes=2.5", "train.total_episodes: expected an integer, got 2.5"),
        ("train.eps_decay_steps=-1", "train.eps_decay_steps: -1 is out of range"),
        ("agent.target_update_on_episode_end=maybe", "agent.target_update_on_episode_end: expected true or false"),
    ],
)
def test_bad_budget_values_are_one_line_exit_2_and_nothing_written(tmp_path, setting, message):
    runs = tmp_path / "runs"
    result = CliRunner().invoke(app, ["train", "--set", setting, "--runs-dir", str(runs)])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.output
    assert not runs.exists()
