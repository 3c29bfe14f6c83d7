"""`per plot`: figures and tables from synthetic run directories and from a real short `per train` run."""

from __future__ import annotations

import csv
import io
import json

import matplotlib
import numpy as np
import pytest
from typer.testing import CliRunner

from per_cli.analysis.figures import legend_label, plot_curves
from per_cli.analysis.groups import group_runs
from per_cli.analysis.plot import make_plots, parse_thresholds
from per_cli.analysis.runs import load_runs
from per_cli.analysis.style import kind_color, line_styles
from per_cli.cli import app
from per_cli.errors import ConfigError
from per_cli.rundir.readers import RETURN_TAG
from per_cli.rundir.returns import return_measures

from ..conftest import CONFIGS, TINY_CARTPOLE
from ..runfactory import write_run

matplotlib.use("Agg")
runner = CliRunner()
PNG = b"\x89PNG\r\n\x1a\n"
UPDATES = ("td_error/mean", "td_error/max", "iid/state_diversity", "iid/episode_diversity")


def _updates(last: int, level: float) -> dict[str, list[tuple[int, float]]]:
    return {tag: [(s, level * (i + 1)) for s in range(100, last + 1, 100)] for i, tag in enumerate(UPDATES)}


def _study(root, seeds=(1, 2, 3)):
    """Two kinds × seeds on CartPole; return = step / 10 × (1 for uniform, 2 for combined)."""
    for kind, slope in (("uniform", 0.1), ("combined", 0.2)):
        for seed in seeds:
            returns = [(s, slope * s) for s in range(50, 1001, 50)]
            write_run(root / f"cartpole__{kind}__s{seed}", replay=kind, seed=seed, returns=returns,
                      updates=_updates(1000, slope), final_return=slope * 1000 + seed)  # fmt: skip


def _read_png(path):
    import matplotlib.image

    assert path.read_bytes()[:8] == PNG
    return matplotlib.image.imread(path)


def test_figures_and_tables_from_synthetic_runs(tmp_path):
    _study(tmp_path)
    write_run(tmp_path / "cartpole__uniform__s9", replay="uniform", seed=9, status="failed", returns=[(50, 1e6)])
    report = make_plots(tmp_path, workers=1)
    out = tmp_path / "plots"
    names = sorted(p.name for p in report.files)
    assert names == sorted(
        ["return_CartPole-v1.png", "td_CartPole-v1.png", "iid_CartPole-v1.png", "hypothesis.png", "summary.csv",
         "summary.md", "captions.md", "factors.csv", "factors.md", "factors_marginal_CartPole-v1.png",
         "measures.csv", "measures.md", "comparisons.csv", "comparisons.md"]
    )  # fmt: skip
    # two replay kinds, seeds 1..3 each: the kind explains 6 * 50^2 of 6 * 50^2 + 4 (finals 100+s, 200+s)
    shares = {r["effect"]: r for r in csv.DictReader(io.StringIO((out / "factors.csv").read_text()))}
    assert float(shares["replay"]["eta_sq"]) == pytest.approx(15000 / 15004)
    captions = (out / "captions.md").read_text()
    assert "`return_CartPole-v1.png`" in captions and "band: 95% bootstrap CI over seeds" in captions
    assert "trailing mean of 10 logged points" in captions  # the default --smooth
    assert "Scalars read from metrics.csv" in captions and "for 7 runs" in captions  # the CSV has every tag
    assert {r.source for r in report.runs} == {"metrics.csv"}
    for name in names:
        if name.endswith(".png"):
            image = _read_png(out / name)
            assert image.shape[1] >= 600  # 3.5 in at 200 dpi or wider
    rows = {r["replay"]: r for r in csv.DictReader(io.StringIO((out / "summary.csv").read_text()))}
    assert rows["uniform"]["seeds"] == "3" and rows["uniform"]["failed"] == "1"
    assert float(rows["uniform"]["final_return_iqm"]) == pytest.approx(102.0)  # 100 + mean of seeds 1..3
    assert float(rows["combined"]["final_return_mean"]) == pytest.approx(202.0)
    assert float(rows["uniform"]["threshold"]) == 475.0  # CartPole-v1's registered reward_threshold
    assert "cartpole__uniform__s9" in (out / "summary.md").read_text()
    assert [r.name for r in report.runs if r.status == "failed"] == ["cartpole__uniform__s9"]


