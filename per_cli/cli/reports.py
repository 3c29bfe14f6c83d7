"""``per plot`` and ``per cliffwalk``: the commands that read runs or run a paper experiment and write figures and
tables. Thin, as :mod:`.commands`: parse, check paths before the heavy imports, call the stage."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from per_cli.cli.app import app
from per_cli.cli.running import check_plot_out, check_writable_dir, new_files_removed_on_error
from per_cli.cli.usage import FlagCommand, path_option, say_notes, shown
from per_cli.config.schema import MAX_ALPHA
from per_cli.errors import ConfigError
from per_cli.experiments.cliffwalk.settings import N_MAX, N_MIN


@app.command(cls=FlagCommand)
def plot(
    runs_dir: Annotated[
        Path,
        typer.Argument(
            parser=path_option, metavar="RUNS_DIR", help="Directory searched recursively for run directories."
        ),
    ],
    out: Annotated[
        Path | None,
        typer.Option(parser=path_option, metavar="DIR", help="Where figures and tables go (default: RUNS_DIR/plots)."),
    ] = None,
    fmt: Annotated[str, typer.Option("--format", help="Figure format: png, svg or pdf.")] = "png",
    smooth: Annotated[
        int, typer.Option(help="Trailing mean over N logged points (1 = none); also the steps-to-threshold window.")
    ] = 10,
    metric: Annotated[
        list[str] | None,
        typer.Option("--metric", help="Also plot this logged scalar per env, e.g. replay/sample_age (repeatable)."),
    ] = None,
    threshold: Annotated[
        list[str] | None,
        typer.Option(
            "--threshold",
            help="Return threshold for 'steps to threshold': ENV=VALUE, e.g. cartpole=475 (repeatable; "
            "default: the env's registered reward_threshold; ENV=none turns it off).",
        ),
    ] = None,
    workers: Annotated[
        int | None, typer.Option(min=1, help="Processes reading event files (default: CPU cores).")
    ] = None,
    final_episodes: Annotated[
        int | None,
        typer.Option(
            help="Final return = mean of each run's last N training episodes, from its logged returns "
            "(default: summary.json's last 20), e.g. 100 for a paper's 100-episode moving average."
        ),
    ] = None,
    env: Annotated[
        list[str] | None,
        typer.Option(
            "--env",
            help="Only the runs of this env, e.g. acrobot or Acrobot-v1 (repeatable; default: every env under "
            "RUNS_DIR): one folder of figures per env from one grid.",
        ),
    ] = None,
) -> None:
    """Figures (return, TD error, correlation count with 95% bootstrap bands; the hypothesis scatter) and
    tables (IQM of the final return with a stratified bootstrap CI) from run directories."""
    check_plot_out(runs_dir, out)  # (before the analysis imports: a bad --out is said at once)
    from per_cli.analysis.plot import make_plots, parse_thresholds

    with new_files_removed_on_error(out if out is not None else runs_dir / "plots"):
        report = make_plots(
            runs_dir,
            out,
            fmt=fmt,
            smooth=smooth,
            metrics=metric or [],
            thresholds=parse_thresholds(threshold or []),
            workers=workers,
            final_episodes=final_episodes,
            envs=env or [],
        )
    typer.echo(report.table_md)
    statuses = ("completed", "running", "interrupted", "failed", "unreadable")
    counts = {s: sum(r.status == s for r in report.runs) for s in statuses}
    typer.echo(
        f"{len(report.runs)} runs in {len(report.groups)} groups ("
        + ", ".join(f"{n} {s}" for s, n in counts.items() if n)
        + f"); wrote {len(report.files)} files to {shown(report.out)}:"
    )
    for path in report.files:
        typer.echo(f"  {path}")
    say_notes(*report.notes)


@app.command(cls=FlagCommand)
def cliffwalk(
    n: Annotated[
        str,
        typer.Option(
            "--n",
            help=f"Chain lengths, each in [{N_MIN}, {N_MAX}]: a range 2..12 (inclusive) or a list 4,8,12 "
            "(the paper: 2..16).",
        ),
    ] = "2..12",
    methods: Annotated[
        str, typer.Option(help="Comma-separated: uniform, prioritized, rank, oracle.", show_default="all four")
    ] = "uniform,prioritized,rank,oracle",
    runs: Annotated[int, typer.Option(min=1, help="Runs per method and n (median, min and max are reported).")] = 10,
    learner: Annotated[str, typer.Option(help="tabular or linear (one-hot features plus a bias).")] = "tabular",
    out: Annotated[
        Path | None,
        typer.Option(
            parser=path_option,
            metavar="DIR",
            help="Output directory (default: a new one in runs/, cliffwalk__LEARNER__TIME).",
        ),
    ] = None,
    seed: Annotated[int, typer.Option(min=0, help="Base seed (weights and sampler draws per n and run).")] = 0,
    max_updates: Annotated[
        int | None, typer.Option(min=1, help="Cap per run (default: max(1e5, 200 × memory size)).")
    ] = None,
    alpha: Annotated[
        float | None,
        typer.Option(
            min=0.0, max=MAX_ALPHA, help="Priority exponent α (default: prioritized 0.6, rank 0.7, as on Atari)."
        ),
    ] = None,
    beta: Annotated[float, typer.Option(min=0.0, max=1.0, help="IS exponent β (0: every weight is 1).")] = 0.0,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only the result table.")] = False,
) -> None:
    """The Blind Cliffwalk (Schaul et al. 2016, Fig. 1-2): Q-learning updates until the MSE of Q < 1e-3 per
    replay method and chain length; writes cliffwalk.csv, cliffwalk.json and cliffwalk.png
    (log-log over several n; the methods side by side for one n)."""
    import time

    from per_cli.experiments.cliffwalk.learners import LEARNER_CLASSES
    from per_cli.experiments.cliffwalk.outputs import format_table, write_outputs
    from per_cli.experiments.cliffwalk.settings import CliffwalkSettings
    from per_cli.experiments.cliffwalk.study import default_out_dir, parse_methods, parse_ns, run_experiment

    if learner not in LEARNER_CLASSES:
        raise ConfigError(f"--learner: {learner!r} is not one of {', '.join(LEARNER_CLASSES)}")
    settings = CliffwalkSettings(
        ns=parse_ns(n),
        methods=parse_methods(methods),
        runs=runs,
        learner=learner,
        seed=seed,
        max_updates=max_updates,
        alpha=alpha,
        beta=beta,
    )
    out_dir = out or default_out_dir(learner)
    check_writable_dir(out_dir, "--out", "the results")  # (before the runs: they take minutes)
    started = time.perf_counter()
    results, rows = run_experiment(settings, progress=None if quiet else typer.echo)
    write_outputs(out_dir, settings, results, rows, time.perf_counter() - started)
    typer.echo(format_table(rows))
    typer.echo("wrote " + ", ".join(shown(out_dir / f"cliffwalk.{ext}") for ext in ("csv", "json", "png")))
