"""Fedus et al. (2020)'s replay ratio and the oldest transition's age: logged per episode (TensorBoard and
metrics.csv) and in summary.json from a real run, ``train.replay_ratio`` resolved into train_freq and
gradient_steps by one rule, and a resumed run's rows kept in the columns of the file they continue."""

from __future__ import annotations

import csv
import json

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from per_cli.config import load_config
from per_cli.errors import ConfigError
from per_cli.rundir.logger import EPISODE_COLUMNS, RunLogger
from per_cli.train.loop.trainer import build_member, run_member

from ...conftest import CONFIGS, TINY_CARTPOLE


def test_a_run_logs_its_replay_ratio_and_oldest_age(tmp_path):
    """400 steps, memory of 150, one update of 2 gradient steps every 4 steps from step 100: ratio 0.5 once
    learning runs; the oldest transition is 149 transitions old once the memory is full."""
    sets = [*TINY_CARTPOLE, "replay.capacity=150", "train.replay_ratio=0.5", "train.eval_episodes=0"]
    cfg = load_config(CONFIGS / "cartpole_uniform.yaml", sets, seed=3, device="cpu")
    assert (cfg.train.train_freq, cfg.train.gradient_steps) == (2, 1)
    run_dir = tmp_path / "run"
    run_member(build_member(cfg), run_dir)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["replay_ratio"] == pytest.approx(summary["updates"] / summary["total_steps"])
    assert summary["replay_ratio"] == pytest.approx(0.5 * (400 - 100) / 400, abs=2 / 400)  # (none before step 100)
    assert summary["oldest_age"] == 149
    assert summary["oldest_policy_age"] == pytest.approx(149 * summary["replay_ratio"])
    rows = list(csv.DictReader((run_dir / "metrics.csv").open()))
    last = rows[-1]
    assert float(last["oldest_age"]) == min(int(last["step"]), 150) - 1
    assert 0 < float(last["replay_ratio"]) < 0.5
    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    ratios = [e.value for e in events.Scalars("replay/replay_ratio")]
    assert len(ratios) == len(rows) and ratios == sorted(ratios)  # (rises towards 0.5 as learning goes on)
    assert "replay/oldest_policy_age" in events.Tags()["scalars"]


@pytest.mark.parametrize(("ratio", "freq", "steps"), [(0.25, 4, 1), (1, 1, 1), (4, 1, 4), (1 / 3, 3, 1)])
def test_a_replay_ratio_is_train_freq_and_gradient_steps_whatever_they_were(ratio, freq, steps):
    """(The base config's train_freq 256 and gradient_steps 64 give way: a sweep names the ratio.)"""
    train = load_config(CONFIGS / "cartpole_uniform.yaml", [f"train.replay_ratio={ratio}"]).train
    assert (train.train_freq, train.gradient_steps) == (freq, steps)
    assert train.gradient_steps / train.train_freq == pytest.approx(ratio)


@pytest.mark.parametrize(
    ("sets", "says"),
    [
        (["train.replay_ratio=0.4"], "train.replay_ratio: 0.4 is neither an integer nor 1/integer"),
        (["train.replay_ratio=2.5"], "train.replay_ratio: 2.5 is neither"),
        (["train.replay_ratio=0"], "train.replay_ratio"),
    ],
)
def test_a_ratio_no_schedule_gives_is_one_line_naming_the_key(sets, says):
    with pytest.raises(ConfigError, match=says.replace("(", r"\(").replace(")", r"\)")):
        load_config(None, sets)


def test_a_resumed_run_writes_its_rows_in_the_columns_of_the_file_it_continues(tmp_path):
    old = [c for c in EPISODE_COLUMNS if c not in ("replay_ratio", "oldest_age")]
    (tmp_path / "metrics.csv").write_text(",".join(old) + "\n")
    logger = RunLogger(tmp_path, tensorboard=False, append=True)
    logger.episode({"step": 10, "episode": 1, "return": 5.0, "replay_ratio": 0.5, "oldest_age": 9})
    logger.close()
    rows = list(csv.reader((tmp_path / "metrics.csv").open()))
    assert rows[0] == old and len(rows[1]) == len(old) and rows[1][:3] == ["10", "1", "5.0"]