def test_final_episodes_takes_the_final_return_from_the_logged_returns(tmp_path):
    """--final-episodes N: the mean of each run's last N logged returns, not the summary's (here 100 + seed)."""
    _study(tmp_path)
    report = make_plots(tmp_path, workers=1, final_episodes=4)
    rows = {r["replay"]: r for r in csv.DictReader(io.StringIO((report.out / "summary.csv").read_text()))}
    assert float(rows["uniform"]["final_return_iqm"]) == pytest.approx(0.1 * (850 + 900 + 950 + 1000) / 4)
    assert float(rows["combined"]["final_return_mean"]) == pytest.approx(0.2 * (850 + 900 + 950 + 1000) / 4)
    assert "last 4 logged training episodes" in report.table_md
    assert "last 4 logged training episodes" in (report.out / "factors.md").read_text()
    everything = make_plots(tmp_path, tmp_path / "all", workers=1, final_episodes=1000)  # fewer: all of them
    rows = {r["replay"]: r for r in csv.DictReader(io.StringIO((everything.out / "summary.csv").read_text()))}
    assert float(rows["uniform"]["final_return_mean"]) == pytest.approx(0.1 * np.mean(range(50, 1001, 50)))


def test_a_metric_missing_from_metrics_csv_is_read_from_the_event_files(tmp_path):
    for seed in (1, 2):
        write_run(tmp_path / f"r{seed}", seed=seed, returns=[(s, 1.0) for s in range(50, 501, 50)],
                  updates={"eval/return": [(250, 3.0), (500, 4.0)]})  # fmt: skip
    report = make_plots(tmp_path, metrics=["eval/return"], workers=1)
    assert {r.source for r in report.runs} == {"tensorboard"}
    assert report.runs[0].scalars["eval/return"].values.tolist() == [3.0, 4.0]
    assert "TensorBoard event files (every logged value) for 2 runs" in (report.out / "captions.md").read_text()


def test_curves_mean_band_failed_and_single_seed(tmp_path):
    _study(tmp_path, seeds=(1, 2))
    write_run(tmp_path / "one__s1", replay="none", returns=[(s, 7.0) for s in range(50, 501, 50)])
    write_run(tmp_path / "bad", replay="uniform", seed=5, status="failed", returns=[(50, 1e6), (1000, 1e6)])
    import matplotlib.pyplot as plt

    groups = group_runs(load_runs(tmp_path, workers=1))
    styles = line_styles([(g.label, g.replay) for g in groups])
    fig, ax = plt.subplots()
    assert plot_curves(ax, groups, RETURN_TAG, 1, styles)
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert set(lines) == {"none (n=1)", "uniform (n=2)", "combined (n=2)"}  # the failed run is not counted
    x, y = lines["uniform (n=2)"].get_data()
    np.testing.assert_allclose(y, 0.1 * x)  # both seeds are 0.1 × step; the failed 1e6 is left out
    none_x, none_y = lines["none (n=1)"].get_data()
    assert np.all(np.isnan(none_y[none_x > 500])) and np.all(none_y[none_x <= 500] == 7.0)  # partial curve
    assert len(ax.collections) == 2  # bands for the two-seed groups, none for the single seed
    plt.close(fig)


def test_in_progress_runs_give_partial_curves(tmp_path):
    write_run(tmp_path / "a", seed=1, returns=[(s, 1.0) for s in range(10, 1001, 10)], total_steps=1200)
    write_run(tmp_path / "b", seed=2, status="running", returns=[(s, 3.0) for s in range(10, 501, 10)])
    import matplotlib.pyplot as plt

    groups = group_runs(load_runs(tmp_path, workers=1))
    assert legend_label(groups[0]) == "uniform (n=2, 1 running)"
    fig, ax = plt.subplots()
    plot_curves(ax, groups, RETURN_TAG, 1, {groups[0].label: {"color": "C0"}})
    x, y = ax.get_lines()[0].get_data()
    np.testing.assert_allclose(y[x <= 500], 2.0)  # both seeds
    np.testing.assert_allclose(y[x > 500], 1.0)  # only the completed one goes on ...
    assert x.max() == 1200.0  # ... to its last step, holding its last value after its last episode
    plt.close(fig)
    report = make_plots(tmp_path, tmp_path / "out", fmt="svg", workers=1)
    assert (tmp_path / "out" / "return_CartPole-v1.svg").read_text().lstrip().startswith("<?xml")
    assert any("hypothesis" in note for note in report.notes)  # no update metrics logged: no scatter


