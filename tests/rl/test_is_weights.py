"""``replay.is_weights`` (per_cli/rl/is_weights.py): each rule's weights against brute force from the sampler's
own probabilities, and the loop applying the rule to the loss (solo and in a cohort's stacked draw)."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from per_cli.config import load_config
from per_cli.replay.samplers import PrioritizedSampler, RankSampler
from per_cli.rl.is_weights import IS_WEIGHT_RULES, apply_rule
from per_cli.train.loop.cohort import Cohort, cohort_configs
from per_cli.train.loop.trainer import build_member, run_member

from ..conftest import CONFIGS, TINY_CARTPOLE
from ..replay.test_samplers import memory_with


def _brute_force(rule: str, probabilities: np.ndarray, held: int, slots: np.ndarray, beta: float) -> np.ndarray:
    """The weights of the batch ``slots`` by the definition: w_i = (N·P(i))^-β, then the rule's normaliser."""
    raw = (held * probabilities) ** -beta
    w = raw[slots]
    return {
        "memory_max": w / raw[probabilities > 0].max(),
        "batch_max": w / w.max(),
        "batch_mean": w / w.mean(),
        "off": np.ones_like(w),
    }[rule]


@pytest.mark.parametrize("sampler", [PrioritizedSampler, RankSampler])
@pytest.mark.parametrize("rule", IS_WEIGHT_RULES)
def test_each_rule_gives_the_weights_of_its_definition(sampler, rule):
    memory = memory_with(sampler, 200, alpha=0.7)
    rng = np.random.default_rng(3)
    memory.update_priorities(np.arange(200), rng.exponential(1.0, 200) * rng.choice([1, 30], 200))
    probabilities = memory.sampler.expected_counts(1)
    for beta in (0.4, 1.0):
        batch = memory.sample(32, beta)
        weights = batch.weights.copy()
        apply_rule(weights, rule)
        want = _brute_force(rule, probabilities, len(memory), batch.indices % memory.storage.capacity, beta)
        np.testing.assert_allclose(weights, want, rtol=2e-5)
        assert weights.dtype == np.float32
    if rule == "batch_mean":
        assert weights.mean() == pytest.approx(1.0, rel=1e-6)


def test_a_stacked_draw_gets_each_rows_own_rule():
    """Rows (a cohort's stacked weights) are normalised each by its own batch, as one batch alone is."""
    rng = np.random.default_rng(0)
    stacked = rng.uniform(0.05, 1.0, size=(5, 64)).astype(np.float32)
    for rule in IS_WEIGHT_RULES:
        whole = stacked.copy()
        apply_rule(whole, rule)
        for k in range(5):
            row = stacked[k].copy()
            apply_rule(row, rule)
            np.testing.assert_array_equal(whole[k], row)


def _column(run_dir, name: str) -> np.ndarray:
    rows = csv.DictReader((run_dir / "metrics.csv").open())
    return np.array([float(row[name]) for row in rows if row[name]])


PRIORITIZED = [*TINY_CARTPOLE, "replay.kind=prioritized", "replay.alpha=1.0", "replay.beta0=0.4", "agent.loss=mse",
               "train.train_freq=1", "agent.engine=numba"]  # fmt: skip


@pytest.mark.parametrize("rule", ["memory_max", "off", "batch_mean", "batch_max"])
def test_the_loop_applies_the_rule_to_the_loss(tmp_path, rule):
    """What the loss applied, as logged: the mean weight (is_weight_mean) and the weighted loss against the
    unweighted one. memory_max: weights below 1; off: ones, so the loss is the unweighted one; batch_mean: mean 1;
    batch_max: below 1 too, and not memory_max's (the values themselves: the brute-force test above)."""
    cfg = load_config(CONFIGS / "cartpole_uniform.yaml", [*PRIORITIZED, f"replay.is_weights={rule}"], device="cpu")
    run_member(build_member(cfg), tmp_path / "run")
    mean = _column(tmp_path / "run", "is_weight_mean")
    loss, unweighted = _column(tmp_path / "run", "loss"), _column(tmp_path / "run", "td_loss_unweighted")
    assert mean.size > 5
    if rule == "memory_max":
        assert (mean < 0.95).all()
    elif rule == "off":
        np.testing.assert_array_equal(mean, 1.0)
        np.testing.assert_allclose(loss, unweighted, rtol=1e-5)
    elif rule == "batch_mean":
        np.testing.assert_allclose(mean, 1.0, rtol=1e-5)
    else:
        assert (mean < 1.0).all() and (mean > 0.0).all()
        cfg = load_config(CONFIGS / "cartpole_uniform.yaml", PRIORITIZED, device="cpu")
        run_member(build_member(cfg), tmp_path / "memory_max")
        assert mean.tolist() != _column(tmp_path / "memory_max", "is_weight_mean").tolist()


@pytest.mark.parametrize("kind", ["prioritized", "rank", "uniform"])
def test_a_cohort_applies_the_rule_as_each_solo_run_does(tmp_path, kind):
    """The cohort's compiled draw hands its stacked weights to the rule in one call: every member is its solo run
    (metrics.csv rows, bit for bit)."""
    extra = [*PRIORITIZED, f"replay.kind={kind}", "replay.is_weights=batch_mean"]
    cfgs = cohort_configs(load_config(CONFIGS / "cartpole_uniform.yaml", extra, device="cpu"), [1, 2])
    Cohort(cfgs).run([tmp_path / f"c{c.seed}" for c in cfgs])
    for cfg in cfgs:
        run_member(build_member(cfg), tmp_path / f"s{cfg.seed}")
        for name in ("is_weight_mean", "loss", "td_loss_unweighted", "q_values"):
            cohort, solo = _column(tmp_path / f"c{cfg.seed}", name), _column(tmp_path / f"s{cfg.seed}", name)
            np.testing.assert_array_equal(cohort, solo)
    np.testing.assert_allclose(_column(tmp_path / "c1", "is_weight_mean"), 1.0, rtol=1e-5)
