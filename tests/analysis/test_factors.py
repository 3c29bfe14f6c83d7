"""Variance shares (ANOVA η²) on synthetic data with known answers, and the factor figures and tables of
`per plot` on a synthetic two-factor grid of run directories."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest

from per_cli.analysis.factors import Design, analyse, build_design, effects, factors_markdown, variance_shares
from per_cli.analysis.groups import group_runs
from per_cli.analysis.plot import make_plots
from per_cli.analysis.runs import load_runs

from ..runfactory import write_run


def _design(y: np.ndarray) -> Design:
    levels = [list(range(n)) for n in y.shape[:-1]]
    return Design("Env-v0", [f"f{i}" for i in range(y.ndim - 1)], levels, list(range(y.shape[-1])), y)


def test_eta_squared_by_hand_on_a_2x2_design():
    # cells (a, b): (0,0) = [1, 3], (0,1) = [5, 7], (1,0) = [2, 4], (1,1) = [10, 12]; grand mean 5.5
    y = np.array([[[1.0, 3.0], [5.0, 7.0]], [[2.0, 4.0], [10.0, 12.0]]])
    # level means: a0 = 4, a1 = 7; b0 = 2.5, b1 = 8.5. SS_total = sum((y - 5.5)^2) = 106
    # SS_A = 4 * (1.5^2 + 1.5^2) = 18; SS_B = 4 * (3^2 + 3^2) = 72
    # interaction: cell means 2, 6, 3, 11 minus a and b means plus 5.5: -1, 1, 1, -1 -> SS_AB = 2 * 4 = 8
    shares = effects(y, 2)
    assert shares[(0,)] == pytest.approx(18 / 106)
    assert shares[(1,)] == pytest.approx(72 / 106)
    assert shares[(0, 1)] == pytest.approx(8 / 106)  # the residual: each run 1 from its cell mean: 18 + 72 + 8 + 8


@pytest.mark.parametrize("which", ["A", "B", "AB"])
def test_only_the_factor_with_an_effect_explains_the_variance(which):
    rng = np.random.default_rng(7)
    a = np.array([0.0, 1.0, 2.0, 3.0])[:, None, None] * 50
    b = np.array([0.0, 1.0, 2.0])[None, :, None] * 50
    signal = {"A": a + 0 * b, "B": b + 0 * a, "AB": (a - a.mean()) * (b - b.mean()) / 50}[which]
    y = signal + rng.normal(0.0, 1.0, size=(4, 3, 10))
    shares = variance_shares(_design(y), reps=500, seed=1)
    eta = {s.effect: s for s in shares}
    big = {"A": "f0", "B": "f1", "AB": "f0 × f1"}[which]
    assert eta[big].eta_sq > 0.97 and eta[big].ci_low > 0.9
    for name in {"f0", "f1", "f0 × f1"} - {big}:
        assert eta[name].eta_sq < 0.01 and eta[name].ci_high < 0.02
    assert sum(s.eta_sq for s in shares) == pytest.approx(1.0)


def test_no_effect_gives_shares_near_their_null_expectation():
    rng = np.random.default_rng(3)
    y = rng.normal(0.0, 1.0, size=(4, 4, 30))  # N = 480 runs: a 4-level factor expects 3/479
    shares = effects(y, 2)
    assert shares[(0,)] < 0.03 and shares[(1,)] < 0.03 and shares[(0, 1)] < 0.05


def _grid(root, alphas=(0.0, 0.5, 1.0), windows=(512, 4096), seeds=(1, 2, 3), missing=()):
    """The study's two factors: final return = 100 * alpha + seed (the window W has no effect)."""
    for alpha in alphas:
        for window in windows:
            for seed in seeds:
                if (alpha, window, seed) in missing:
                    continue
                final = 100 * alpha + seed
                name = f"cartpole__prioritized__s{seed}__alpha={alpha}__window={window}"
                write_run(root / name, replay="prioritized", seed=seed, returns=[(100, final), (200, final)],
                          final_return=final, tensorboard=False,
                          overrides={"replay.alpha": alpha, "replay.window": window})  # fmt: skip