def test_metric_option_threshold_and_several_envs(tmp_path):
    _study(tmp_path / "cp", seeds=(1, 2))
    for seed in (1, 2):
        write_run(tmp_path / f"acrobot__uniform__s{seed}", env="acrobot", seed=seed,
                  returns=[(s, -500 + s / 4) for s in range(50, 2001, 50)], updates=_updates(2000, 1.0))  # fmt: skip
    report = make_plots(
        tmp_path, metrics=["td_error/max"], thresholds=parse_thresholds(["acrobot=-300", "cartpole=none"]), workers=1
    )
    names = {p.name for p in report.files}
    assert {"returns.png", "metric_td_error_max_Acrobot-v1.png", "metric_td_error_max_CartPole-v1.png"} <= names
    rows = {(r["env"], r["replay"]): r for r in csv.DictReader(io.StringIO((report.out / "summary.csv").read_text()))}
    acrobot = rows[("Acrobot-v1", "uniform")]
    assert float(acrobot["threshold"]) == -300 and float(acrobot["steps_to_threshold"]) > 0
    assert rows[("CartPole-v1", "uniform")]["threshold"] == ""


def test_bad_input_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="ENV=VALUE"):
        parse_thresholds(["cartpole"])
    with pytest.raises(ConfigError, match="not a number"):
        parse_thresholds(["cartpole=high"])
    _study(tmp_path, seeds=(1,))
    with pytest.raises(ConfigError, match="did you mean 'td_error/mean'"):
        make_plots(tmp_path, metrics=["td_error/maen"], workers=1)
    with pytest.raises(ConfigError, match="png, svg or pdf"):
        make_plots(tmp_path, fmt="jpg", workers=1)
    with pytest.raises(ConfigError, match="did you mean 'cartpole'"):
        parse_thresholds(["cartpol=100"])


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "no run directories"),
        (["--threshold", "cartpole"], "ENV=VALUE"),
        (["--format", "jpg"], "png, svg or pdf"),
        (["--final-episodes", "0"], "--final-episodes 0: must be >= 1"),
        (["--threshold", "cartpol=100"], "unknown env 'cartpol'; did you mean 'cartpole'?"),
    ],
)
def test_cli_bad_input_exits_2(tmp_path, args, message):
    if args:
        _study(tmp_path, seeds=(1,))
    result = runner.invoke(app, ["plot", str(tmp_path), *args])
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_real_short_runs_then_plot(tmp_path):
    runs = tmp_path / "runs"
    sets = [arg for kv in TINY_CARTPOLE for arg in ("--set", kv)]
    for kind, seed in (("uniform", 1), ("uniform", 2), ("combined", 1)):
        result = runner.invoke(
            app,
            ["train", "-c", str(CONFIGS / "cartpole_uniform.yaml"), *sets, "--set", f"replay.kind={kind}",
             "--seed", str(seed), "--runs-dir", str(runs), "--name", f"cartpole__{kind}__s{seed}", "-q"],
        )  # fmt: skip
        assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["plot", str(runs), "--smooth", "3", "--metric", "replay/sample_age"])
    assert result.exit_code == 0, result.output
    out = runs / "plots"
    for name in ("return_CartPole-v1", "td_CartPole-v1", "hypothesis", "metric_replay_sample_age_CartPole-v1"):
        _read_png(out / f"{name}.png")
        assert str(out / f"{name}.png") in result.output
    rows = list(csv.DictReader(io.StringIO((out / "summary.csv").read_text())))
    assert [(r["replay"], r["seeds"]) for r in rows] == [("uniform", "2"), ("combined", "1")]  # kinds in registry order
    assert "| CartPole-v1 | uniform | 2 |" in result.output
    # the logged returns are the ones the summaries average: the last 20 of them give the same final returns
    logged = make_plots(runs, tmp_path / "logged", workers=1, final_episodes=20)
    again = list(csv.DictReader(io.StringIO((logged.out / "summary.csv").read_text())))
    expected = [float(r["final_return_mean"]) for r in rows]
    assert [float(r["final_return_mean"]) for r in again] == pytest.approx(expected)
    # summary.json's whole-curve measures are those of the run's logged episode returns, and the table has them
    for run_dir in sorted(runs.glob("cartpole__*")):
        summary = json.loads((run_dir / "summary.json").read_text())
        with (run_dir / "metrics.csv").open() as f:
            returns = [float(row["return"]) for row in csv.DictReader(f)]
        expected = return_measures(returns)
        assert {k: summary[k] for k in expected} == pytest.approx(expected)
        assert summary["return_drop"] == pytest.approx(summary["return_peak"] - summary["final_return_mean"])
    assert all(float(r["return_auc_iqm"]) > 0 and r["curve_from_logs"] == "0" for r in rows)


