import copy
import csv
import json

import numpy as np
import pytest
from typer.testing import CliRunner

from per_cli.cli import app
from per_cli.envs.cliffwalk import BlindCliffwalk
from per_cli.errors import ConfigError
from per_cli.experiments.cliffwalk.learners import LinearLearner, TabularLearner
from per_cli.experiments.cliffwalk.memory import make_sampler
from per_cli.experiments.cliffwalk.settings import CliffwalkSettings
from per_cli.experiments.cliffwalk.study import parse_methods, parse_ns, run_experiment, run_once
from per_cli.replay.samplers import PrioritizedSampler, RankSampler, UniformSampler


@pytest.mark.parametrize("cls", [TabularLearner, LinearLearner])
def test_running_error_matches_the_exact_one(cls):
    mdp = BlindCliffwalk(5)
    learner = cls(mdp, np.random.default_rng(0))
    t = mdp.all_sequences()
    rng = np.random.default_rng(1)
    for i in rng.integers(0, len(t), 300):
        learner.update(
            int(t.states[i]), int(t.actions[i]), float(t.rewards[i]), int(t.next_states[i]), bool(t.terminated[i]), 0.25
        )
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


def _cli_run(out, *args):
    """A real ``per cliffwalk`` run; returns its rows (cliffwalk.json) as the study's Summary records."""
    from per_cli.experiments.cliffwalk.settings import Summary

    result = CliRunner().invoke(app, ["cliffwalk", *args, "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    payload = json.loads((out / "cliffwalk.json").read_text())
    assert (out / "cliffwalk.png").stat().st_size > 10_000
    return payload, [Summary(**row) for row in payload["summary"]]


def _in_frame(ax, x, y, margin):
    """Whether data points (x, y) lie inside the axes with at least ``margin`` (a fraction) to every edge."""
    frac = (ax.transScale + ax.transLimits).transform(np.column_stack([x, y]))
    return bool(np.all((frac > margin) & (frac < 1 - margin)))


@pytest.mark.parametrize("runs", [1, 3])
def test_one_n_draws_each_method_as_a_point_inside_the_frame_with_bars_only_for_several_runs(tmp_path, runs):
    from per_cli.experiments.cliffwalk.outputs import plot

    payload, rows = _cli_run(tmp_path / "cw", "--n", "3", "--runs", str(runs))
    fig, caption = plot(rows, CliffwalkSettings(ns=(3,), runs=runs), tmp_path / "again.png")
    assert caption == payload["figure"]["caption"]
    (ax,) = fig.axes
    methods = ["uniform", "prioritized", "rank", "oracle"]
    assert [t.get_text() for t in ax.get_xticklabels()] == methods
    assert all(line.get_linestyle() == "None" for line in ax.get_lines())  # one n: nothing to join
    points = [line for line in ax.get_lines() if line.get_marker() in ("o", "s", "^", "D")]
    assert [float(line.get_ydata()[0]) for line in points] == [r.median_updates for r in rows]
    x = [float(line.get_xdata()[0]) for line in points]
    assert _in_frame(ax, x, [r.median_updates for r in rows], margin=0.05)
    bars = [c for c in ax.collections if c.get_segments()]
    promised = "min–max" in ax.get_title() or "min–max" in caption
    if runs == 1:
        assert not bars and not promised
    else:
        ends = [(seg[0][1], seg[1][1]) for bar in bars for seg in bar.get_segments()]  # one bar per method
        assert ends == [(r.min_updates, r.max_updates) for r in rows] and promised
        assert _in_frame(ax, x + x, [e for pair in ends for e in pair], margin=0.02)
    assert ax.get_legend() is None  # the methods are named on the axis; no capped run here


def test_one_n_with_every_run_capped_has_one_legend_entry_for_the_marks_drawn(tmp_path):
    from per_cli.experiments.cliffwalk.outputs import CAPPED, plot

    settings = CliffwalkSettings(ns=(3,), runs=1, methods=("uniform", "oracle"), max_updates=5)
    _, rows = run_experiment(settings)
    assert all(r.capped_runs for r in rows)
    fig, caption = plot(rows, settings, tmp_path / "c.png")
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [CAPPED]
    (marks,) = [c for c in ax.collections if len(c.get_offsets())]
    assert len(marks.get_offsets()) == 2 and "red ×" in caption


@pytest.mark.parametrize("runs", [1, 2])
def test_several_n_draw_lines_and_a_band_only_where_runs_spread(tmp_path, runs):
    from matplotlib.collections import PolyCollection

    from per_cli.experiments.cliffwalk.outputs import plot

    settings = CliffwalkSettings(ns=(2, 3), runs=runs)
    _, rows = run_experiment(settings)
    fig, caption = plot(rows, settings, tmp_path / "c.png")
    (ax,) = fig.axes
    lines = [line for line in ax.get_lines() if line.get_linestyle() == "-"]
    assert [line.get_label() for line in lines] == list(settings.methods)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == list(settings.methods)
    bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(bands) == (4 if runs > 1 else 0)
    assert ("min–max" in ax.get_title()) == ("min–max" in caption) == (runs > 1)
    assert _in_frame(ax, [r.memory_size for r in rows], [r.median_updates for r in rows], margin=0.03)
