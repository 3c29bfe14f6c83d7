"""The ``per`` command line. Thin: parses options, calls a stage, maps errors to exit codes
(2 for bad input, 1 for a run that failed)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from per_cli import __version__
from per_cli.cli.running import (
    check_path_length,
    check_plot_out,
    check_runs_dir,
    check_writable_dir,
    new_files_removed_on_error,
    train_cohort,
    train_solo,
)
from per_cli.cli.usage import (
    FlagCommand,
    OneLineErrors,
    check_run_name,
    config_listing,
    fail_input,
    path_option,
    shown,
)
from per_cli.config.schema import MAX_ALPHA
from per_cli.errors import ConfigError
from per_cli.experiments.cliffwalk.settings import N_RANGE

app = typer.Typer(
    name="per",
    cls=OneLineErrors,
    help="Experiment runner for experience replay in deep Q-learning.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


ConfigOpt = Annotated[
    str | None,
    typer.Option(
        "--config",
        "-c",
        help="A YAML file, or a shipped config by name (cartpole_per, seed001/cartpole_per; see per configs). "
        "Defaults apply without one.",
    ),
]
SetOpt = Annotated[list[str] | None, typer.Option("--set", help="Override any key: --set agent.lr=3e-4 (repeatable).")]


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"per {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_show_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Experiment runner for experience replay in deep Q-learning: train, sweep, plot."""


RunsDirOpt = Annotated[
    Path, typer.Option("--runs-dir", parser=path_option, metavar="DIR", help="Where run directories are created.")
]


@app.command(cls=FlagCommand)
def train(
    config: ConfigOpt = None,
    overrides: SetOpt = None,
    seed: Annotated[int | None, typer.Option(help="Random seed (overrides the config's seed).")] = None,
    seeds: Annotated[
        str | None,
        typer.Option(
            help="Train a cohort in lockstep in one process, a run each: a seed (3), a range (1-100: seeds 1 to "
            "100) or a list (1,5,9 or 1-10,20), as per grid takes them."
        ),
    ] = None,
    runs_dir: RunsDirOpt = Path("runs"),
    name: Annotated[str | None, typer.Option(help="Run directory name (default: ENV__REPLAY__sSEED__TIME).")] = None,
    device: Annotated[str | None, typer.Option(help="auto, cpu or cuda (overrides the config).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress output.")] = False,
    resume: Annotated[
        Path | None,
        typer.Option(
            "--resume",
            parser=path_option,
            metavar="RUN_DIR",
            help="Continue RUN_DIR from its latest checkpoint, with its config.yaml; --set may change train.*, "
            "log.* and metrics.* keys (e.g. --set train.total_steps=2000000 to train longer).",
        ),
    ] = None,
) -> None:
    """Train one DQN agent with the configured replay memory; writes a run directory (with --seeds, one per seed)."""
    try:
        check_path_length(runs_dir, "--runs-dir")  # (before the config's checks import torch: said at once)
    except ConfigError as exc:
        raise fail_input(str(exc)) from None
    if seeds is not None:
        train_cohort(config, overrides or [], seeds, runs_dir, device, quiet, clash=(seed, name, resume))
        return
    train_solo(config, overrides or [], seed, runs_dir, name, device, quiet, resume)


@app.command(cls=FlagCommand)
def configs(
    name: Annotated[
        str | None,
        typer.Argument(help="A shipped config (or a file) to print resolved, with every default filled in."),
    ] = None,
) -> None:
    """List the shipped configs with their descriptions, or print one resolved (every default filled
    in, ready to copy and edit): per configs cartpole_per > my.yaml."""
    from per_cli.config import dump_config, load_config
    from per_cli.config.shipped import describe, resolve_config, shipped_configs, shipped_root

    try:
        if name is None:
            shipped = shipped_configs()
            listing = [(n, describe(path, cut=False)) for n, path in shipped.items()]
            closing = (
                f"{len(shipped)} configs in {shipped_root()}; per configs NAME prints one with every default; "
                "per train --config NAME runs it"
            )
            typer.echo(config_listing(listing, closing))
            return
        resolved = resolve_config(name, option="per configs")
        from per_cli.replay import resolve_config as with_kind_defaults

        cfg = with_kind_defaults(load_config(resolved.path))  # (the kind's own defaults: α, β0, params)
    except ConfigError as exc:
        raise fail_input(str(exc)) from None
    if resolved.note:
        typer.echo(f"note: {resolved.note}", err=True)
    typer.echo(f"# {resolved.name or resolved.path}: {describe(resolved.path)}")
    typer.echo(f"# resolved from {resolved.path} with every default filled in; edit and run with per train --config")
    typer.echo(dump_config(cfg), nl=False)


