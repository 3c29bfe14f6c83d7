"""``per plot``: figures and tables from run directories."""

from __future__ import annotations

import difflib
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from per_cli.analysis.comparisons import Comparison, compare_groups, comparisons_markdown
from per_cli.analysis.factor_figures import figure_heatmap, figure_marginals
from per_cli.analysis.factors import analyse, factors_csv, factors_markdown
from per_cli.analysis.figures import (
    IID_TAGS,
    TD_TAGS,
    env_title,
    figure_all_returns,
    figure_curves,
    figure_hypothesis,
)
from per_cli.analysis.groups import Group, group_runs
from per_cli.analysis.measures import MEASURE_TAGS, MeasureRow, measure_rows, measures_markdown
from per_cli.analysis.provenance import made_by
from per_cli.analysis.runs import Run, load_runs
from per_cli.analysis.style import FORMATS, STYLE, Output, line_styles
from per_cli.analysis.tables import Row, default_threshold, final_return_meaning, rows_csv, summarize, table_markdown
from per_cli.errors import ConfigError
from per_cli.rundir.readers import LENGTH_TAG, RETURN_TAG


@dataclass
class PlotReport:
    out: Path
    runs: list[Run]
    groups: list[Group]
    files: list[Path] = field(default_factory=list)
    table_md: str = ""
    notes: list[str] = field(default_factory=list)


def parse_thresholds(items: Sequence[str]) -> dict[str, float | None]:
    """``["cartpole=475", "Acrobot-v1=none"]`` -> ``{"CartPole-v1": 475.0, "Acrobot-v1": None}``; an unknown
    env is a ConfigError with the closest names."""
    from per_cli.envs import checked_env_id

    out: dict[str, float | None] = {}
    for item in items:
        env, sep, raw = item.partition("=")
        if not sep or not env.strip():
            raise ConfigError(f"--threshold {item!r}: expected ENV=VALUE, e.g. --threshold cartpole=475")
        env_id = checked_env_id(env.strip(), f"--threshold {item}")
        try:
            out[env_id] = None if raw.strip().lower() == "none" else float(raw)
        except ValueError:
            raise ConfigError(f"--threshold {item!r}: {raw!r} is not a number (or none)") from None
    return out


