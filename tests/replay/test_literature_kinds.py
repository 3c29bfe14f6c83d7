"""The two kinds from the literature do what their papers say: LaBER (Lahire et al. 2022) trains on B transitions
drawn ∝ |δ| + ε from a uniform large batch of m · B, weighted mean(p) / p_i; ReLo (Sujit et al. 2023) sets a
transition's priority to max(L_online − L_target, 0) + ε from the engine's score, new transitions at the largest
priority held. Their χ² and contract tests are the registry's (test_sampler_contract.py: every registered kind);
here their papers' rules, the preflight refusals, and real runs solo, in a cohort and under ``per grid``."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from scipy.stats import chisquare

from per_cli.config import Config, apply_override, from_dict, load_config, to_dict
from per_cli.errors import ConfigError
from per_cli.replay import KINDS, ReplayMemory
from per_cli.replay.cohort import CohortSampling
from per_cli.replay.samplers.laber import LaBERSampler
from per_cli.replay.samplers.relo import ReLoSampler
from per_cli.replay.storage.ring import ONE, TransitionStorage
from per_cli.rl.results import Scores
from per_cli.train.preflight import check_scoring
from tests.rl.test_engines import OBS_DIM, make_agent

from ..conftest import CONFIGS
from ..train.checkpoints.test_checkpoint import _rows

SHORT = ["train.total_steps=300", "train.total_episodes=null", "train.eval_episodes=1", "log.tensorboard=false"]


def _memory(kind: str, seed: int = 1, added: int = 200, capacity: int = 150, obs_dim: int = 3) -> ReplayMemory:
    data = to_dict(Config())
    for key, value in {"replay.kind": kind, "replay.capacity": capacity, "replay.batch_size": 16}.items():
        apply_override(data, key, value)
    cfg = from_dict(data)
    store = TransitionStorage(capacity, (obs_dim,), np.float32)
    memory = ReplayMemory(store, KINDS[kind].build(cfg.replay, store, np.random.default_rng(seed)))
    rng = np.random.default_rng(100 + seed)
    for i in range(added):  # wraps; episodes of 9
        obs, next_obs = rng.normal(size=obs_dim), rng.normal(size=obs_dim)
        memory.add(obs, int(rng.integers(2)), float(3 * rng.normal()), next_obs, i % 9 == 8, False)
    return memory


def test_laber_draws_a_uniform_large_batch_of_m_times_b():
    """The loop's draw for LaBER is m · B = 64 slots (replay.params.m 4, B 16), uniform over the 150 held: χ²."""
    memory = _memory("laber")
    assert memory.sampler.multiple == 4
    sampling, draws = CohortSampling([memory]), 2000
    counts = np.zeros(150)
    for _ in range(draws):
        (batch,) = sampling.sample([0], 16 * memory.sampler.multiple, [1.0])
        assert batch.indices.shape == (64,) and (batch.weights == 1).all()
        np.add.at(counts, batch.indices % 150, 1)
    assert chisquare(counts, np.full(150, draws * 64 / 150)).pvalue > 1e-4


def test_laber_trains_on_b_drawn_in_proportion_to_abs_td_with_mean_over_priority_weights():
    """Two members' large batches scored by hand: each member's sub-batch is B rows of its own large batch, drawn
    ∝ |δ| + ε (χ² over 2,000 sub-draws) and weighted mean_j(|δ_j| + ε) / (|δ_i| + ε) (LaBER-mean)."""
    memories = [_memory("laber", seed=s) for s in (1, 2)]
    sampling, eps, rng = CohortSampling(memories), memories[0].sampler.eps, np.random.default_rng(5)
    large = sampling.sample([0, 1], 64, [1.0, 1.0])
    td = (rng.normal(size=(2, 64)) * rng.choice([0.01, 1.0, 10.0], size=(2, 64))).astype(np.float32)
    scores = Scores(td, np.zeros_like(td), np.zeros_like(td))
    p = np.abs(td.astype(np.float64)) + eps
    which, lists = np.array([0, 1]), sampling._lists
    states = [m.sampler.rng.bit_generator.state for m in memories]
    kept = sampling.scored([0, 1], large, scores)  # (the loop's call)
    for memory, state in zip(memories, states, strict=True):
        memory.sampler.rng.bit_generator.state = state
    positions, weights = LaBERSampler.scored(lists, which, large.arrays.indices, scores)  # (the same draw)
    for k in range(2):
        for name in ("obs", "actions", "rewards", "indices", "ages"):
            np.testing.assert_array_equal(getattr(kept[k], name), getattr(large[k], name)[positions[k]])
        np.testing.assert_array_equal(kept[k].weights, weights[k])
    counts, draws = np.zeros((2, 64)), 2000
    for _ in range(draws):
        positions, weights = LaBERSampler.scored(lists, which, large.arrays.indices, scores)
        assert positions.shape == weights.shape == (2, 16)
        for k in range(2):
            np.testing.assert_allclose(weights[k], (p[k].mean() / p[k])[positions[k]], rtol=1e-5)
            np.add.at(counts[k], positions[k], 1)
    for k in range(2):
        assert chisquare(counts[k], draws * 16 * p[k] / p[k].sum()).pvalue > 1e-4


