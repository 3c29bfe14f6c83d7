"""`per train` through Typer's CliRunner: the run directory contract and bad input."""

import csv
import json

import pytest
import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from typer.testing import CliRunner

from per_cli.cli import app

from .conftest import CONFIGS, TINY_CARTPOLE

runner = CliRunner()

REQUIRED_TAGS = {
    "charts/episodic_return",
    "charts/episodic_length",
    "charts/epsilon",
    "charts/SPS",
    "losses/td_loss",
    "losses/q_values",
    "eval/return",
}


def _train(tmp_path, *extra):
    sets = [arg for kv in TINY_CARTPOLE for arg in ("--set", kv)]
    return runner.invoke(
        app, ["train", "--config", str(CONFIGS / "cartpole_uniform.yaml"), *sets, "--runs-dir", str(tmp_path), *extra]
    )


def test_train_writes_the_run_directory_contract(tmp_path):
    result = _train(tmp_path, "--seed", "3", "--name", "tiny")
    assert result.exit_code == 0, result.output
    check_run_contract(tmp_path / "tiny", seed=3, total_steps=400)


def check_run_contract(run, *, seed: int, total_steps: int, env: str = "cartpole", replay: str = "uniform") -> None:
    """The run directory contract (config.yaml, summary.json, metrics.csv, TensorBoard events) of a completed
    run; shared with the cohort tests, whose every run directory must pass it too. (``.lock``: the claim of a run
    started by ``per train``, rundir/claim.py.)"""
    assert sorted(p.name for p in run.iterdir() if not p.name.startswith("events.") and p.name != ".lock") == [
        "config.yaml",
        "metrics.csv",
        "summary.json",
    ]

    resolved = yaml.safe_load((run / "config.yaml").read_text())
    assert resolved["seed"] == seed and resolved["train"]["total_steps"] == total_steps

    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "completed"
    assert (summary["env"], summary["replay"], summary["seed"], summary["total_steps"]) == (
        env,
        replay,
        seed,
        total_steps,
    )
    for key in ("episodes", "wall_time_s", "steps_per_second", "final_return_mean", "eval_return_mean"):
        assert summary[key] is not None and summary[key] > 0, key
    assert "error" not in summary

    rows = list(csv.DictReader((run / "metrics.csv").open()))
    assert len(rows) == summary["episodes"]
    assert {"step", "episode", "return", "length", "wall_time"} <= set(rows[0])
    assert sum(int(r["length"]) for r in rows) <= total_steps
    assert [int(r["episode"]) for r in rows] == list(range(1, len(rows) + 1))
    last20 = [float(r["return"]) for r in rows[-20:]]
    assert summary["final_return_mean"] == pytest.approx(sum(last20) / len(last20))

    events = EventAccumulator(str(run), size_guidance={"scalars": 0})
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert tags >= REQUIRED_TAGS, REQUIRED_TAGS - tags
    returns = events.Scalars("charts/episodic_return")
    assert [e.value for e in returns] == pytest.approx([float(r["return"]) for r in rows])
    assert [e.step for e in returns] == [int(r["step"]) for r in rows]  # x-axis: env steps
    assert events.Scalars("eval/return")[-1].value == pytest.approx(summary["eval_return_mean"])


def test_default_run_name_and_plain_progress(tmp_path):
    result = _train(tmp_path)
    assert result.exit_code == 0, result.output
    (run,) = list(tmp_path.iterdir())
    assert run.name.startswith("cartpole__uniform__s1__")
    assert "step 400/400" in result.output  # not a TTY: plain progress lines
    assert "run directory:" in result.output