def _check_metrics(runs: Sequence[Run], metrics: Sequence[str]) -> None:
    logged = {tag for r in runs for tag in r.scalars}
    for tag in metrics:
        if tag not in logged:
            close = difflib.get_close_matches(tag, sorted(logged), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(f"--metric {tag!r}: no run logged this tag; {hint}logged: {', '.join(sorted(logged))}")


def _notes(runs: Sequence[Run], groups: Sequence[Group], by_env: dict, thresholds: dict) -> list[str]:
    notes = [f"--threshold {env}: no run of this env" for env in thresholds if env not in by_env]
    for g in groups:
        seeds = [r.seed for r in g.runs]
        twice = sorted({s for s in seeds if seeds.count(s) > 1}, key=str)
        if twice:
            notes.append(
                f"{g.env} {g.label}: seed {', '.join(map(str, twice))} in more than one run directory with the same "
                "settings; each counts as a run"
            )
    notes += [f"{r.name}: {r.read_error}" for r in runs if r.read_error]
    return notes


SOURCES = {
    "metrics.csv": "metrics.csv (per episode: its return, and the mean of each update measure logged during it)",
    "tensorboard": "TensorBoard event files (every logged value)",
}


def _episode_limit(groups: Sequence[Group]) -> int | None:
    """The ``env.max_episode_steps`` that all the env's runs share (None: the id's own, or they differ)."""
    limits = {r.config.get("env.max_episode_steps") for g in groups for r in g.runs}
    return limits.pop() if len(limits) == 1 else None


def plot_command(runs_dir: Path, out: Path, fmt: str, smooth: int, metrics: Sequence[str],
                 thresholds: dict[str, float | None] | None, final_episodes: int | None,
                 envs: Sequence[str]) -> list[str]:  # fmt: skip
    """The ``per plot`` command line that writes these tables again (the options that change them)."""
    argv = ["per", "plot", str(runs_dir), "--out", str(out)]
    argv += ["--format", fmt] if fmt != "png" else []
    argv += ["--smooth", str(smooth)] if smooth != 10 else []
    argv += [a for tag in metrics for a in ("--metric", tag)]
    for env, value in (thresholds or {}).items():
        argv += ["--threshold", f"{env}={'none' if value is None else format(value, 'g')}"]
    argv += ["--final-episodes", str(final_episodes)] if final_episodes is not None else []
    argv += [a for env in envs for a in ("--env", env)]
    return argv


def make_plots(
    runs_dir: Path,
    out: Path | None = None,
    *,
    fmt: str = "png",
    smooth: int = 10,
    metrics: Sequence[str] = (),
    thresholds: dict[str, float | None] | None = None,
    workers: int | None = None,
    final_episodes: int | None = None,
    envs: Sequence[str] = (),
) -> PlotReport:
    """Load every run under ``runs_dir``; write the figures and tables into ``out`` (default ``runs_dir/plots``).
    ``final_episodes``: see :attr:`Run.final_return`. ConfigError for bad input."""
    if fmt not in FORMATS:
        raise ConfigError(f"--format {fmt!r}: choose {', '.join(FORMATS[:-1])} or {FORMATS[-1]}")
    if smooth < 1:
        raise ConfigError(f"--smooth {smooth}: must be >= 1 (1 = no smoothing)")
    if final_episodes is not None and final_episodes < 1:
        raise ConfigError(f"--final-episodes {final_episodes}: must be >= 1 (leave it out for the summaries' last 20)")
    out = out if out is not None else runs_dir / "plots"
    needed = {RETURN_TAG, LENGTH_TAG, *TD_TAGS, *IID_TAGS, *MEASURE_TAGS, *metrics}
    runs = load_runs(runs_dir, workers=workers, exclude=[out], tags=needed, envs=envs)
    _check_metrics(runs, metrics)
    for run in runs:
        run.final_episodes = final_episodes

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = group_runs(runs)
    by_env = {env: list(gs) for env, gs in itertools.groupby(groups, key=lambda g: g.env)}  # (sorted by env)
    limits = {env: default_threshold(env, _episode_limit(env_groups)) for env, env_groups in by_env.items()}
    limits.update(thresholds or {})
    report = PlotReport(out=out, runs=runs, groups=groups, notes=_notes(runs, groups, by_env, thresholds or {}))
    out.mkdir(parents=True, exist_ok=True)
    output = Output(out, fmt)
    styles = line_styles([(g.label, g.replay) for g in groups])
    factors = analyse(by_env)
    report.notes += factors.notes
    with plt.rc_context(STYLE):
        for env, env_groups in by_env.items():
            if not any(g.curve_runs for g in env_groups):
                report.notes.append(f"{env}: every run failed; no curves")
                continue
            figure_curves(env, env_groups, [RETURN_TAG], "return", smooth, styles, output, limits.get(env))
            figure_curves(env, env_groups, TD_TAGS, "td", smooth, styles, output)
            figure_curves(env, env_groups, IID_TAGS, "iid", smooth, styles, output)
            for tag in metrics:
                figure_curves(env, env_groups, [tag], f"metric_{tag.replace('/', '_')}", smooth, styles, output)
        if len(by_env) > 1:
            figure_all_returns(by_env, smooth, styles, limits, output)
        if not figure_hypothesis(by_env, styles, output, final=final_return_meaning(final_episodes)):
            report.notes.append("hypothesis figure: no completed run with a final return and batch measures yet")
        for design in factors.designs:
            figure_heatmap(design, output, env_title(design.env, by_env[design.env]))
            figure_marginals(design, output, env_title(design.env, by_env[design.env]))
    rows = summarize(groups, limits, smooth)
    made = made_by(plot_command(runs_dir, out, fmt, smooth, metrics, thresholds, final_episodes, envs))
    left_out = [r for r in runs if r.status in ("failed", "unreadable")]  # (not in the curves or the statistics)
    report.table_md = table_markdown(rows, left_out, smooth, runs_dir, final_episodes, made)
    tables = [("summary.csv", rows_csv(rows, Row)), ("summary.md", report.table_md)]
    if measures := measure_rows(groups):
        tables += [("measures.csv", rows_csv(measures, MeasureRow)), ("measures.md", measures_markdown(measures, made))]
    if comparisons := compare_groups(groups):
        comparisons_md = comparisons_markdown(comparisons, final_return_meaning(final_episodes), made)
        tables += [("comparisons.csv", rows_csv(comparisons, Comparison)), ("comparisons.md", comparisons_md)]
    if factors.designs:
        factors_md = factors_markdown(factors, final_return_meaning(final_episodes), made)
        tables += [("factors.csv", factors_csv(factors)), ("factors.md", factors_md)]
    for name, text in tables:
        (out / name).write_text(text)
        output.files.append(out / name)
    counts = [(text, sum(r.source == source for r in runs)) for source, text in SOURCES.items()]
    output.write_captions("Scalars read from " + " and ".join(f"{text} for {n} runs" for text, n in counts if n) + ".")
    report.files = output.files
    return report
