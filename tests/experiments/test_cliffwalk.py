import copy
import csv
import json

import numpy as np
import pytest
from typer.testing import CliRunner

from per_cli.cli import app
from per_cli.envs.cliffwalk import BlindCliffwalk
from per_cli.errors import ConfigError
from per_cli.experiments.cliffwalk.study import (
    CliffwalkSettings,
    LinearLearner,
    TabularLearner,
    make_sampler,
    parse_methods,
    parse_ns,
    run_experiment,
    run_once,
)
from per_cli.replay.samplers import PrioritizedSampler, RankSampler, UniformSampler


@pytest.mark.parametrize("cls", [TabularLearner, LinearLearner])
def test_running_error_matches_the_exact_one(cls):
    mdp = BlindCliffwalk(5)
    learner = cls(mdp, np.random.default_rng(0))
    t = mdp.all_sequences()
    rng = np.random.default_rng(1)
    for i in rng.integers(0, len(t), 300):
        learner.update(int(t.states[i]), int(t.actions[i]), float(t.rewards[i]), int(t.next_states[i]),
                       bool(t.terminated[i]), 0.25)
    assert learner.sse == pytest.approx(learner.exact_sse(), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("cls", [TabularLearner, LinearLearner])
def test_oracle_lookahead_matches_doing_the_update(cls):
    mdp = BlindCliffwalk(4)
    learner = cls(mdp, np.random.default_rng(3))
    after, delta = learner.sse_after_each(0.25)
    for s in range(4):
        for a in range(2):
            trial = copy.deepcopy(learner)
            next_state, reward, term = mdp.step(s, a)
            d = trial.update(s, a, reward, next_state, term, 0.25)
            assert d == pytest.approx(delta[s, a])
            assert trial.exact_sse() == pytest.approx(after[s, a])


def test_linear_update_moves_the_bias():
    mdp = BlindCliffwalk(3)
    learner = LinearLearner(mdp, np.random.default_rng(0))
    before = learner.values()
    delta = learner.update(0, 1, 0.0, 0, True, 0.25)  # wrong action in state 0: target 0
    change = learner.values() - before
    np.testing.assert_allclose(change[:, 0], 0.0)  # the other action's weights are untouched
    np.testing.assert_allclose(change[:, 1], [0.5 * delta, 0.25 * delta, 0.25 * delta])


def test_samplers_are_the_projects_own():
    t = BlindCliffwalk(4).all_sequences()
    settings = CliffwalkSettings()
    kinds = {"uniform": UniformSampler, "prioritized": PrioritizedSampler, "rank": RankSampler}
    for method, cls in kinds.items():
        memory = make_sampler(method, t, settings, np.random.default_rng(0))
        assert type(memory.sampler) is cls
        assert len(memory) == 30
        assert memory.storage.rewards.sum() == 1.0


def test_oracle_beats_uniform_and_every_method_converges():
    settings = CliffwalkSettings(ns=(6,), runs=3, methods=("uniform", "prioritized", "rank", "oracle"))
    _, rows = run_experiment(settings)
    med = {r.method: r.median_updates for r in rows}
    assert all(r.capped_runs == 0 for r in rows)
    assert med["oracle"] * 3 < med["uniform"]
    assert med["prioritized"] < med["uniform"] and med["rank"] < med["uniform"]
    assert {r.method: r.speedup_vs_uniform for r in rows}["uniform"] == 1.0


def test_cap_is_reported():
    settings = CliffwalkSettings(ns=(6,), runs=1, methods=("uniform",), max_updates=50)
    result = run_once(6, "uniform", "tabular", 0, settings)
    assert result.updates == 50 and not result.converged


def test_runs_are_reproducible():
    settings = CliffwalkSettings(runs=1)
    a = run_once(5, "prioritized", "linear", 0, settings)
    b = run_once(5, "prioritized", "linear", 0, settings)
    assert a.updates == b.updates and a.mse == b.mse


def test_parsers():
    assert parse_ns("2..5") == (2, 3, 4, 5)
    assert parse_ns("4,8") == (4, 8)
    with pytest.raises(ConfigError, match="--n"):
        parse_ns("1..3")
    with pytest.raises(ConfigError, match="did you mean 'oracle'"):
        parse_methods("uniform,orcale")


def test_cli_writes_csv_json_and_figure(tmp_path):
    out = tmp_path / "cw"
    result = CliRunner().invoke(app, ["cliffwalk", "--n", "2..4", "--runs", "2", "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    with open(out / "cliffwalk.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4 * 3
    assert {r["method"] for r in rows} == {"uniform", "prioritized", "rank", "oracle"}
    payload = json.loads((out / "cliffwalk.json").read_text())
    assert len(payload["runs"]) == 4 * 3 * 2
    assert payload["summary"][0]["updates"]
    assert (out / "cliffwalk.png").stat().st_size > 10_000
    assert "x uniform" in result.output


def test_cli_bad_input_exits_2(tmp_path):
    result = CliRunner().invoke(app, ["cliffwalk", "--methods", "greedy", "--out", str(tmp_path / "x")])
    assert result.exit_code == 2
    assert "--methods" in result.output
    assert not (tmp_path / "x").exists()