def test_quiet_prints_nothing(tmp_path):
    result = _train(tmp_path, "--quiet")
    assert result.exit_code == 0
    assert result.output == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--config", "missing.yaml"], "--config missing.yaml: no such file and no shipped config of that name"),
        (["--config", "cartpole_pre"], "closest: cartpole_per"),
        (["--name", "../escape"], "--name '../escape': a name is one folder name inside --runs-dir"),
        (["--name", "a/b"], "--name 'a/b': a name is one folder name"),
        (["--name", ".."], "a name is one folder name"),
        (["--set", "train.learning_starts=400", "--set", "train.total_steps=400"], "would never learn"),
        (["--set", "agent.network=cnn"], "agent.network: cnn needs"),
        (["--seed", "abc"], "Invalid value for '--seed'"),
        (["--sed", "3"], "No such option: --sed"),
        (["--set", "agent.lrr=1"], "unknown key 'agent.lrr'; did you mean 'agent.lr'?"),
        (["--set", "replay.capacity=-1"], "replay.capacity: -1 is out of range"),
        (["--set", "replay.kind=nope"], "replay.kind: unknown replay kind 'nope'"),
        (["--set", "env.id=Nope-v0"], "env.id: unknown env 'Nope-v0'"),
        (["--set", "agent.gamma=2"], "agent.gamma: 2.0 is out of range"),
        (["--device", "tpu"], "device: 'tpu' is not allowed; choose one of auto, cpu, cuda"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_on_disk(tmp_path, args, message):
    runs = tmp_path / "runs"
    result = runner.invoke(app, ["train", *args, "--runs-dir", str(runs)])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and lines[0].startswith("error: ")
    assert "Traceback" not in result.output
    assert not runs.exists()


def test_malformed_yaml_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("agent: {lr: 1\n")
    result = runner.invoke(app, ["train", "--config", str(bad), "--runs-dir", str(tmp_path / "runs")])
    assert result.exit_code == 2 and "malformed YAML" in result.output
    assert not (tmp_path / "runs").exists()


def test_existing_run_name_is_refused(tmp_path):
    (tmp_path / "taken").mkdir()
    result = _train(tmp_path, "--name", "taken")
    assert result.exit_code == 2 and "already exists" in result.output


def test_a_crash_inside_a_run_is_recorded_and_exits_1(tmp_path):
    # a learning rate that makes the loss diverge: the first non-finite TD error stops the run
    result = _train(
        tmp_path,
        "--name",
        "diverges",
        "--set",
        "agent.lr=1e30",
        "--set",
        "agent.max_grad_norm=null",
        "--set",
        "agent.loss=mse",
    )
    assert result.exit_code == 1, result.output
    summary = json.loads((tmp_path / "diverges" / "summary.json").read_text())
    assert summary["status"] == "failed"
    assert "the loss became" in summary["error"] and "(agent.lr=1e30) is probably too high" in summary["error"]
    assert "Traceback" in summary["traceback"]
    assert "error: run failed" in result.output


# ------------------------------------------------------------------------------------------------------------
# the command line itself: help, version, usage errors, config files and names (issues 13 and 16)


def _one_line_error(result, message):
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], result.output


def test_per_alone_prints_the_help_and_exits_0():
    result = runner.invoke(app, [])
    assert result.exit_code == 0, result.output
    assert "Usage" in result.output and "train" in result.output and "configs" in result.output


def test_version():
    from per_cli import __version__

    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"per {__version__}"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["train", "--seed", "abc"], "Invalid value for '--seed'"),
        (["grid", "--envs", "cartpole", "--workers", "0"], "Invalid value for '--workers'"),
        (["plot"], "Missing argument"),
        (["trian"], "No such command 'trian'"),
    ],
)
def test_usage_errors_are_the_tools_one_line_errors(args, message):
    result = runner.invoke(app, args)
    _one_line_error(result, message)
    assert "╭" not in result.output  # no boxed panel


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "the config is empty"),
        ("# nothing but a comment\n\n", "the config is empty"),
        ("agent:\n  lr: 0.001\nagent:\n  gamma: 0.9\n", "duplicate key 'agent' at line 3"),
        ("replay:\n  kind: uniform\n  kind: rank\n", "duplicate key 'replay.kind' at line 3"),
    ],
)
def test_bad_config_files_are_one_line_and_write_nothing(tmp_path, text, message):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    result = runner.invoke(app, ["train", "--config", str(path), "--runs-dir", str(tmp_path / "runs")])
    _one_line_error(result, message)
    assert not (tmp_path / "runs").exists()


def test_a_directory_as_config_is_named_as_one(tmp_path):
    result = runner.invoke(app, ["train", "--config", str(tmp_path), "--runs-dir", str(tmp_path / "runs")])
    _one_line_error(result, "is a directory")
    assert not (tmp_path / "runs").exists()


