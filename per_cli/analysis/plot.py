"""``per plot``: figures and tables from run directories.

Figures (one file each, sized for a paper: 3.5 in single column, 7 in double):
* ``return_<env>``: episodic return against env steps, one line per group (replay kind and swept settings),
  the mean over seeds with a 95% bootstrap band on a common step grid; ``returns``: every env side by side;
* ``td_<env>``: mean and max |TD error| and the correlation count against env steps, the same way;
* ``hypothesis``: per completed run, its mean correlation count and mean |TD error| against its final return;
* ``metric_<tag>_<env>``: any other logged scalar (``--metric TAG``).
Tables: ``summary.csv`` and ``summary.md`` (see ``results.summarize``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from per_cli.analysis.results import (
    RETURN_TAG,
    Group,
    Run,
    curve_on_grid,
    default_threshold,
    group_runs,
    load_runs,
    summarize,
    table_csv,
    table_markdown,
)
from per_cli.analysis.stats import mean_band, spearman
from per_cli.errors import ConfigError

GRID_POINTS = 200
SINGLE, DOUBLE = 3.5, 7.0  # figure widths in inches: one column, two columns of a paper
CORRELATION_TAG = "replay/correlation_count"
TD_TAGS = ("td_error/mean", "td_error/max", CORRELATION_TAG)
LABELS = {
    RETURN_TAG: "episodic return",
    "eval/return": "evaluation return",
    "td_error/mean": "mean |TD error| in batch",
    "td_error/max": "max |TD error| in batch",
    "td_error/median": "median |TD error| in batch",
    "td_error/std": "std of |TD error| in batch",
    CORRELATION_TAG: "correlated state pairs in batch",
    "replay/sample_age": "mean sample age (env steps)",
    "replay/is_weight_mean": "mean IS weight",
    "losses/td_loss": "TD loss",
    "losses/q_values": "mean Q(s, a)",
    "charts/episodic_length": "episode length (steps)",
    "charts/epsilon": "ε (exploration)",
    "charts/SPS": "env steps per second",
    "charts/success_rate": "success rate",
}
STYLE = {
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "legend.fontsize": 7,
    "legend.title_fontsize": 7,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "lines.linewidth": 1.2,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.5,
    "figure.constrained_layout.h_pad": 0.03,
    "figure.constrained_layout.w_pad": 0.03,
}


@dataclass
class PlotReport:
    out: Path
    runs: list[Run]
    groups: list[Group]
    files: list[Path] = field(default_factory=list)
    table_md: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[Run]:
        return [r for r in self.runs if r.status == "failed"]


def parse_thresholds(items: Sequence[str]) -> dict[str, float | None]:
    """``["cartpole=475", "Acrobot-v1=none"]`` -> ``{"CartPole-v1": 475.0, "Acrobot-v1": None}``."""
    from per_cli.envs import resolve_env_id

    out: dict[str, float | None] = {}
    for item in items:
        env, sep, raw = item.partition("=")
        if not sep or not env.strip():
            raise ConfigError(f"--threshold {item!r}: expected ENV=VALUE, e.g. --threshold cartpole=475")
        if raw.strip().lower() == "none":
            value = None
        else:
            try:
                value = float(raw)
            except ValueError:
                raise ConfigError(f"--threshold {item!r}: {raw!r} is not a number (or none)") from None
        out[resolve_env_id(env.strip())] = value
    return out


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")


def _label(tag: str) -> str:
    return LABELS.get(tag, tag)


def _kind_rank(groups: Sequence[Group]):
    """Sort key: replay kinds in registry order (none, uniform, combined, ...), then ``group_runs``'s order."""
    from per_cli.replay import REPLAY_KINDS

    rank = {k: i for i, k in enumerate(REPLAY_KINDS)}
    position = {id(g): i for i, g in enumerate(groups)}
    return lambda g: (rank.get(g.replay, len(rank)), g.replay, position[id(g)])


def order_groups(groups: Sequence[Group]) -> list[Group]:
    """Envs by name; within one, replay kinds in registry order, then settings."""
    key = _kind_rank(groups)
    return sorted(groups, key=lambda g: (g.env, key(g)))


