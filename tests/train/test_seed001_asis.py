"""configs/seed001-asis: the seed notebook exactly as written, one file per env and replay kind beside
configs/seed001. Each header lists every difference from its seed001 twin (checked key by key), each holds the
notebook's rules, and each runs a few episodes."""

from __future__ import annotations

import re

import pytest

from per_cli.analysis.runs import flatten
from per_cli.config import load_config, to_dict
from per_cli.train.loop.trainer import build_member, run_member

from ..conftest import CONFIGS
from .test_seed001 import FILES as SEED001_FILES
from .test_seed001 import LITERATURE

ASIS = CONFIGS / "seed001-asis"
FILES = sorted(ASIS.glob("*.yaml"))
STEPS = {"cartpole": 60_000, "acrobot": 150_000, "mountaincar": 60_000}  # 300 episodes × the time limit


def _header(path) -> str:
    lines = path.read_text().splitlines()
    body = next(i for i, line in enumerate(lines) if not line.startswith("#"))
    return "\n".join(lines[:body])


def test_the_same_files_as_seed001():
    notebook = [p.name for p in SEED001_FILES if p.stem.split("_")[1] not in LITERATURE]  # (no as-written twin)
    assert [p.name for p in FILES] == notebook


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_the_header_names_every_key_that_differs_from_seed001(path):
    mine = flatten(to_dict(load_config(path)))
    theirs = flatten(to_dict(load_config(CONFIGS / "seed001" / path.name)))
    differ = sorted(k for k in mine if mine[k] != theirs[k])
    assert differ  # (the folder exists for its differences)
    header = _header(path)
    named = set(re.findall(r"\b((?:env|agent|replay|train|log|metrics)\.[a-z_]+)\b", header))
    for key in differ:
        assert key in named, f"{path.name}: {key} differs from seed001 ({theirs[key]!r} -> {mine[key]!r})"
    assert f"configs/seed001/{path.name}" in header
    first = header.splitlines()[0]
    assert first.startswith("# The seed notebook as written: ") and len(first) <= 120  # `per configs` lists it


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_a_config_holds_the_notebooks_rules_and_runs_a_few_episodes(path, tmp_path):
    env_name, kind = path.stem.split("_")
    cfg = load_config(path, device="cpu")
    e, r = cfg.env, cfg.replay
    assert (e.done_reward, e.done_reward_except_return, e.truncation_terminates) == (-10.0, 499.0, True)
    if kind in ("per", "rank"):
        assert (r.beta0, r.beta_increment, r.beta_end_step, r.is_weights) == (0.4, 0.001, None, "off")
        assert (r.alpha, r.priority_eps, r.initial_priority, r.capacity) == (0.6, 0.01, "td_error", 10_000)
    else:  # the notebook's list memory: never drops a transition
        assert r.capacity >= cfg.train.total_steps == STEPS[env_name]
    short = load_config(path, ["train.total_episodes=3", "train.eval_episodes=1"], device="cpu")
    summary = run_member(build_member(short), tmp_path / path.stem)
    assert summary["status"] == "completed" and summary["episodes"] == 3
