"""Reading run directories back: discovery, scalars from TensorBoard and metrics.csv, grouping over seeds,
curves on a step grid, and the summary table, on synthetic runs with known values."""

from __future__ import annotations

import csv
import io
import math

import numpy as np
import pytest

from per_cli.analysis.curves import curve_on_grid, dedup_steps, steps_to_threshold, trailing_mean
from per_cli.analysis.groups import format_value, group_runs
from per_cli.analysis.runs import find_run_dirs, load_run, load_runs
from per_cli.analysis.stats import iqm, stratified_bootstrap_ci
from per_cli.analysis.tables import Row, rows_csv, summarize, table_markdown
from per_cli.errors import ConfigError
from per_cli.rundir.logger import EPISODE_COLUMNS, wait_for_a_later_event_file_name
from per_cli.rundir.readers import RETURN_TAG

from ..runfactory import write_run


def test_find_run_dirs_recursively(tmp_path):
    write_run(tmp_path / "a", returns=[(10, 1.0)])
    write_run(tmp_path / "grid" / "cartpole__uniform__s1", returns=[(10, 1.0)])
    (tmp_path / "grid" / "grid.yaml").write_text("version: 1\n")
    (tmp_path / "grid" / "cartpole__uniform__s1" / "checkpoints" / "x").mkdir(parents=True)
    (tmp_path / "grid" / "cartpole__uniform__s1" / "checkpoints" / "x" / "summary.json").write_text("{}")
    (tmp_path / "plots").mkdir()
    (tmp_path / "plots" / "config.yaml").write_text("{}")
    (tmp_path / "notes").mkdir()
    found = find_run_dirs(tmp_path, exclude=[tmp_path / "plots"])
    assert found == [tmp_path / "a", tmp_path / "grid" / "cartpole__uniform__s1"]
    assert find_run_dirs(tmp_path / "a") == [tmp_path / "a"]  # a run directory itself


def test_missing_or_empty_directory_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="not a directory"):
        find_run_dirs(tmp_path / "nope")
    with pytest.raises(ConfigError, match="no run directories"):
        load_runs(tmp_path)


def test_load_run_from_tensorboard(tmp_path):
    path = write_run(
        tmp_path / "r",
        env="cartpole",
        replay="combined",
        seed=4,
        returns=[(10, 10.0), (30, 20.0), (60, 30.0)],
        updates={"td_error/mean": [(40, 0.5), (50, 0.25)], "replay/correlation_count": [(40, 100.0), (50, 300.0)]},
        final_return=25.0,
        overrides={"replay.capacity": 1000},
    )
    run = load_run(path, tmp_path)
    assert (run.name, run.status, run.env, run.replay, run.seed) == ("r", "completed", "CartPole-v1", "combined", 4)
    assert run.source == "tensorboard"
    steps, values = run.scalars[RETURN_TAG]
    assert steps.tolist() == [10, 30, 60] and values.tolist() == [10.0, 20.0, 30.0]
    assert run.mean_of("replay/correlation_count") == 200.0
    assert run.mean_of("td_error/mean") == 0.375
    assert run.mean_of("nothing") is None
    assert run.final_return == 25.0
    assert run.config["replay.capacity"] == 1000 and run.config["agent.hidden_sizes"] == (256, 256)


def test_a_resumed_run_reads_without_the_events_after_its_checkpoint(tmp_path, capfd):
    from torch.utils.tensorboard import SummaryWriter

    path = write_run(tmp_path / "r", returns=[(s, float(s)) for s in range(10, 101, 10)])  # crashed after 100
    wait_for_a_later_event_file_name(path)  # as a resume does: its file sorts last whatever the writers' counter
    writer = SummaryWriter(str(path), purge_step=51, filename_suffix=".resumed")  # resumed from step 50
    for s in (60, 70):
        writer.add_scalar(RETURN_TAG, -s, s)
    writer.close()
    steps, values = load_run(path, tmp_path).scalars[RETURN_TAG]
    assert steps.tolist() == [10, 20, 30, 40, 50, 60, 70] and values.tolist()[-2:] == [-60.0, -70.0]
    assert "Purging" not in capfd.readouterr().err