def _colors(groups: Sequence[Group]) -> dict[str, tuple]:
    """One colour per group label, the same in every figure and env, assigned in replay-kind order."""
    import matplotlib

    unique = list(dict.fromkeys(g.label for g in sorted(groups, key=_kind_rank(groups))))
    cmap = matplotlib.colormaps["tab10" if len(unique) <= 10 else "tab20"]
    return {label: cmap(i % cmap.N) for i, label in enumerate(unique)}


def _steps_axis(ax) -> None:
    from matplotlib.ticker import EngFormatter

    ax.xaxis.set_major_formatter(EngFormatter(sep=""))
    ax.set_xlabel("environment steps")


def _grid(runs: Sequence[Run], tag: str) -> np.ndarray | None:
    spans = [
        (steps.min(), max(steps.max(), r.end_step or 0))
        for r in runs
        if tag in r.scalars and len(steps := r.scalars[tag][0])
    ]
    if not spans:
        return None
    lo, hi = min(s[0] for s in spans), max(s[1] for s in spans)
    return np.linspace(lo, hi, GRID_POINTS) if hi > lo else np.array([float(lo)])


def legend_label(group: Group) -> str:
    """The group label with its seeds: ``uniform (n=5, 1 running)``; failed runs are not counted."""
    runs = group.curve_runs
    running = sum(r.status == "running" for r in runs)
    return f"{group.label} (n={len(runs)}" + (f", {running} running)" if running else ")")


def plot_curves(
    ax, groups: Sequence[Group], tag: str, smooth: int, colors: dict[str, tuple], counts: bool = True
) -> bool:
    """Mean over seeds and 95% bootstrap band of ``tag`` for each group on ``ax``; False if none logged it.
    Legend labels carry the seed counts unless ``counts`` is false (figures that span envs)."""
    grid = _grid([r for g in groups for r in g.curve_runs], tag)
    if grid is None:
        ax.text(0.5, 0.5, "not logged yet", transform=ax.transAxes, ha="center", va="center", color="0.5")
        return False
    for g in groups:
        runs = [r for r in g.curve_runs if tag in r.scalars]
        if not runs:
            continue
        curves = np.stack([curve_on_grid(*r.scalars[tag], grid, smooth, r.end_step) for r in runs])
        mean, lo, hi = mean_band(curves)
        color = colors[g.label]
        marker = "o" if len(grid) == 1 else None
        ax.plot(grid, mean, color=color, label=legend_label(g) if counts else g.label, marker=marker, markersize=3)
        band = np.isfinite(lo)
        if band.any():
            ax.fill_between(grid, lo, hi, where=band, color=color, alpha=0.2, linewidth=0)
    _steps_axis(ax)
    ax.set_ylabel(_label(tag))
    return True


def _legend_below(fig, axes, ncol_max: int = 3, order: Sequence[str] = ()) -> None:
    """One legend for every panel, under the figure (constrained layout makes room for it); entries named in
    ``order`` come in that order."""
    handles: dict[str, object] = {}
    for ax in np.ravel(axes):
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(lab, h)
    rank = {label: i for i, label in enumerate(order)}
    handles = dict(sorted(handles.items(), key=lambda item: rank.get(item[0], len(rank))))
    if handles:
        fig.legend(list(handles.values()), list(handles), loc="outside lower center",
                   ncol=min(len(handles), ncol_max), frameon=False)  # fmt: skip


def _threshold_line(ax, value: float | None) -> None:
    if value is not None:
        ax.axhline(value, color="0.4", linestyle="--", linewidth=0.8, zorder=1)
        ax.annotate(f"threshold {value:g}", (0.01, value), xycoords=("axes fraction", "data"), xytext=(0, 2),
                    textcoords="offset points", fontsize=6, color="0.4", va="bottom")  # fmt: skip


def _save(fig, path: Path, fmt: str, files: list[Path]) -> None:
    import matplotlib.pyplot as plt

    path = path.with_suffix(f".{fmt}")
    fig.savefig(path, format=fmt, dpi=200)
    plt.close(fig)
    files.append(path)