@pytest.mark.parametrize("engine", ["numba", "torch"])
def test_relo_priorities_are_the_reducible_loss_from_the_engines_score(engine):
    """A hand-made batch scored by the engine (online and target networks apart): each drawn transition's leaf is
    (max(L_online − L_target, 0) + ε)^α; δ from an update sets nothing; a new transition enters at the max."""
    agent, memory = make_agent(engine), _memory("relo", obs_dim=OBS_DIM)
    sampler = memory.sampler
    batch = memory.sample(16, 0.5)
    scores = agent.score(batch)
    reducible = scores.loss[0] - scores.target_loss[0]
    assert (reducible > 0).any() and (reducible < 0).any()  # (both sides of the clip are exercised)
    assert ReLoSampler.scored(memory.lists, ONE, batch.indices.reshape(1, -1), scores) is None
    priority = (np.maximum(reducible.astype(np.float64), 0.0) + sampler.eps) ** sampler.alpha
    want = dict(zip(batch.indices.tolist(), priority.tolist(), strict=True))  # (a repeated id: its last value)
    leaves = sampler.tree.values()
    np.testing.assert_allclose([leaves[i % 150] for i in want], list(want.values()), rtol=1e-6)
    memory.update_priorities(batch.indices, np.full(16, 50.0, dtype=np.float32))  # (δ is not ReLo's priority)
    np.testing.assert_array_equal(sampler.tree.values(), leaves)
    memory.add(np.zeros(OBS_DIM), 0, 0.0, np.zeros(OBS_DIM), False, False)
    assert sampler.tree.values()[memory.storage.latest_slot] == pytest.approx(sampler.tree.max)


def _per(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "per_cli", *args], capture_output=True, text=True, timeout=timeout)


def _sets(items) -> list[str]:
    return [arg for kv in items for arg in ("--set", kv)]


@pytest.mark.parametrize(
    ("kind", "sets", "says"),
    [
        ("relo", ["replay.initial_priority=td_error"], "replay.initial_priority: kind relo sets priorities from"),
        ("laber", ["replay.params.m=0"], "replay.params.m: 0 is out of range; must be in [1, 1024]"),
        ("laber", ["replay.params.k=2"], "replay.params.k: not a parameter of replay.kind laber"),
    ],
)
def test_what_a_scoring_kind_cannot_serve_is_one_line_and_exit_2(kind, sets, says, tmp_path):
    done = _per("train", "--config", f"seed001/cartpole_{kind}", "--runs-dir", str(tmp_path), *_sets(sets))
    assert done.returncode == 2, done.stderr
    assert says in done.stderr and "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("kind", ["laber", "relo"])
def test_device_frames_are_refused_for_a_kind_that_scores_on_the_host(kind):
    cfg = load_config(CONFIGS / "seed001" / f"cartpole_{kind}.yaml", ["replay.device_frames=true"], device="cpu")
    with pytest.raises(ConfigError, match=f"^replay.device_frames: kind {kind} scores its batches on the host"):
        check_scoring(cfg, KINDS[kind])
    per = load_config(CONFIGS / "seed001" / "cartpole_per.yaml", ["replay.device_frames=true"], device="cpu")
    check_scoring(per, KINDS["prioritized"])  # (a kind that does not score: nothing to refuse here)


@pytest.mark.parametrize("kind", ["laber", "relo"])
def test_a_literature_kind_runs_solo_and_in_a_cohort_each_member_its_solo_run(kind, tmp_path):
    """Numba engine: seeds 1-3 in one cohort, member 2 equal to its solo run row by row; torch engine: a cohort
    of 2 completes (both engines serve the score phase)."""
    config = f"seed001/cartpole_{kind}"
    solo = _per("train", "--config", config, "--seed", "2", "--runs-dir", str(tmp_path / "solo"), *_sets(SHORT))
    assert solo.returncode == 0, solo.stderr
    cohort = _per("train", "--config", config, "--seeds", "1-3", "--runs-dir", str(tmp_path / "c"), *_sets(SHORT))
    assert cohort.returncode == 0, cohort.stderr
    (solo_dir,) = (tmp_path / "solo").iterdir()
    member = next(d for d in (tmp_path / "c").iterdir() if "__s2__" in d.name)
    summary = json.loads((member / "summary.json").read_text())
    assert (summary["status"], summary["replay"], summary["updates"]) == ("completed", kind, 300 - 63)
    assert _rows(member) == _rows(solo_dir)
    torch_runs = _per("train", "--config", config, "--seeds", "1-2", "--runs-dir", str(tmp_path / "t"),
                      *_sets([*SHORT, "agent.engine=torch"]))  # fmt: skip
    assert torch_runs.returncode == 0, torch_runs.stderr
    for run in (tmp_path / "t").iterdir():
        assert json.loads((run / "summary.json").read_text())["status"] == "completed"


def test_both_literature_kinds_run_under_per_grid(tmp_path):
    args = ["grid", "--configs-dir", str(CONFIGS / "seed001"), "--envs", "cartpole", "--replays", "laber,relo"]
    done = _per(*args, "--seeds", "1", "--workers", "2", "--runs-dir", str(tmp_path), *_sets(SHORT))
    assert done.returncode == 0, done.stderr
    (grid,) = tmp_path.iterdir()
    for kind in ("laber", "relo"):
        summary = json.loads((grid / f"cartpole__{kind}__s1" / "summary.json").read_text())
        assert (summary["status"], summary["replay"]) == ("completed", kind)