@app.command(cls=FlagCommand)
def grid(
    envs: Annotated[
        str | None,
        typer.Option(
            "--envs",
            help="Comma-separated envs: cartpole,acrobot or Gymnasium ids (default with --config: its env.id, "
            "and its replay.kind unless --replays is given).",
        ),
    ] = None,
    replays: Annotated[
        str | None,
        typer.Option(help="Comma-separated replay kinds (default: every kind with a config for the env)."),
    ] = None,
    seeds: Annotated[
        str,
        typer.Option(
            help="The seeds of every setting: a seed (3), a range (1-10: seeds 1 to 10) or a list (1,5,9 or "
            "1-10,20), as per train takes them."
        ),
    ] = "1-3",
    sweep: Annotated[
        list[str] | None,
        typer.Option("--sweep", help="Add a config key as an axis: --sweep replay.capacity=1000,100000 (repeatable)."),
    ] = None,
    overrides: SetOpt = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config", "-c", help="Base config for every run: a file or a shipped name (env.id, replay.kind per run)"
        ),
    ] = None,
    configs_dir: Annotated[
        Path | None,
        typer.Option(
            parser=path_option,
            metavar="DIR",
            help="Where configs/<env>_<kind>.yaml live (default: ./configs, else the repository's).",
        ),
    ] = None,
    runs_dir: RunsDirOpt = Path("runs"),
    name: Annotated[
        str | None, typer.Option(help="Grid directory name (default: grid-TIME, or the grid this request made).")
    ] = None,
    workers: Annotated[
        int | None, typer.Option(min=1, help="Runs at once (default: CPU cores; Ray: its CPUs).")
    ] = None,
    cohort_size: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Train up to N runs that differ only in the seed together in one process or Ray task "
            "(default: the seeds of a setting spread over the workers; 1: every run alone).",
        ),
    ] = None,
    backend: Annotated[str, typer.Option(help="local (process pool) or ray.")] = "local",
    ray_address: Annotated[str | None, typer.Option(help="Ray cluster address (default: start Ray here).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the runs and their state; write nothing.")] = False,
    retry_failed: Annotated[bool, typer.Option("--retry-failed", help="Run failed runs again.")] = False,
    plot: Annotated[bool, typer.Option("--plot", help="Run per plot on the grid directory afterwards.")] = False,
) -> None:
    """Run env × replay × seed (× --sweep) as separate runs on local cores or Ray; re-run the same command
    to resume (completed runs are skipped)."""
    from per_cli.config.seeds import single_seed_note
    from per_cli.sweep import grid as grid_mod

    try:
        if backend not in ("local", "ray"):
            raise ConfigError(f"--backend {backend!r}: choose local or ray")
        if ray_address is not None and backend != "ray":
            raise ConfigError("--ray-address needs --backend ray")
        if backend == "ray" and not dry_run:
            try:
                import ray  # noqa: F401
            except ImportError:
                raise ConfigError(
                    "--backend ray needs Ray: pip install -e '.[ray]' (in a clone; else pip install 'per-cli[ray]')"
                ) from None
        if plot and "plot" not in {c.name or c.callback.__name__ for c in app.registered_commands}:
            raise ConfigError("--plot: this version has no `per plot` command")
        check_run_name(name)
        check_path_length(runs_dir, "--runs-dir")
        request = grid_mod.build_request(envs, replays, seeds, sweep, overrides, config, configs_dir)
        if note := single_seed_note(seeds, request.seeds):
            typer.echo(f"note: {note}", err=True)
        plan = grid_mod.plan_grid(request)
        if not dry_run:
            check_runs_dir(runs_dir)
        grid_dir, exists = grid_mod.find_grid_dir(plan, runs_dir, name)
        if dry_run:
            grid_mod.dry_run_table(plan, grid_dir, exists, retry_failed)
            return
        if backend == "local":
            grid_mod.check_devices(plan)
        outcome = grid_mod.run_grid(
            plan,
            grid_dir,
            workers=workers,
            backend=backend,
            ray_address=ray_address,
            retry_failed=retry_failed,
            cohort_size=cohort_size,
        )
    except ConfigError as exc:
        raise fail_input(str(exc)) from None
    if plot and outcome.exit_code != 130:  # a separate process: plotting does not share the grid's imports
        import subprocess

        done = subprocess.run([sys.executable, "-m", "per_cli", "plot", str(outcome.grid_dir)], check=False)
        if done.returncode != 0 and outcome.exit_code == 0:
            raise typer.Exit(done.returncode)
    raise typer.Exit(outcome.exit_code)


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
    try:
        check_plot_out(runs_dir, out)  # (before the analysis imports: a bad --out is said at once)
    except ConfigError as exc:
        raise fail_input(str(exc)) from None
    from per_cli.analysis.plot import make_plots, parse_thresholds

    try:
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
    except ConfigError as exc:
        raise fail_input(str(exc)) from None
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
    for note in report.notes:
        typer.echo(f"note: {note}", err=True)


@app.command(cls=FlagCommand)
def cliffwalk(
    n: Annotated[
        str,
        typer.Option(
            "--n",
            help=f"Chain lengths, each in [{N_RANGE[0]}, {N_RANGE[1]}]: a range 2..12 (inclusive) or a list 4,8,12 "
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
            parser=path_option, metavar="DIR", help="Output directory (default: a new one in runs/, "
            "cliffwalk__LEARNER__TIME)."
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

    from per_cli.experiments.cliffwalk.study import (
        LEARNERS,
        CliffwalkSettings,
        default_out_dir,
        format_table,
        parse_methods,
        parse_ns,
        run_experiment,
        write_outputs,
    )

    try:
        if learner not in LEARNERS:
            raise ConfigError(f"--learner: {learner!r} is not one of {', '.join(LEARNERS)}")
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
    except ConfigError as exc:
        raise fail_input(str(exc)) from None
    started = time.perf_counter()
    results, rows = run_experiment(settings, progress=None if quiet else typer.echo)
    write_outputs(out_dir, settings, results, rows, time.perf_counter() - started)
    typer.echo(format_table(rows))
    typer.echo("wrote " + ", ".join(shown(out_dir / f"cliffwalk.{ext}") for ext in ("csv", "json", "png")))


def main() -> None:  # pragma: no cover - `python -m per_cli`
    sys.exit(app())
