"""`per grid` re-run over a run whose checkpoint is refused (issue 45): a crafted trainer.pt never runs, the run's
files are set aside untouched (never deleted), the run is recorded failed with why and where its files went, and
the grid exits 1 instead of quietly starting the run over (--retry-failed starts it again, as any failed run)."""

from __future__ import annotations

import json
import os
import shlex
import shutil

import pytest
import torch

from per_cli.train.checkpoints.safe_read import FORMAT_VERSION

from ..conftest import CONFIGS
from .test_grid import TINY, _grid, _sets, _summary


@pytest.fixture
def configs(tmp_path):
    d = tmp_path / "configs"
    d.mkdir()
    shutil.copy(CONFIGS / "cartpole_uniform.yaml", d)
    return d


class RunsAShellCommand:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {shlex.quote(str(self.marker))}",))


def test_a_crafted_checkpoint_in_a_grid_is_set_aside_and_reported_not_run(configs, tmp_path):
    runs, marker = tmp_path / "runs", tmp_path / "pwned"
    args = ["--envs", "cartpole", "--replays", "uniform", "--seeds", "1", "--workers", "1", "--name", "g",
            *_sets([*TINY, "train.checkpoint_every=100"])]  # fmt: skip
    assert _grid(configs, runs, *args).returncode == 0
    run_dir = runs / "g" / "cartpole__uniform__s1"
    summary = _summary(run_dir)
    (run_dir / "summary.json").write_text(json.dumps({**summary, "status": "interrupted"}))  # to be resumed
    crafted = run_dir / "checkpoints" / "step_000000000300" / "trainer.pt"
    torch.save({"format": FORMAT_VERSION, "loop": RunsAShellCommand(marker)}, crafted)
    payload = crafted.read_bytes()

    again = _grid(configs, runs, *args)
    assert not marker.exists()  # the payload never ran
    assert again.returncode == 1, again.stderr
    (aside,) = (runs / "g" / ".set-aside").iterdir()
    assert (aside / "checkpoints" / "step_000000000300" / "trainer.pt").read_bytes() == payload  # kept, untouched
    error = _summary(run_dir)["error"]
    assert _summary(run_dir)["status"] == "failed" and error.startswith("checkpoint refused: ")
    assert "system" in error and f"its files were moved to {aside}" in error
    assert "checkpoint refused" in again.stdout + again.stderr
    assert sorted(p.name for p in run_dir.iterdir()) == ["config.yaml", "summary.json"]  # not trained again



def test_a_damaged_checkpoint_is_set_aside_and_its_run_started_again(tmp_path):
    """A checkpoint that is only damaged (cut short: no code in it) is not a refusal: the run starts again, and
    the damaged files are moved aside, never deleted."""
    from per_cli.config import load_config, to_dict
    from per_cli.sweep.worker import decide, execute_run
    from per_cli.train.loop.trainer import build_member, run_member

    cfg = load_config(CONFIGS / "cartpole_uniform.yaml", [*TINY, "train.checkpoint_every=100"], device="cpu")
    run_dir = tmp_path / "g" / "run"
    run_member(build_member(cfg), run_dir)
    (run_dir / "summary.json").write_text(json.dumps({**_summary(run_dir), "status": "interrupted"}))
    trainer_pt = run_dir / "checkpoints" / "step_000000000300" / "trainer.pt"
    trainer_pt.write_bytes(trainer_pt.read_bytes()[:100])
    payload = {"name": "run", "run_dir": str(run_dir), "replay": "uniform", "config": to_dict(cfg),
               "retry_failed": False}  # fmt: skip
    assert decide(payload, run_dir) == "resume"  # (damaged, not refused)
    result = execute_run(payload, run_dir, "resume")
    (aside,) = (tmp_path / "g" / ".set-aside").iterdir()
    assert result["status"] == "completed" and f"its files moved to {aside}; started again" in result["note"]
    assert len((aside / "checkpoints" / "step_000000000300" / "trainer.pt").read_bytes()) == 100
    assert "resumed_from_step" not in _summary(run_dir)