def test_design_from_run_directories_balances_and_names_factors(tmp_path):
    _grid(tmp_path, missing={(0.5, 4096, 3)})
    groups = group_runs(load_runs(tmp_path, workers=1))
    design, why = build_design("CartPole-v1", groups)
    assert why is None and design.factors == ["replay.alpha", "replay.window"]
    assert design.levels == [[0.0, 0.5, 1.0], [512, 4096]] and design.seeds == [1, 2]  # seed 3 is not complete
    assert design.y.shape == (3, 2, 2) and design.dropped == 5
    np.testing.assert_allclose(design.y[2, 1], [101.0, 102.0])
    report = analyse({"CartPole-v1": groups}, reps=200)
    assert any("5 completed runs left out" in n for n in report.notes)


def test_not_a_full_factorial_gets_a_note(tmp_path):
    _grid(tmp_path, missing={(0.5, 4096, s) for s in (1, 2, 3)})
    report = analyse({"CartPole-v1": group_runs(load_runs(tmp_path, workers=1))}, reps=100)
    assert not report.designs and "not a full factorial" in report.notes[0]


def test_interrupted_runs_alone_get_curves_and_a_note_not_a_crash(tmp_path):
    """Pong on a GPU lease: every run stopped before its budget (interrupted), two kinds."""
    for kind in ("uniform", "prioritized"):
        for seed in (1, 2):
            write_run(tmp_path / f"{kind}{seed}", replay=kind, seed=seed, status="interrupted",
                      returns=[(100, -21.0), (200, -20.0)], tensorboard=False)  # fmt: skip
    report = analyse({"CartPole-v1": group_runs(load_runs(tmp_path, workers=1))}, reps=100)
    assert not report.designs and "no completed run" in report.notes[0]
    plots = make_plots(tmp_path, workers=1, fmt="png")
    assert any(p.name.startswith("return") for p in plots.files)


def test_plot_writes_heatmap_marginals_and_variance_table(tmp_path):
    _grid(tmp_path)
    report = make_plots(tmp_path, workers=1, fmt="pdf")
    names = {p.name for p in report.files}
    assert {"factors_heatmap_CartPole-v1.pdf", "factors_marginal_CartPole-v1.pdf", "factors.csv", "factors.md"} <= names
    assert (report.out / "factors_heatmap_CartPole-v1.pdf").read_bytes()[:5] == b"%PDF-"
    rows = {r["effect"]: r for r in csv.DictReader(io.StringIO((report.out / "factors.csv").read_text()))}
    assert set(rows) == {"replay.alpha", "replay.window", "replay.alpha × replay.window", "residual"}
    # level means of alpha 2, 52, 102: SS_alpha = 6 runs per level x (50^2 + 0 + 50^2) = 30000; seeds 1..3 in
    # each of the 6 cells: SS_residual = 6 x 2 = 12; the window and the interaction explain nothing
    assert float(rows["replay.alpha"]["eta_sq"]) == pytest.approx(30000 / 30012)
    assert float(rows["replay.window"]["eta_sq"]) == pytest.approx(0.0, abs=1e-12)
    text = (report.out / "factors.md").read_text()
    assert "| replay.alpha | 1.000 |" in text
    # marginal effects: alpha 0.5 pools 51, 52, 53 over both windows (IQM 52); alpha 1 likewise 102
    assert "| replay.alpha | 0.5 | 52.0 |" in text and "| replay.alpha | 1 | 102.0 |" in text


def test_a_design_whose_runs_all_return_the_same_has_no_shares_and_says_why(tmp_path):
    """seed001 MountainCar: no run learns in 300 episodes, every final return is -200."""
    for alpha in (0.0, 1.0):
        for seed in (1, 2):
            write_run(tmp_path / f"a{alpha}s{seed}", replay="prioritized", seed=seed, returns=[(100, -200.0)],
                      final_return=-200.0, tensorboard=False, overrides={"replay.alpha": alpha})  # fmt: skip
    report = analyse({"CartPole-v1": group_runs(load_runs(tmp_path, workers=1))}, reps=100)
    assert len(report.designs) == 1 and report.shares == []
    assert "every run's final return is -200" in report.notes[0]
    assert "no variance to explain" in factors_markdown(report)