def test_one_colour_per_replay_kind_in_every_figure_and_folder():
    from matplotlib.colors import to_rgb

    alone = line_styles([("prioritized", "prioritized")])
    mixed = line_styles([("none", "none"), ("uniform", "uniform"), ("prioritized", "prioritized")])
    assert alone["prioritized"]["color"] == mixed["prioritized"]["color"] == to_rgb(kind_color("prioritized"))
    assert mixed["uniform"]["color"] == to_rgb(kind_color("uniform"))
    her = line_styles([("uniform+her", "uniform+her")])["uniform+her"]
    assert her["color"] == to_rgb(kind_color("uniform")) and "linestyle" in her  # the kind's colour, dashed
    swept = line_styles([(f"prioritized, capacity={c}", "prioritized") for c in ("1k", "10k", "100k")])
    hues = [matplotlib.colors.rgb_to_hsv(s["color"])[0] for s in swept.values()]
    assert len({round(h, 2) for h in hues}) == 1 and len({s["color"] for s in swept.values()}) == 3  # shades


def test_legend_with_long_labels_stays_inside_the_figure():
    import matplotlib.pyplot as plt

    from per_cli.analysis.style import STYLE, band_caption, legend_inside

    labels = [f"prioritized, capacity={c}, alpha=0.{a}, hidden_sizes=[256,256,256], target_update_period=500"
              for c in ("1k", "100k") for a in (4, 6, 7)]  # fmt: skip
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, 1, figsize=(3.5, 3.0), squeeze=False, layout="constrained")
        for label in labels:
            axes[0, 0].plot([0, 1], [0, 1], label=label)
        legend_inside(fig, axes, title=band_caption(10))
        fig.canvas.draw()
        box, frame = fig.legends[0].get_window_extent(), fig.bbox
        assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
        assert "95% bootstrap CI over seeds" in fig.legends[0].get_title().get_text().replace("\n", " ")
        plt.close(fig)


def test_bookkeeping_settings_do_not_split_the_legend(tmp_path):
    for seed, every in ((1, 1000), (2, 5000)):
        bookkeeping = {"train.eval_every": every, "train.checkpoint_every": every, "log.every": seed}
        write_run(tmp_path / f"r{seed}", seed=seed, returns=[(10, 1.0), (20, 2.0)], overrides=bookkeeping)
    report = make_plots(tmp_path, workers=1)
    assert [g.label for g in report.groups] == ["uniform"]
    assert "| CartPole-v1 | uniform | 2 |" in report.table_md


def test_env_option_keeps_one_envs_runs(tmp_path):
    _study(tmp_path / "cp", seeds=(1, 2))
    for seed in (1, 2):
        write_run(tmp_path / f"acrobot__uniform__s{seed}", env="acrobot", seed=seed,
                  returns=[(s, -500 + s / 4) for s in range(50, 2001, 50)], updates=_updates(2000, 1.0))  # fmt: skip
    report = make_plots(tmp_path, tmp_path / "acrobot", envs=["acrobot"], workers=1)
    assert {r.env for r in report.runs} == {"Acrobot-v1"} and len(report.runs) == 2
    names = {p.name for p in report.files}
    assert "return_Acrobot-v1.png" in names and not any("CartPole" in n for n in names)
    everything = make_plots(tmp_path, tmp_path / "all", envs=["acrobot", "CartPole-v1"], workers=1)
    assert {r.env for r in everything.runs} == {"Acrobot-v1", "CartPole-v1"} and len(everything.runs) == 6


@pytest.mark.parametrize(
    "env, message",
    [("acrobt", "--env acrobt: unknown env 'acrobt'; did you mean 'acrobot'?"),
     ("mountaincar", "--env MountainCar-v0: no run of this env under")],
)  # fmt: skip
def test_cli_env_option_bad_input_exits_2(tmp_path, env, message):
    _study(tmp_path, seeds=(1,))
    result = runner.invoke(app, ["plot", str(tmp_path), "--env", env])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not (tmp_path / "plots").exists()


def test_every_table_names_its_commit_and_the_command_that_remakes_it(tmp_path):
    import shlex

    _study(tmp_path / "runs", seeds=(1, 2))
    report = make_plots(tmp_path / "runs", tmp_path / "out", workers=1, smooth=3, final_episodes=5)
    expected = shlex.join(["per", "plot", str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--smooth", "3",
                           "--final-episodes", "5"])  # fmt: skip
    for name in ("summary.md", "comparisons.md", "factors.md", "measures.md"):
        text = (report.out / name).read_text()
        assert "Made at commit " in text and f"by `{expected}`." in text, name