def _by_env(groups: Sequence[Group]) -> dict[str, list[Group]]:
    out: dict[str, list[Group]] = {}
    for g in groups:
        out.setdefault(g.env, []).append(g)
    return out


def _subplots(rows: int, cols: int, width: float, height: float):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(rows, cols, figsize=(width, height), squeeze=False, layout="constrained")
    return fig, axes


def figure_returns(env: str, groups, smooth, colors, threshold, out, fmt, files) -> None:
    fig, axes = _subplots(1, 1, SINGLE, 2.2 + 0.13 * math.ceil((len(groups) + 1) / 2))
    ax = axes[0, 0]
    plot_curves(ax, groups, RETURN_TAG, smooth, colors)
    _threshold_line(ax, threshold)
    ax.set_title(env)
    _legend_below(fig, axes, ncol_max=2)
    _save(fig, out / f"return_{_slug(env)}", fmt, files)


def figure_all_returns(by_env, smooth, colors, thresholds, out, fmt, files) -> None:
    envs = list(by_env)
    cols = min(len(envs), 3)
    rows = math.ceil(len(envs) / cols)
    fig, axes = _subplots(rows, cols, DOUBLE, 2.2 * rows + 0.3)
    for ax, env in zip(axes.ravel(), envs, strict=False):
        plot_curves(ax, by_env[env], RETURN_TAG, smooth, colors, counts=False)
        _threshold_line(ax, thresholds.get(env))
        ax.set_title(env)
    for ax in axes.ravel()[len(envs) :]:
        ax.remove()
    _legend_below(fig, axes.ravel()[: len(envs)], order=list(colors))
    _save(fig, out / "returns", fmt, files)


def figure_td(env, groups, smooth, colors, out, fmt, files) -> None:
    threshold = _common(groups, "metrics.correlation_threshold")
    batch = _common(groups, "replay.batch_size")
    fig, axes = _subplots(1, 3, DOUBLE, 2.3)
    for ax, tag in zip(axes[0], TD_TAGS, strict=True):
        plot_curves(ax, groups, tag, smooth, colors)
    corr = axes[0, 2]
    detail = []
    if threshold is not None:
        detail.append(f"|r| > {threshold:g}")
    if batch is not None:
        detail.append(f"of {batch * (batch - 1) // 2:,} pairs")
    if detail:
        corr.set_title(", ".join(detail), fontsize=7, color="0.3")
    fig.suptitle(env, fontsize=8)
    _legend_below(fig, axes)
    _save(fig, out / f"td_{_slug(env)}", fmt, files)


def _common(groups: Sequence[Group], key: str):
    values = {r.config.get(key) for g in groups for r in g.runs if r.config}
    return values.pop() if len(values) == 1 else None


def figure_metric(env, groups, tag, smooth, colors, out, fmt, files) -> None:
    fig, axes = _subplots(1, 1, SINGLE, 2.2 + 0.13 * math.ceil(len(groups) / 2))
    ax = axes[0, 0]
    plot_curves(ax, groups, tag, smooth, colors)
    ax.set_title(env)
    _legend_below(fig, axes, ncol_max=2)
    _save(fig, out / f"metric_{_slug(tag.replace('/', '_'))}_{_slug(env)}", fmt, files)