def _tensorboards_own(run_dir):
    """Every scalar of ``run_dir``'s event files as TensorBoard's ``EventAccumulator`` reads them (no
    downsampling): the reference per's reader is held to."""
    from tensorboard.backend.event_processing import event_accumulator as ea

    acc = ea.EventAccumulator(str(run_dir), size_guidance={ea.SCALARS: 0})
    acc.Reload()
    events = {tag: acc.Scalars(tag) for tag in acc.Tags()["scalars"]}
    return {tag: ([e.step for e in got], [e.value for e in got]) for tag, got in events.items()}


def test_pers_event_reader_equals_tensorboards_own(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    from per_cli.rundir.readers import read_event_files

    path = write_run(tmp_path / "r", returns=[(s, float(s) / 3) for s in range(10, 301, 10)],
                     updates={"td_error/mean": [(s, 1.0 / s) for s in range(5, 301, 5)]})  # fmt: skip
    wait_for_a_later_event_file_name(path)
    writer = SummaryWriter(str(path), purge_step=151, filename_suffix=".resumed")  # resumed from step 150
    for s in (160, 170, 170):
        writer.add_scalar(RETURN_TAG, -s, s)
    writer.close()
    with (next(p for p in path.iterdir() if p.name.endswith(".resumed"))).open("ab") as f:
        f.write(b"\x10\x00\x00\x00\x00\x00\x00\x00\x00\x00")  # a record still being written
    read, reference = read_event_files(path), _tensorboards_own(path)
    fast = read.scalars
    assert read.problems == []  # (a last record cut short is a writer still writing: nothing to say)
    assert fast.keys() == reference.keys() == {RETURN_TAG, "td_error/mean"}
    for tag in fast:
        np.testing.assert_array_equal(fast[tag][0], reference[tag][0])
        np.testing.assert_array_equal(fast[tag][1], reference[tag][1])
    assert fast[RETURN_TAG][0].tolist()[-4:] == [150, 160, 170, 170]  # purged after 150, then the resumed ones


def test_load_run_from_metrics_csv_without_tensorboard(tmp_path):
    path = write_run(tmp_path / "r", returns=[(10, 1.0), (25, 2.0)], tensorboard=False)
    with (path / "metrics.csv").open("a", newline="") as f:  # a row with update means, as the loop writes it
        row = {"step": 40, "episode": 3, "return": 3.0, "length": 15, "success": "", "td_error_mean": 0.7,
               "correlation_count": 12.0}  # fmt: skip
        csv.DictWriter(f, fieldnames=EPISODE_COLUMNS).writerow(row)
    run = load_run(path, tmp_path)
    assert run.source == "metrics.csv"
    assert run.scalars[RETURN_TAG].steps.tolist() == [10, 25, 40]
    assert run.scalars["td_error/mean"].values.tolist() == [0.7]
    assert [a.tolist() for a in run.scalars["replay/correlation_count"]] == [[40], [12.0]]
    assert "charts/success_rate" not in run.scalars  # blank cells are left out


def test_status_of_runs_in_progress_and_failed(tmp_path):
    running = load_run(write_run(tmp_path / "a", status="running", returns=[(5, 1.0)]), tmp_path)
    started = load_run(write_run(tmp_path / "b", status=None, returns=[]), tmp_path)
    failed = load_run(write_run(tmp_path / "c", status="failed", returns=[(5, 1.0)], error="ValueError: x"), tmp_path)
    assert running.status == "running" and running.final_return is None
    assert started.status == "running" and started.env == "CartPole-v1"  # from config.yaml
    assert failed.status == "failed" and failed.error == "ValueError: x"


def test_interrupted_and_unreadable_runs(tmp_path):
    stopped = load_run(write_run(tmp_path / "a", status="interrupted", returns=[(5, 1.0)]), tmp_path)
    assert stopped.status == "interrupted" and stopped.final_return is None
    broken = write_run(tmp_path / "b", returns=[(5, 1.0)])
    (broken / "summary.json").write_text('{"status": "compl')  # truncated
    run = load_run(broken, tmp_path)
    assert run.status == "unreadable" and "summary.json" in run.error  # never taken for a run in progress
    groups = group_runs([stopped, run])
    assert [r.name for r in groups[0].curve_runs] == ["a"]  # interrupted: a partial curve; unreadable: none


def test_parallel_loading_equals_serial(tmp_path):
    for seed in range(1, 6):
        write_run(tmp_path / f"r{seed}", seed=seed, returns=[(s, float(s * seed)) for s in range(10, 200, 10)])
    serial = load_runs(tmp_path, workers=1)
    parallel = load_runs(tmp_path, workers=2)
    assert [r.name for r in serial] == [r.name for r in parallel] == [f"r{s}" for s in range(1, 6)]
    for a, b in zip(serial, parallel, strict=True):
        np.testing.assert_array_equal(a.scalars[RETURN_TAG].values, b.scalars[RETURN_TAG].values)


def test_grid_runs_group_by_env_kind_and_swept_keys(tmp_path):
    grid = tmp_path / "g"
    grid.mkdir()
    (grid / "grid.yaml").write_text("version: 1\n")
    for kind in ("uniform", "combined"):
        for cap in (1000, 100000):
            for seed in (1, 2):
                write_run(
                    grid / f"cartpole__{kind}__s{seed}__replay.capacity={cap}",
                    replay=kind,
                    seed=seed,
                    returns=[(10, 1.0)],
                    overrides={"replay.capacity": cap, "device": "cuda" if seed == 2 else "cpu"},
                )
    for seed in (1, 2, 3):  # another env with its own config: its lr is not a swept key
        write_run(
            grid / f"acrobot__uniform__s{seed}",
            env="acrobot",
            seed=seed,
            returns=[(10, -500.0)],
            overrides={"agent.lr": 6.3e-4, "log.every": 10 * seed},
        )
    groups = group_runs(load_runs(grid, workers=1))
    assert [(g.env, g.replay, g.settings, sorted(r.seed for r in g.runs)) for g in groups] == [
        ("Acrobot-v1", "uniform", (), [1, 2, 3]),
        ("CartPole-v1", "uniform", (("replay.capacity", 1000),), [1, 2]),  # kinds in registry order
        ("CartPole-v1", "uniform", (("replay.capacity", 100000),), [1, 2]),
        ("CartPole-v1", "combined", (("replay.capacity", 1000),), [1, 2]),
        ("CartPole-v1", "combined", (("replay.capacity", 100000),), [1, 2]),
    ]
    assert [g.label for g in groups] == [
        "uniform",
        "uniform, capacity=1k",
        "uniform, capacity=100k",
        "combined, capacity=1k",
        "combined, capacity=100k",
    ]


@pytest.mark.parametrize(
    ("key", "values", "splits"),
    [
        ("seed", (1, 2), False),
        ("device", ("cpu", "cuda"), False),
        ("agent.cuda_graph", (True, False), False),
        ("train.checkpoint_every", (0, 1000), False),
        ("train.save_replay", (False, True), False),
        ("train.eval_every", (1000, 5000), False),
        ("train.eval_episodes", (5, 10), False),
        ("log.every", (10, 100), False),
        ("log.tensorboard", (True, False), False),
        ("metrics.correlation_threshold", (0.5, 0.8), False),
        ("train.total_steps", (4000, 8000), True),  # settings that change what is learnt split a group
        ("train.eval_eps", (0.0, 0.05), True),
        ("replay.capacity", (1000, 5000), True),
        ("agent.engine", ("torch", "numba"), True),
    ],
)
def test_only_settings_that_change_results_split_groups(tmp_path, key, values, splits):
    from per_cli.analysis.groups import BOOKKEEPING_KEYS, is_bookkeeping

    assert set(BOOKKEEPING_KEYS) == {"seed", "device", "agent.cuda_graph", "train.checkpoint_every",
                                     "train.save_replay", "train.eval_every", "train.eval_episodes", "log.",
                                     "metrics."}  # fmt: skip
    assert is_bookkeeping(key) is not splits
    for i, value in enumerate(values):
        overrides = {} if key == "seed" else {key: value}
        write_run(tmp_path / f"r{i}", seed=value if key == "seed" else 1, returns=[(10, 1.0)], overrides=overrides)
    groups = group_runs(load_runs(tmp_path, workers=1))
    assert len(groups) == (2 if splits else 1)
    if not splits:
        assert groups[0].label == "uniform" and len(groups[0].runs) == 2


def test_a_swept_replay_ratio_is_one_setting_not_three(tmp_path):
    """train.replay_ratio decides train_freq and gradient_steps: swept, it groups by itself alone; a train_freq
    swept without it still splits."""
    for i, (ratio, freq, steps) in enumerate([(0.25, 4, 1), (1, 1, 1), (2, 1, 2)]):
        overrides = {"train.replay_ratio": ratio, "train.train_freq": freq, "train.gradient_steps": steps}
        for seed in (1, 2):
            write_run(tmp_path / f"r{i}s{seed}", seed=seed, returns=[(10, 1.0)], overrides=overrides)
    groups = group_runs(load_runs(tmp_path, workers=1))
    labels = [g.label for g in groups]
    assert labels == ["uniform, replay_ratio=0.25", "uniform, replay_ratio=1", "uniform, replay_ratio=2"]
    assert all(len(g.runs) == 2 for g in groups)
    for freq in (1, 4):
        write_run(tmp_path / f"plain{freq}", seed=1, returns=[(10, 1.0)], overrides={"train.train_freq": freq})
    labels = [g.label for g in group_runs(load_runs(tmp_path, workers=1))]
    assert any("train_freq" in label for label in labels)  # (unset ratio, two train_freq values: two settings)


def test_settings_labels():
    assert [format_value(v) for v in (1000, 1_000_000, 1500, 3e-4, True, None, (64, 64), "x")] == [
        "1k", "1M", "1500", "0.0003", "true", "none", "[64,64]", "x",
    ]  # fmt: skip


def test_dedup_trailing_mean_and_grid():
    steps, values = dedup_steps(np.array([30, 10, 10, 20]), np.array([4.0, 1.0, 3.0, np.nan]))
    assert steps.tolist() == [10.0, 30.0] and values.tolist() == [2.0, 4.0]  # mean at a step; NaN dropped
    np.testing.assert_allclose(trailing_mean(np.array([1.0, 2.0, 3.0, 4.0]), 2), [1.0, 1.5, 2.5, 3.5])
    np.testing.assert_allclose(trailing_mean(np.array([1.0, 2.0]), 1), [1.0, 2.0])
    grid = np.array([0.0, 10.0, 15.0, 20.0, 40.0])
    curve = curve_on_grid(np.array([10, 20]), np.array([1.0, 3.0]), grid)
    assert np.isnan(curve[[0, 4]]).all()  # outside the run's steps: no value (a partial curve)
    np.testing.assert_allclose(curve[1:4], [1.0, 2.0, 3.0])
    held = curve_on_grid(np.array([10, 20]), np.array([1.0, 3.0]), grid, end=40)  # a completed run's last step
    np.testing.assert_allclose(held[1:], [1.0, 2.0, 3.0, 3.0])
    smoothed = curve_on_grid(np.array([10, 20, 30]), np.array([1.0, 3.0, 5.0]), np.array([10.0, 20, 30]), smooth=2)
    np.testing.assert_allclose(smoothed, [1.0, 2.0, 4.0])


def test_steps_to_threshold():
    steps = np.array([10, 20, 30, 40, 50])
    returns = np.array([0.0, 10.0, 10.0, 0.0, 20.0])
    assert steps_to_threshold(steps, returns, 10.0, window=1) == 20.0
    assert steps_to_threshold(steps, returns, 10.0, window=2) == 30.0  # the mean of the last two reaches 10
    assert math.isinf(steps_to_threshold(steps, returns, 10.0, window=5))


def _table_runs(tmp_path):
    finals = [10.0, 20.0, 30.0, 40.0, 50.0]
    for seed, final in enumerate(finals, 1):
        # returns reach 100 at step 100 * seed
        returns = [(100 * k, 100.0 if k >= seed else 0.0) for k in range(1, 8)]
        write_run(tmp_path / f"u{seed}", seed=seed, returns=returns, final_return=final, eval_return=final + 1)
    write_run(tmp_path / "u6", seed=6, status="running", returns=[(100, 5.0)])
    write_run(tmp_path / "u7", seed=7, status="failed", returns=[(100, 5.0)])
    write_run(tmp_path / "c1", replay="combined", returns=[(100, 100.0)], final_return=7.0)
    return finals


def test_summary_table_values(tmp_path):
    finals = _table_runs(tmp_path)
    runs = load_runs(tmp_path, workers=1)
    groups = group_runs(runs)
    rows = summarize(groups, {"CartPole-v1": 100.0}, window=1, reps=2000)
    uniform, combined = rows
    assert (uniform.replay, uniform.seeds, uniform.running, uniform.failed) == ("uniform", 5, 1, 1)
    assert uniform.final_return_iqm == pytest.approx(iqm(np.array(finals))) == pytest.approx(30.0)
    assert (uniform.final_return_ci_low, uniform.final_return_ci_high) == pytest.approx(
        stratified_bootstrap_ci([np.array(finals)], iqm, reps=2000)[1:]
    )
    assert uniform.final_return_ci_low < 30.0 < uniform.final_return_ci_high
    assert uniform.final_return_mean == 30.0 and uniform.eval_return_mean == 31.0
    evals = np.array(finals) + 1  # each run's final greedy evaluation
    assert uniform.eval_return_iqm == pytest.approx(iqm(evals)) == pytest.approx(31.0)
    assert (uniform.eval_return_ci_low, uniform.eval_return_ci_high) == pytest.approx(
        stratified_bootstrap_ci([evals], iqm, reps=2000)[1:]
    )
    assert uniform.steps_to_threshold == 300.0 and uniform.reached == 5  # median of 100, 200, ..., 500
    assert (combined.seeds, combined.final_return_iqm) == (1, 7.0)

    table = list(csv.DictReader(io.StringIO(rows_csv(rows, Row))))
    assert table[0]["replay"] == "uniform" and table[0]["seeds"] == "5" and float(table[0]["final_return_iqm"]) == 30
    assert table[1]["eval_return_mean"] == table[1]["eval_return_iqm"] == ""  # not recorded: blank, not "nan"

    md = table_markdown(rows, [r for r in runs if r.status == "failed"], 1, tmp_path)
    assert "| CartPole-v1 | uniform | 5 (+1 running) (+1 failed) | 30.0 [" in md
    # the mean final return, then the curve measures from the logged returns (these summaries predate them):
    # run k returns 0 for k - 1 of its 7 episodes, then 100; AUC = 100 (8 - k) / 7, IQM over k = 1..5: 500 / 7;
    # under 20 episodes the peak is the mean of all of them, so the drop is 0; then the evaluations' IQM
    assert uniform.return_auc_iqm == pytest.approx(500 / 7) == pytest.approx(uniform.return_peak_iqm)
    assert uniform.return_drop_iqm == 0 and (uniform.curve_runs, uniform.curve_from_logs) == (5, 5)
    assert "| 30.0 | 71.4 [" in md and "| 0.0 [0.0, 0.0] | 31.0 [" in md
    assert "6 of 6 runs' summary.json predate AUC, peak and drop" in md
    assert "300 (≥ 100: 5/5)" in md
    assert "## Failed or unreadable runs" in md and "`u7` (failed): RuntimeError: boom" in md
    assert "| CartPole-v1 | combined | 1 | 7.0, no interval (n = 1) | 7.0 |" in md  # not 7.0 [7.0, 7.0]
    assert math.isnan(combined.final_return_ci_low) and table[1]["final_return_ci_low"] == ""


def test_threshold_never_reached_by_most(tmp_path):
    for seed, hit in ((1, True), (2, False), (3, False)):
        write_run(tmp_path / f"r{seed}", seed=seed, returns=[(10, 5.0), (20, 50.0 if hit else 5.0)])
    rows = summarize(group_runs(load_runs(tmp_path, workers=1)), {"CartPole-v1": 40.0}, window=1, reps=100)
    assert math.isinf(rows[0].steps_to_threshold) and rows[0].reached == 1
    assert "not reached (≥ 40: 1/3)" in table_markdown(rows, [], 1, tmp_path)


def test_default_threshold_follows_the_runs_episode_limit():
    """seed001's CartPole runs are CartPole-v1 cut at 200 steps: CartPole-v0's 195, never v1's unreachable 475."""
    from per_cli.analysis.tables import default_threshold

    assert default_threshold("CartPole-v1") == 475
    assert default_threshold("CartPole-v1", 200) == 195 and default_threshold("CartPole-v1", 500) == 475
    assert default_threshold("MountainCar-v0", 200) == -110
    assert default_threshold("MountainCar-v0", 1000) is None  # no registered version with that limit
    assert default_threshold("NoSuchEnv-v0") is None
