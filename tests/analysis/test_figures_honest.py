"""Figures that do not mislead (issue 47): a group's curve stops where fewer than half its runs remain, the title
names the env as run (its episode limit), nine cells of a sweep are told apart by line patterns, and the legend
sits outside every panel."""

from __future__ import annotations

import matplotlib
import numpy as np

from per_cli.analysis.figures import env_title, figure_curves, plot_curves
from per_cli.analysis.groups import group_runs
from per_cli.analysis.plot import make_plots
from per_cli.analysis.runs import load_runs
from per_cli.analysis.style import STYLE, Output, line_styles
from per_cli.rundir.readers import RETURN_TAG

from ..runfactory import linear_returns, write_run

matplotlib.use("Agg")


def _drawn(fig):
    """Draw a saved (so closed) figure again on an Agg canvas, at its own dpi; its renderer, for extents."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def test_a_groups_curve_stops_where_fewer_than_half_its_runs_remain(tmp_path):
    """Four completed runs end at 1k, 2k, 3k and 4k steps (episode budgets): past 3k only one of four is left,
    whose tail would stand for all four under "n=4"."""
    import matplotlib.pyplot as plt

    for seed, end in enumerate((1000, 2000, 3000, 4000), start=1):
        write_run(tmp_path / f"s{seed}", seed=seed, returns=linear_returns(20, end, lambda s: s / 10),
                  total_steps=end, tensorboard=False)  # fmt: skip
    groups = group_runs(load_runs(tmp_path, workers=1))
    fig, ax = plt.subplots()
    assert plot_curves(ax, groups, RETURN_TAG, 1, line_styles([(g.label, g.replay) for g in groups]))
    x, y = ax.get_lines()[0].get_data()
    drawn = x[np.isfinite(y)]
    assert 2900 < drawn.max() <= 3000  # two of four remain up to 3k; none of the last 1k is drawn
    plt.close(fig)
    report = make_plots(tmp_path, workers=1)
    assert "stopped where fewer than half a group's runs remain" in (report.out / "captions.md").read_text()


def _runs(root, limit=None, values=(None,)):
    for i, value in enumerate(values):
        for seed in (1, 2):
            overrides = {"env.max_episode_steps": limit} if limit else {}
            if value is not None:
                overrides["replay.capacity"] = value
            write_run(root / f"v{i}_s{seed}", seed=seed, overrides=overrides, tensorboard=False, total_steps=1000,
                      returns=linear_returns(20, 1000, lambda s, k=i: s / 10 + 20 * k))  # fmt: skip
    return group_runs(load_runs(root, workers=1))


def test_the_title_names_the_episode_limit_the_runs_had(tmp_path):
    cut = _runs(tmp_path / "cut", limit=200)
    assert env_title("CartPole-v1", cut) == "CartPole-v1 (200-step limit)"
    fig = figure_curves("CartPole-v1", cut, [RETURN_TAG], "return", 1, {g.label: {"color": "C0"} for g in cut},
                        Output(tmp_path, "png"))  # fmt: skip
    assert fig.axes[0].get_title() == "CartPole-v1 (200-step limit)"
    assert env_title("CartPole-v1", _runs(tmp_path / "registered", limit=500)) == "CartPole-v1"
    assert env_title("CartPole-v1", _runs(tmp_path / "unset")) == "CartPole-v1"
    report = make_plots(tmp_path / "cut", workers=1)
    assert "CartPole-v1 (200-step limit): episodic return" in (report.out / "captions.md").read_text()


def test_nine_cells_of_a_sweep_have_nine_line_patterns_and_the_legend_covers_no_data(tmp_path):
    import matplotlib.pyplot as plt

    capacities = [1000 * 2**k for k in range(9)]
    groups = _runs(tmp_path, values=capacities)
    assert len(groups) == 9
    styles = line_styles([(g.label, g.replay) for g in groups])
    patterns = {repr(s["linestyle"]) for s in styles.values()}
    assert len(patterns) == 9  # not nine shades of one colour alone
    with plt.rc_context(STYLE):
        fig = figure_curves("CartPole-v1", groups, [RETURN_TAG], "return", 1, styles, Output(tmp_path, "png"))
        renderer = _drawn(fig)
        legend = fig.legends[0].get_window_extent(renderer)
        for ax in fig.axes:
            assert not legend.overlaps(ax.get_window_extent(renderer))  # below the panel, never over its data
        frame = fig.bbox
        assert frame.x0 <= legend.x0 and legend.x1 <= frame.x1 and frame.y0 <= legend.y0
        drawn = {repr(line.get_linestyle()) + repr(line._dash_pattern) for line in fig.axes[0].get_lines()}
        assert len(drawn) == 9
        plt.close(fig)


def test_a_long_legend_makes_the_figure_taller_not_the_panel_shorter(tmp_path):
    """Twelve one-column entries below a single-column panel: the axes keep their height (at least 1.2 in of the
    2 in given to the panel with its title and tick labels; the legend used to squeeze them to about half an inch),
    and the y label stays inside the figure."""
    import matplotlib.pyplot as plt

    groups = _runs(tmp_path, values=[1000 * 2**k for k in range(12)])
    styles = line_styles([(g.label, g.replay) for g in groups])
    with plt.rc_context(STYLE):
        fig = figure_curves("CartPole-v1", groups, [RETURN_TAG], "return", 1, styles, Output(tmp_path, "png"))
        renderer = _drawn(fig)
        ax = fig.axes[0]
        assert ax.get_window_extent(renderer).height / fig.dpi >= 1.2
        label = ax.yaxis.label.get_window_extent(renderer)
        assert fig.bbox.y0 <= label.y0 and label.y1 <= fig.bbox.y1
        plt.close(fig)


def test_nine_settings_of_a_kind_have_nine_markers_in_the_hypothesis_figure():
    from per_cli.analysis.style import marker_of

    styles = line_styles([(f"uniform, capacity={c}", "uniform") for c in range(9)])
    assert len({marker_of(s) for s in styles.values()}) == 9


def test_no_title_of_the_hypothesis_figure_runs_into_another(tmp_path):
    """The first panel's title names the env as run and ρ; beside ρ on one line it ran into the next panel's."""
    import matplotlib.pyplot as plt

    from per_cli.analysis.figures import figure_hypothesis

    updates = {tag: [(s, s / 1000) for s in range(100, 1001, 100)] for tag in
               ("iid/state_diversity", "iid/episode_diversity", "td_error/mean")}  # fmt: skip
    for kind in ("uniform", "prioritized"):
        for seed in (1, 2, 3):
            write_run(tmp_path / f"{kind}{seed}", replay=kind, seed=seed, updates=updates, tensorboard=False,
                      returns=linear_returns(10, 1000, lambda s, k=seed: s / 10 + k), total_steps=1000,
                      overrides={"env.max_episode_steps": 200})  # fmt: skip
    groups = group_runs(load_runs(tmp_path, workers=1))
    with plt.rc_context(STYLE):
        fig = figure_hypothesis({"CartPole-v1": groups}, line_styles([(g.label, g.replay) for g in groups]),
                                Output(tmp_path, "png"))  # fmt: skip
        renderer = _drawn(fig)
        titles = [ax.title if ax.title.get_text() else ax._left_title for ax in fig.axes]
        boxes = [t.get_window_extent(renderer) for t in titles]
        assert "CartPole-v1 (200-step limit)" in titles[0].get_text()
        assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
        plt.close(fig)
