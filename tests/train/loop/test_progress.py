"""Progress output: the last line agrees with `done:`, is printed once, fits a 100-column terminal, and
shows the success rate of goal envs."""

from __future__ import annotations

import io
import json
import re

from rich.console import Console
from typer.testing import CliRunner

from per_cli.cli import app
from per_cli.train.loop.progress import PlainTrainProgress, RichTrainProgress, done_line

from ...conftest import CONFIGS, TINY_CARTPOLE

INFO = {"sps": 1234.0, "epsilon": 0.05, "episodes": 7, "recent_return": 21.5, "eval_return": 30.0,
        "success_rate": None}  # fmt: skip


def _cli_train(tmp_path, config: str, overrides: list[str]):
    sets = [arg for kv in overrides for arg in ("--set", kv)]
    return CliRunner().invoke(
        app, ["train", "--config", str(CONFIGS / config), *sets, "--runs-dir", str(tmp_path), "--name", "r"]
    )


def test_the_last_line_is_printed_once_and_agrees_with_done(tmp_path):
    # evaluations at steps 400 and 800, then the final one at 1000: the old last line showed step 800's
    result = _cli_train(tmp_path, "cartpole_uniform.yaml", [*TINY_CARTPOLE, "train.total_steps=1000",
                                                             "train.eval_every=400"])  # fmt: skip
    assert result.exit_code == 0, result.output
    finals = [line for line in result.output.splitlines() if "step 1000/1000" in line]
    assert len(finals) == 1, result.output  # not a terminal: plain lines, the last one once
    (done,) = [line for line in result.output.splitlines() if line.startswith("done:")]
    progress_eval = re.search(r"eval (-?[\d.]+)", finals[0]).group(1)
    progress_return = re.search(r"return (-?[\d.]+)", finals[0]).group(1)
    assert f"eval return {progress_eval}" in done and f" return {progress_return}," in done
    episodes = int(re.search(r"(\d+) episodes in", done).group(1))
    assert f"last-{min(episodes, 20)} return {progress_return}," in done


def test_done_names_the_episodes_its_training_return_is_the_mean_of(tmp_path):
    """Issue 45: after 8 episodes the line said "last-20 return"."""
    result = _cli_train(tmp_path, "cartpole_uniform.yaml", [*TINY_CARTPOLE, "train.total_episodes=8"])
    assert result.exit_code == 0, result.output
    (done,) = [line for line in result.output.splitlines() if line.startswith("done:")]
    assert " 8 episodes in " in done and "; last-8 return " in done
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["final_return_episodes"] == 8


def test_a_goal_env_shows_its_success_rate_in_progress_and_done(tmp_path):
    overrides = ["env.n_bits=4", "train.total_steps=300", "train.learning_starts=100", "train.eval_episodes=5",
                 "replay.capacity=1000", "replay.batch_size=32", "agent.hidden_sizes=[32]", "log.every=50"]  # fmt: skip
    result = _cli_train(tmp_path, "bitflip_uniform.yaml", overrides)
    assert result.exit_code == 0, result.output
    (last,) = [line for line in result.output.splitlines() if "step 300/300" in line]
    (done,) = [line for line in result.output.splitlines() if line.startswith("done:")]
    assert re.search(r"success \d\.\d\d", last), last
    assert re.search(r"success rate \d\.\d\d, eval \d\.\d\d", done), done


def test_a_long_run_name_does_not_squeeze_the_bar_in_100_columns():
    out = io.StringIO()
    console = Console(file=out, width=100, force_terminal=True, color_system="standard", legacy_windows=False)
    name = "cartpole__prioritized__s12__20261122-211240__with-a-very-long-suffix-for-the-sweep-point"
    with RichTrainProgress(1_000_000, name, console=console) as progress:
        progress.update(500_000, INFO)
    lines = [line for line in out.getvalue().replace("\r", "\n").splitlines() if "500000/1000000" in line]
    line = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", lines[-1])
    assert len(line) <= 100, line
    assert "…" in line and name[:10] in line  # the name is shortened, not dropped
    assert len(re.findall(r"[━╸╺]", line)) >= 20, line  # the bar keeps its width
    assert "1234 sps" in line and "eval 30.0" in line


def test_plain_lines_count_episodes_under_an_episode_budget():
    out = io.StringIO()
    progress = PlainTrainProgress(200_000, "run", lines=4, stream=out, total_episodes=300)
    for episodes in (10, 75, 80, 150, 220):
        progress.update(episodes * 20, {**INFO, "episodes": episodes})
    progress.update(6000, {**INFO, "episodes": 300, "final": True})
    lines = out.getvalue().splitlines()
    assert [line.split("  ")[0] for line in lines] == [  # the first update's line: a sign of life (issue 35)
        "run: episode 10/300", "run: episode 75/300", "run: episode 150/300", "run: episode 300/300",
    ]  # fmt: skip


def test_done_line_without_and_with_success():
    """Issue 45: the line said "last-20 return" after 8 episodes; it names the episodes the mean is over."""
    summary = {"total_steps": 10, "episodes": 2, "wall_time_s": 1.0, "steps_per_second": 10.0,
               "final_return_mean": 5.0, "final_return_episodes": 2, "eval_return_mean": None}  # fmt: skip
    assert done_line(summary).endswith("last-2 return 5.0, eval return -")
    assert done_line({**summary, "final_success_rate": 0.5}).endswith("success rate 0.50, eval -")


def test_a_default_run_name_shows_whole_but_its_time_stamp_in_100_columns():
    out = io.StringIO()
    console = Console(file=out, width=100, force_terminal=True, color_system="standard", legacy_windows=False)
    with RichTrainProgress(50_000, "cartpole__prioritized__s1__20261122-211240", console=console) as progress:
        progress.update(25_000, INFO)
    lines = [line for line in out.getvalue().replace("\r", "\n").splitlines() if "25000/50000" in line]
    line = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", lines[-1])
    assert len(line) <= 100 and "cartpole__prioritized__s1 " in line, line
    assert len(re.findall(r"[━╸╺]", line)) >= 20, line


def test_plain_lines_print_the_first_update_whatever_the_total():
    out = io.StringIO()
    progress = PlainTrainProgress(10**12, "run", stream=out)
    progress.update(1000, {**INFO, "episodes": 3})
    progress.update(2000, {**INFO, "episodes": 5})  # within a minute of the first: quiet
    assert out.getvalue().count("\n") == 1 and "step 1000/1000000000000" in out.getvalue()
