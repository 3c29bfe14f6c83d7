"""configs/seed001: the seed notebook's protocol, one file per env and replay kind. Each loads, holds the
protocol's settings, and runs a few episodes."""

from __future__ import annotations

import numpy as np
import pytest

from per_cli.config import load_config
from per_cli.train.loop.trainer import build_member, run_member

from ..conftest import CONFIGS

SEED001 = CONFIGS / "seed001"
FILES = sorted(SEED001.glob("*.yaml"))
KINDS = {"none": "none", "uniform": "uniform", "combined": "combined", "per": "prioritized", "rank": "rank"}
# the kinds from the literature, on CartPole alone (docs/results/literature): not part of the notebook's grid
LITERATURE = {"laber": "laber", "relo": "relo"}


def test_one_file_per_env_and_kind():
    names = {p.stem for p in FILES}
    notebook = {f"{env}_{kind}" for env in ("cartpole", "acrobot", "mountaincar") for kind in KINDS}
    assert names == notebook | {f"cartpole_{kind}" for kind in LITERATURE}


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_a_seed001_config_holds_the_protocol_and_runs_a_few_episodes(path, tmp_path):
    first = path.read_text().splitlines()[0]
    assert first.startswith("# The seed notebook's protocol: ") and len(first) <= 120  # `per configs` lists it
    cfg = load_config(path, device="cpu")
    a, r, t = cfg.agent, cfg.replay, cfg.train
    assert r.kind == {**KINDS, **LITERATURE}[path.stem.split("_")[1]]
    assert (a.hidden_sizes, a.gamma, a.lr, r.batch_size, r.capacity) == ([128], 0.8, 1e-3, 64, 10_000)
    assert (t.total_episodes, t.learning_starts, t.train_freq, t.gradient_steps) == (300, 64, 1, 1)
    assert a.target_update_on_episode_end and a.target_update_period > t.total_steps
    if r.kind in ("prioritized", "rank", "relo"):
        assert (r.alpha, r.beta0, r.beta_end_step) == (0.6, 0.4, None)
    if cfg.env.id == "cartpole":
        assert cfg.env.max_episode_steps == 200  # CartPole-v0's limit

    short = load_config(path, ["train.total_episodes=8", "train.total_steps=150", "train.eval_episodes=1"],
                        device="cpu")  # fmt: skip
    member = build_member(short)
    steps = np.arange(2000)
    assert [member.epsilon(int(s)) for s in steps] == pytest.approx(np.maximum(1 - steps / 1000, 0.05))
    summary = run_member(member, tmp_path / path.stem)
    assert summary["status"] == "completed"
    assert summary["episodes"] == 8 or summary["total_steps"] == 150  # the first budget reached
    assert summary["updates"] == max(summary["total_steps"] - 63, 0)  # one update per step from the 64th
    assert summary["target_syncs"] == summary["episodes"]
