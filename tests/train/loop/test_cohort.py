"""Cohorts: S seeds trained in lockstep in one process, each still a run of its own.

Each member's RNG streams come from its own seed only and its update is the solo kernel on its own buffers, so
the strongest check holds: every member of a cohort computes exactly what its solo run computes (which also
makes the seeds independent of each other and a cohort reproducible)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from per_cli.cli import app
from per_cli.config import ConfigError, load_config
from per_cli.config.seeds import parse_seeds
from per_cli.envs.batch import PooledBatch, env_batch
from per_cli.replay.cohort import CohortSampling
from per_cli.replay.store import RingStore
from per_cli.rl.engines.stacked import CPU_MIN_MEMBERS
from per_cli.train.loop import reporting
from per_cli.train.loop.alive import Alive
from per_cli.train.loop.cohort import Cohort, cohort_configs
from per_cli.train.loop.steps import Steps
from per_cli.train.loop.stopping import RunInterrupted, SignalStop
from per_cli.train.loop.trainer import build_member, run_member

from ...conftest import CONFIGS, TINY_CARTPOLE
from ...test_cli import check_run_contract
from ..checkpoints.test_checkpoint import AS_WRITTEN, CHECKPOINTED, _params, _rows, _scalars


def _seeds(engine: str, first: int = 1) -> list[int]:
    """Two seeds, or for the torch engine as many as its stacked engine serves on the CPU (``CPU_MIN_MEMBERS``)."""
    return list(range(first, first + (2 if engine == "numba" else CPU_MIN_MEMBERS)))


def _configs(seeds, *extra):
    cfg = load_config(CONFIGS / "cartpole_uniform.yaml", [*TINY_CARTPOLE, *extra], device="cpu")
    return cohort_configs(cfg, seeds)


@pytest.mark.parametrize(
    ("kind", "engine"),
    [
        ("uniform", "auto"),
        ("prioritized", "numba"),
        ("prioritized,td_error", "numba"),
        ("prioritized,window", "numba"),
        ("rank", "numba"),
        ("rank,window", "numba"),
        ("none", "auto"),
        ("combined", "auto"),
        ("none,phases", "auto"),
        ("combined,phases", "auto"),
        ("prioritized,as_written", "numba"),
        ("rank,as_written", "numba"),
        ("uniform,as_written", "auto"),
        ("lap", "numba"),
        ("pal", "numba"),
        ("uniform,chunk", "auto"),
        ("rank,chunk", "numba"),
        ("prioritized,nstep", "numba"),
        ("combined,nstep", "auto"),
    ],
)  # fmt: skip (the torch engine's cohort: test_a_torch_cohort_member_matches_its_solo_run)
def test_every_member_of_a_cohort_equals_its_solo_run(tmp_path, monkeypatch, kind, engine):
    kind, _, variant = kind.partition(",")  # td_error: the batched insertion TD errors; phases: 3 updates a phase
    extra = {  # window: the draws inside replay.window (active from step 64 on), compiled too
        "td_error": ["replay.initial_priority=td_error"],
        "window": ["replay.window=64", "replay.alpha=0.7"],
        "phases": ["train.train_freq=8", "train.gradient_steps=3"],
        "as_written": AS_WRITTEN,  # configs/seed001-asis's knobs: the stored reward and flag, β by batch, IS rule
        "chunk": ["replay.chunk=8"],  # runs of 8 consecutive transitions, their starts the kind's
        "nstep": ["replay.n_step=3"],  # 3-step returns summed at the draw
    }.get(variant, [])
    cfgs = _configs([2, 3], f"replay.kind={kind}", f"agent.engine={engine}", *extra)
    draws = []  # the batches the cohort's compiled draw served (the rest: each member's own)
    original = CohortSampling.sample
    monkeypatch.setattr(CohortSampling, "sample", lambda *args: draws.append(original(*args)) or draws[-1])
    cohort = Cohort(cfgs)
    summaries = cohort.run([tmp_path / f"cohort{c.seed}" for c in cfgs])
    assert [s["status"] for s in summaries] == ["completed", "completed"]
    assert summaries[0]["engine"] == summaries[1]["engine"]
    assert engine == "auto" or summaries[0]["engine"] == engine
    assert cohort.note is None
    for cfg, member in zip(cfgs, cohort.members, strict=True):
        solo = build_member(cfg)
        solo_summary = run_member(solo, tmp_path / f"solo{cfg.seed}")
        run = tmp_path / f"cohort{cfg.seed}"
        assert _rows(run) == _rows(tmp_path / f"solo{cfg.seed}"), cfg.seed
        assert _scalars(run) == _scalars(tmp_path / f"solo{cfg.seed}"), cfg.seed
        for key in ("engine", "total_steps", "episodes", "updates", "final_return_mean", "eval_return_mean"):
            assert summaries[cohort.members.index(member)][key] == solo_summary[key], key
        for a, b in zip(_params(member), _params(solo), strict=True):
            np.testing.assert_array_equal(a, b)
    assert _rows(tmp_path / "cohort2") != _rows(tmp_path / "cohort3")  # the seeds differ
    assert sum(batch is not None for draw in draws for batch in draw) > 100  # the compiled draw served them


def test_a_members_run_is_the_same_alone_among_7_and_among_100(tmp_path):
    """Seed 5's metrics.csv, TensorBoard scalars and final weights: identical when it trains alone (S = 1), in a
    cohort of 7 and in a cohort of 100 (numba engine: the cohort's compiled calls), and at another place in the
    cohort's order."""
    extra = ["agent.engine=numba", "replay.kind=prioritized", "log.every=20"]
    solo_cfg = _configs([5], *extra)[0]
    solo = build_member(solo_cfg)
    run_member(solo, tmp_path / "solo")
    for name, seeds in (("s7", [9, 2, 5, 1, 7, 3, 4]), ("s100", list(range(100, 0, -1)))):
        cfgs = _configs(seeds, *extra)
        cohort = Cohort(cfgs)
        summaries = cohort.run([tmp_path / f"{name}-{c.seed}" for c in cfgs])
        assert all(s["status"] == "completed" for s in summaries)
        run, member = tmp_path / f"{name}-5", cohort.members[seeds.index(5)]
        assert _rows(run) == _rows(tmp_path / "solo"), name
        assert _scalars(run) == _scalars(tmp_path / "solo"), name
        for a, b in zip(_params(member), _params(solo), strict=True):
            np.testing.assert_array_equal(a, b)


# what a member's update writes to metrics.csv; the stacked torch update gives these to float32 rounding
UPDATE_MEASURES = ("loss", "q_values", "td_error_max", "td_error_mean", "td_loss_unweighted")


def _assert_matches_solo_run(run_dir, solo_dir, member, solo) -> None:
    """A torch cohort member against its solo run: the same episodes, returns and evaluation (metrics.csv rows
    equal but for the update measures), those measures and the final weights to rtol 1e-4."""
    rows, solo_rows = _rows(run_dir), _rows(solo_dir)
    assert len(rows) == len(solo_rows)
    for row, solo_row in zip(rows, solo_rows, strict=True):
        assert {k: v for k, v in row.items() if k not in UPDATE_MEASURES} == {
            k: v for k, v in solo_row.items() if k not in UPDATE_MEASURES
        }
        for key in UPDATE_MEASURES:
            if solo_row[key]:
                assert float(row[key]) == pytest.approx(float(solo_row[key]), rel=1e-4, abs=1e-6), key
    for a, b in zip(_params(member), _params(solo), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_a_torch_cohort_updates_stacked_and_each_member_matches_its_solo_run(tmp_path):
    """Under the torch engine the members update in one stacked call (per_cli/rl/engines/stacked.py), equal to
    their own updates to float32 rounding (bit-identical for this MLP on the machine it was measured on, but a
    batched matmul may sum in another order elsewhere). Rounding differences that small do not change an action
    over this short run: the episodes, returns, evaluation and counters are those of the solo runs exactly; the
    update measures and the final weights agree to rtol 1e-4."""
    cfgs = _configs(_seeds("torch", first=2), "agent.engine=torch")
    cohort = Cohort(cfgs)
    assert cohort.note is None  # the stacked path, not one update per member
    summaries = cohort.run([tmp_path / f"cohort{c.seed}" for c in cfgs])
    for cfg, member, summary in zip(cfgs, cohort.members, summaries, strict=True):
        solo = build_member(cfg)
        solo_summary = run_member(solo, tmp_path / f"solo{cfg.seed}")
        for key in ("status", "engine", "total_steps", "episodes", "updates", "final_return_mean", "eval_return_mean"):
            assert summary[key] == solo_summary[key], key
        _assert_matches_solo_run(tmp_path / f"cohort{cfg.seed}", tmp_path / f"solo{cfg.seed}", member, solo)
    assert summaries[0]["engine"] == "torch"


@pytest.mark.parametrize("engine", ["numba", "torch"])  # torch: the stacked update goes on with the others' rows
def test_a_seed_whose_loss_turns_nan_fails_alone(tmp_path, engine):
    cfgs = _configs(_seeds(engine), f"agent.engine={engine}")
    cohort = Cohort(cfgs)
    assert cohort.note is None  # one batched update per step, numba's or the stacked torch one
    for p in cohort.members[0].agent.q_net.parameters():  # seed 1's network: its first loss is NaN
        p.data.fill_(np.nan)
    bad, good, *others = cohort.run([tmp_path / f"s{c.seed}" for c in cfgs])
    assert bad["status"] == "failed" and "the loss became nan at step 100" in bad["error"]
    assert json.loads((tmp_path / "s1" / "summary.json").read_text())["status"] == "failed"
    assert all(s["status"] == "completed" and s["updates"] > 0 for s in (good, *others))
    alive = cohort.members[0].alive.loop  # the loop's mask over the seed axis: seed 1's row off, once
    assert cohort.members[1].alive.loop is alive and alive.failed == 1
    assert alive.mask.tolist() == [False] + [True] * (len(cfgs) - 1)
    solo = build_member(cfgs[1])
    run_member(solo, tmp_path / "solo2")
    if engine == "numba":
        assert _rows(tmp_path / "s2") == _rows(tmp_path / "solo2")  # the other seed went on, unaffected
    else:
        _assert_matches_solo_run(tmp_path / "s2", tmp_path / "solo2", cohort.members[1], solo)


def test_a_seed_whose_insertion_td_error_is_nan_fails_alone(tmp_path):
    cfgs = _configs([1, 2], "agent.engine=numba", "replay.kind=prioritized", "replay.initial_priority=td_error")
    cohort = Cohort(cfgs)
    cohort.members[1].agent.numba_engine.params[:] = np.nan  # seed 2: its first insertion TD error is NaN
    good, bad = cohort.run([tmp_path / "s1", tmp_path / "s2"])
    assert bad["status"] == "failed" and "non-finite TD error in a priority update" in bad["error"]
    assert bad["total_steps"] == 0 and not _rows(tmp_path / "s2")
    run_member(build_member(cfgs[0]), tmp_path / "solo1")
    assert good["status"] == "completed" and _rows(tmp_path / "s1") == _rows(tmp_path / "solo1")


@pytest.mark.parametrize("engine", ["numba", "torch"])  # torch: the stacked update, rebuilt on resume
def test_a_killed_cohort_resumes_each_seed_exactly(tmp_path, monkeypatch, engine):
    cfgs = _configs(_seeds(engine), *CHECKPOINTED, f"agent.engine={engine}")
    whole = Cohort(cfgs)
    assert whole.note is None  # one batched update per step, numba's or the stacked torch one
    whole.run([tmp_path / f"whole{c.seed}" for c in cfgs])

    original = Steps.step_envs

    def killed_at_380(self, members, actions):
        if members[0].state.step == 380:
            raise RunInterrupted(15)  # SIGTERM, as the signal handler raises it
        return original(self, members, actions)

    monkeypatch.setattr(Steps, "step_envs", killed_at_380)
    split = [tmp_path / f"split{c.seed}" for c in cfgs]
    with pytest.raises(RunInterrupted):
        Cohort(cfgs).run(split)
    monkeypatch.undo()
    assert {json.loads((d / "summary.json").read_text())["status"] for d in split} == {"interrupted"}

    resumed = Cohort(cfgs)
    resumed.resume(split)
    summaries = resumed.run(split)
    assert [s["resumed_from_step"] for s in summaries] == [300] * len(cfgs)
    for cfg, member, whole_member in zip(cfgs, resumed.members, whole.members, strict=True):
        assert _rows(tmp_path / f"split{cfg.seed}") == _rows(tmp_path / f"whole{cfg.seed}")
        for a, b in zip(_params(member), _params(whole_member), strict=True):
            np.testing.assert_array_equal(a, b)


def test_per_train_seeds_writes_one_run_directory_per_seed(tmp_path):
    sets = [arg for kv in TINY_CARTPOLE for arg in ("--set", kv)]
    args = ["train", "--config", str(CONFIGS / "cartpole_uniform.yaml"), *sets, "--runs-dir", str(tmp_path)]
    result = CliRunner().invoke(app, [*args, "--seeds", "4-5", "--quiet"])
    assert result.exit_code == 0, result.output
    runs = sorted(tmp_path.iterdir())
    assert [r.name.split("__")[:3] for r in runs] == [["cartpole", "uniform", "s4"], ["cartpole", "uniform", "s5"]]
    for seed, run in zip((4, 5), runs, strict=True):
        check_run_contract(run, seed=seed, total_steps=400)
        assert yaml.safe_load((run / "config.yaml").read_text())["seed"] == seed

    for bad, message in ((["--seeds", "3-1"], "empty"), (["--seeds", "1,2", "--seed", "4"], "drop --seed")):
        refused = CliRunner().invoke(app, [*args, *bad])
        assert refused.exit_code == 2 and message in refused.output and "Traceback" not in refused.output
    assert sorted(tmp_path.iterdir()) == runs  # nothing written


def test_seed_lists_and_what_a_cohort_refuses():
    assert parse_seeds("1-3,7") == [1, 2, 3, 7] and parse_seeds("5") == [5]
    for bad in ("1-", "a", "2,2", "1-3,3"):
        with pytest.raises(ConfigError, match="--seeds"):
            parse_seeds(bad)
    cfgs = _configs([1, 2])
    cfgs[1] = load_config(CONFIGS / "cartpole_uniform.yaml", [*TINY_CARTPOLE, "agent.lr=0.5"], seed=2, device="cpu")
    with pytest.raises(ConfigError, match="differ only in the seed; seed 2 differs in agent"):
        Cohort(cfgs)


def test_the_batched_phases_serve_an_envpool_cohort_and_a_seed_that_fails_in_them_leaves_alone(tmp_path, monkeypatch):
    """With EnvPool envs and uniform memories the cohort takes every step's phases as vectors (ε's draws, the
    env step and the stores, the counters, the due checks; per_cli/train/loop/steps.py). A member whose own phase
    raises in the middle of them fails alone; the other is its solo run. (EnvPool is an optional extra: skipped
    without it.)"""
    pytest.importorskip("envpool")
    cfgs = _configs([1, 2], "env.backend=envpool", "agent.engine=numba")
    cohort = Cohort(cfgs)
    batch = env_batch([m.env for m in cohort.members], np.zeros(4, np.float32), SignalStop().interrupt_behind)
    assert type(cohort.steps().sampling.storer) is RingStore and isinstance(batch, PooledBatch)  # (EnvPool's step)
    bad = cohort.members[0]
    own_log_point, failed_at = reporting.log_point, []

    def log_point(member):  # (the loop logs a member only at its log points: every log.every updates)
        if member is bad and bad.state.step >= 151:
            failed_at.append(bad.state.step)
            raise ValueError("a broken update window")
        own_log_point(member)

    monkeypatch.setattr(reporting, "log_point", log_point)
    first, second = cohort.run([tmp_path / "c1", tmp_path / "c2"])
    assert first["status"] == "failed" and "a broken update window" in first["error"]
    assert failed_at and first["total_steps"] == failed_at[0]
    monkeypatch.undo()
    run_member(build_member(cfgs[1]), tmp_path / "solo2")
    assert second["status"] == "completed" and _rows(tmp_path / "c2") == _rows(tmp_path / "solo2")


def test_the_loop_holds_the_observations_in_hand_as_one_array_each_members_obs_its_row():
    """``Steps.begin``: the members' observations become the rows of one (S, ...) array; each member's ``obs``
    reads and writes its row in place (a checkpoint saves it, a resume sets it), and refuses an observation of
    another shape in one line."""
    cohort = Cohort(_configs([1, 2]))
    for member in cohort.members:
        member.obs = member.env.reset(seed=member.cfg.seed)[0]
    first = [member.obs.copy() for member in cohort.members]
    steps = cohort.steps()
    steps.begin(Alive.over(cohort.members), SignalStop())
    assert steps.obs.shape == (2, 4) and steps.obs.dtype == np.float32
    for k, member in enumerate(cohort.members):
        np.testing.assert_array_equal(member.obs, first[k])
        assert np.shares_memory(member.obs, steps.obs)
    steps.obs[1] = 7.0
    np.testing.assert_array_equal(cohort.members[1].obs, np.full(4, 7.0, np.float32))
    cohort.members[0].obs = np.arange(4.0)
    np.testing.assert_array_equal(steps.obs[0], np.arange(4.0))
    with pytest.raises(ValueError, match=r"an observation of shape \(3,\) where the env's are \(4,\)"):
        cohort.members[0].obs = np.zeros(3)