def test_per_configs_lists_every_shipped_config_with_its_description():
    from per_cli.config.shipped import describe, shipped_configs

    result = runner.invoke(app, ["configs"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())  # (each description wrapped beside its name)
    shipped = shipped_configs()
    assert f"{len(shipped)} configs in" in text
    for name, path in shipped.items():
        assert f"{name} {describe(path, cut=False)}" in text


def test_per_configs_name_prints_the_config_with_every_default():
    from per_cli.config import from_dict, load_config, to_dict

    result = runner.invoke(app, ["configs", "pong_per"])
    assert result.exit_code == 0, result.output
    printed = yaml.safe_load(result.output)
    assert printed == to_dict(load_config(CONFIGS / "pong_per.yaml"))  # every key, the file's values
    assert "# pong_per: Double DQN with proportional prioritized replay on Pong" in result.output
    assert from_dict(printed) == load_config(CONFIGS / "pong_per.yaml")
    _one_line_error(runner.invoke(app, ["configs", "pong_pre"]), "closest: pong_per")


TINY_PONG = ["train.total_steps=120", "train.learning_starts=60", "train.eval_every=1000", "train.eval_episodes=0",
             "replay.capacity=200", "replay.batch_size=8", "env.max_episode_steps=100", "device=cpu"]  # fmt: skip


def test_the_design_cards_pong_command_from_another_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # outside the repository: pong_per.yaml is found among the shipped configs
    sets = [arg for kv in TINY_PONG for arg in ("--set", kv)]
    result = runner.invoke(app, ["train", "--config", "pong_per.yaml", *sets, "--name", "pong", "--quiet"])
    assert result.exit_code == 0, result.output
    resolved = yaml.safe_load((tmp_path / "runs/pong/config.yaml").read_text())
    assert (resolved["env"]["id"], resolved["replay"]["kind"], resolved["train"]["total_steps"]) == (
        "pong",
        "prioritized",
        120,
    )
    assert json.loads((tmp_path / "runs/pong/summary.json").read_text())["status"] == "completed"


def test_a_local_file_shadowing_a_shipped_config_is_used_and_said(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    sets = [arg for kv in TINY_CARTPOLE for arg in ("--set", kv)]
    result = runner.invoke(app, ["train", "--config", "cartpole_per", *sets, "--name", "short", "--quiet"])
    assert result.exit_code == 0, result.output
    assert yaml.safe_load((tmp_path / "runs/short/config.yaml").read_text())["replay"]["kind"] == "prioritized"
    (tmp_path / "cartpole_per.yaml").write_text("env:\n  id: cartpole\nreplay:\n  kind: rank\n")
    result = runner.invoke(app, ["train", "--config", "cartpole_per.yaml", *sets, "--name", "mine", "--quiet"])
    assert result.exit_code == 0, result.output
    assert "note: cartpole_per.yaml is a local file; it shadows the shipped config 'cartpole_per'" in result.output
    assert yaml.safe_load((tmp_path / "runs/mine/config.yaml").read_text())["replay"]["kind"] == "rank"


def test_grid_names_are_one_folder_too(tmp_path):
    result = runner.invoke(app, ["grid", "--envs", "cartpole", "--name", "../up", "--runs-dir", str(tmp_path)])
    _one_line_error(result, "--name '../up': a name is one folder name")


def test_without_ray_the_error_gives_the_readmes_install_command(tmp_path):
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['ray'] = None\n"  # what `import ray` meets when Ray is not installed
        "from per_cli.cli import app\n"
        f"app(['grid', '--envs', 'cartpole', '--backend', 'ray', '--runs-dir', {str(tmp_path)!r}], prog_name='per')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 2, done.stderr
    assert "--backend ray needs Ray: pip install -e '.[ray]'" in done.stderr
    assert "pip install -e '.[ray]'" in (CONFIGS.parent / "README.md").read_text()


def test_a_run_that_the_numba_engine_cannot_take_says_why_once(tmp_path):
    """auto falls back to torch for a config numba does not implement (tanh), and the run says why on stderr."""
    sets = [arg for kv in TINY_CARTPOLE for arg in ("--set", kv)]
    args = ["train", "--config", str(CONFIGS / "cartpole_uniform.yaml"), *sets, "--set", "agent.activation=tanh",
            "--set", "train.total_steps=150", "--runs-dir", str(tmp_path), "--name", "fb"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert result.output.count("note: agent.engine torch:") == 1 and "agent.activation=tanh" in result.output