def figure_hypothesis(by_env, colors, out, fmt, files) -> bool:
    """Per completed run: mean correlation count and mean |TD error| against final return. False if no run has
    both a final return and logged update metrics."""
    panels = [(CORRELATION_TAG, "mean correlated pairs per batch"), ("td_error/mean", "mean |TD error| per batch")]
    envs = [env for env, gs in by_env.items() if any(r.final_return is not None for g in gs for r in g.completed)]
    if not envs:
        return False
    fig, axes = _subplots(len(envs), 2, DOUBLE, 2.2 * len(envs) + 0.3)
    anything = False
    for row, env in enumerate(envs):
        for col, (tag, xlabel) in enumerate(panels):
            ax = axes[row, col]
            xs, ys = [], []
            for g in by_env[env]:
                pts = [(r.mean_of(tag), r.final_return) for r in g.completed]
                pts = [(x, y) for x, y in pts if x is not None and y is not None]
                if not pts:
                    continue
                x, y = np.array(pts).T
                ax.scatter(x, y, s=14, color=colors[g.label], label=g.label, alpha=0.85, edgecolors="none")
                xs += list(x)
                ys += list(y)
            anything |= bool(xs)
            rho = spearman(np.array(xs), np.array(ys)) if len(xs) >= 3 else math.nan
            ax.set_title(env + (f" (Spearman ρ = {rho:.2f}, {len(xs)} runs)" if math.isfinite(rho) else ""))
            if not xs:
                ax.text(0.5, 0.5, "not logged", transform=ax.transAxes, ha="center", va="center", color="0.5")
            ax.set_xlabel(xlabel)
            ax.set_ylabel("final return (last 20 episodes)")
    if not anything:
        import matplotlib.pyplot as plt

        plt.close(fig)
        return False
    _legend_below(fig, axes, order=list(colors))
    _save(fig, out / "hypothesis", fmt, files)
    return True


def make_plots(
    runs_dir: Path,
    out: Path | None = None,
    *,
    fmt: str = "png",
    smooth: int = 10,
    metrics: Sequence[str] = (),
    thresholds: dict[str, float | None] | None = None,
    workers: int | None = None,
) -> PlotReport:
    """Load every run under ``runs_dir`` and write the figures and tables into ``out`` (default
    ``runs_dir/plots``). Raises ConfigError for bad input (no runs, unknown --metric)."""
    if fmt not in ("png", "svg"):
        raise ConfigError(f"--format {fmt!r}: choose png or svg")
    if smooth < 1:
        raise ConfigError(f"--smooth {smooth}: must be >= 1 (1 = no smoothing)")
    out = out if out is not None else runs_dir / "plots"
    runs = load_runs(runs_dir, workers=workers, exclude=[out])
    logged = {tag for r in runs for tag in r.scalars}
    for tag in metrics:
        if tag not in logged:
            import difflib

            close = difflib.get_close_matches(tag, sorted(logged), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(f"--metric {tag!r}: no run logged this tag; {hint}logged: {', '.join(sorted(logged))}")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = order_groups(group_runs(runs))
    report = PlotReport(out=out, runs=runs, groups=groups)
    by_env = _by_env(groups)
    limits = {env: default_threshold(env) for env in by_env}
    limits.update(thresholds or {})
    for env in thresholds or {}:
        if env not in by_env:
            report.notes.append(f"--threshold {env}: no run of this env")
    for g in groups:
        seeds = [r.seed for r in g.runs]
        twice = sorted({s for s in seeds if seeds.count(s) > 1}, key=str)
        if twice:
            report.notes.append(
                f"{g.env} {g.label}: seed {', '.join(map(str, twice))} in more than one run directory with the same "
                "settings; each counts as a run"
            )
    for r in runs:
        if r.read_error:
            report.notes.append(f"{r.name}: {r.read_error}")
    out.mkdir(parents=True, exist_ok=True)
    colors = _colors(groups)
    files = report.files
    with plt.rc_context(STYLE):
        for env, env_groups in by_env.items():
            if not any(g.curve_runs for g in env_groups):
                report.notes.append(f"{env}: every run failed; no curves")
                continue
            figure_returns(env, env_groups, smooth, colors, limits.get(env), out, fmt, files)
            figure_td(env, env_groups, smooth, colors, out, fmt, files)
            for tag in metrics:
                figure_metric(env, env_groups, tag, smooth, colors, out, fmt, files)
        if len(by_env) > 1:
            figure_all_returns(by_env, smooth, colors, limits, out, fmt, files)
        if not figure_hypothesis(by_env, colors, out, fmt, files):
            report.notes.append("hypothesis figure: no completed run with a final return and update metrics yet")
    rows = summarize(groups, limits, smooth)
    report.table_md = table_markdown(rows, report.failed, smooth, runs_dir)
    for name, text in (("summary.csv", table_csv(rows)), ("summary.md", report.table_md)):
        (out / name).write_text(text)
        files.append(out / name)
    return report