KINDS_SHUFFLED = ("rank", "uniform", "none", "prioritized", "combined")  # alphabetical would be combined first
KIND_FINAL = {"none": 10.0, "uniform": 40.0, "combined": 50.0, "prioritized": 70.0, "rank": 60.0}


def _kind_grid(root, kinds=KINDS_SHUFFLED, seeds=(1, 2, 3), alphas=(None,)):
    """Runs that differ only in the replay kind (and, with ``alphas``, in replay.alpha): no swept key."""
    for kind in kinds:
        for alpha in alphas:
            for seed in seeds:
                final = KIND_FINAL[kind] + seed + (0 if alpha is None else 100 * alpha)
                over = {} if alpha is None else {"replay.alpha": alpha}
                write_run(root / f"{kind}_{alpha}_{seed}", replay=kind, seed=seed, returns=[(100, final)],
                          final_return=final, tensorboard=False, overrides=over)  # fmt: skip


def _data_lines(ax):
    """The Line2D objects that carry the points (errorbar's caps are markers on their own lines too)."""
    return [line for line in ax.get_lines() if line.get_marker() == "o"]


def test_a_kind_only_grid_gets_points_not_a_line_in_the_projects_kind_order(tmp_path):
    from per_cli.analysis.factor_figures import figure_marginals
    from per_cli.analysis.style import Output, kind_color

    _kind_grid(tmp_path)
    report = analyse({"CartPole-v1": group_runs(load_runs(tmp_path, workers=1))}, reps=100)
    (design,) = report.designs
    order = ["none", "uniform", "combined", "prioritized", "rank"]
    assert design.factors == ["replay"] and design.levels == [order] and not design.numeric(0)
    fig = figure_marginals(design, Output(tmp_path, "png"))
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_xticklabels()] == order
    assert ax.get_xlabel() == "replay kind"
    points = _data_lines(ax)
    assert len(points) == 5 and all(len(line.get_xdata()) == 1 for line in points)
    assert all(line.get_linestyle() == "None" for line in ax.get_lines())  # nothing joins two kinds
    assert [line.get_color() for line in points] == [kind_color(k) for k in order]
    # each kind at its place, with its IQM (seeds 1..3 add 1..3: the IQM of three adds 2)
    x = [float(line.get_xdata()[0]) for line in points]
    y = [float(line.get_ydata()[0]) for line in points]
    assert x == [0, 1, 2, 3, 4] and y == pytest.approx([KIND_FINAL[k] + 2 for k in order])
    lo, hi = ax.get_xlim()
    assert lo < min(x) and max(x) < hi  # no point on the axis's edge
    assert "per replay kind (no swept key)" in fig.get_suptitle().replace("\n", " ")
    text = factors_markdown(report)
    assert "Design: replay kind (5 levels, categorical) only: no swept key" in text
    assert text.index("| replay | none |") < text.index("| replay | uniform |") < text.index("| replay | rank |")


def test_a_numeric_factor_is_joined_by_a_line_and_the_kind_beside_it_is_not(tmp_path):
    from per_cli.analysis.factor_figures import figure_marginals
    from per_cli.analysis.style import Output

    _kind_grid(tmp_path, kinds=("uniform", "prioritized"), seeds=(1, 2), alphas=(0.0, 0.5, 1.0))
    report = analyse({"CartPole-v1": group_runs(load_runs(tmp_path, workers=1))}, reps=100)
    (design,) = report.designs
    assert design.factors == ["replay", "replay.alpha"] and design.levels[0] == ["uniform", "prioritized"]
    assert design.numeric(1) and not design.numeric(0)
    kind_ax, alpha_ax = figure_marginals(design, Output(tmp_path, "png")).axes
    assert all(line.get_linestyle() == "None" for line in kind_ax.get_lines())
    (trend,) = [line for line in _data_lines(alpha_ax) if line.get_linestyle() == "-"]
    assert list(trend.get_xdata()) == [0, 1, 2]
    assert "2-factor full factorial: replay kind (2 levels, categorical) × replay.alpha (3 levels, numeric)" in (
        factors_markdown(report)
    )
