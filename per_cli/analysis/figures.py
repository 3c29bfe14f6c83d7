"""The figures of ``per plot``: per env, curves over env steps (mean over seeds, 95% bootstrap band), every env's
returns side by side, and the hypothesis figure (each run's batch measures against its final return)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from per_cli.analysis.curves import curve_on_grid, enough_runs
from per_cli.analysis.envname import env_as_run
from per_cli.analysis.groups import Group
from per_cli.analysis.measures import MEASURE_TAGS, run_mean
from per_cli.analysis.runs import Run
from per_cli.analysis.stats import mean_band, spearman
from per_cli.analysis.style import DOUBLE, SINGLE, Output, band_caption, legend_height, legend_inside, marker_of
from per_cli.analysis.text import slug
from per_cli.rundir.readers import RETURN_TAG

GRID_POINTS = 200
TD_TAGS = ("td_error/mean", "td_error/max")
IID_TAGS = ("iid/state_diversity", "iid/episode_diversity")
HYPOTHESIS_TAGS = (*IID_TAGS, "td_error/mean")  # the x axes of the hypothesis figure (in MEASURE_TAGS)
LABELS = {
    RETURN_TAG: "episodic return",
    "eval/return": "evaluation return",
    "td_error/mean": "mean |TD error| in batch",
    "td_error/max": "max |TD error| in batch",
    "td_error/median": "median |TD error| in batch",
    "td_error/std": "std of |TD error| in batch",
    "iid/state_diversity": "state diversity of batch (1 = i.i.d.)",
    "iid/episode_diversity": "episode diversity of batch",
    "replay/correlation_count": "correlated state pairs in batch",
    "replay/sample_age": "mean sample age (env steps)",
    "replay/is_weight_mean": "mean IS weight",
    "losses/td_loss": "TD loss (IS-weighted)",
    "losses/td_loss_unweighted": "TD loss (unweighted)",
    "losses/q_values": "mean Q(s, a)",
    "charts/episodic_length": "episode length (steps)",
    "charts/epsilon": "ε (exploration)",
    "charts/SPS": "env steps per second",
    "charts/success_rate": "success rate",
}


def legend_label(group: Group, counts: bool = True) -> str:
    """The group label with its seeds: ``uniform (n=5, 1 running)``; failed runs are not counted."""
    if not counts:
        return group.label
    runs = group.curve_runs
    extra = [f"{n} {s}" for s in ("running", "interrupted") if (n := sum(r.status == s for r in runs))]
    return f"{group.label} (n={len(runs)}" + "".join(f", {e}" for e in extra) + ")"


def env_title(env: str, groups: Sequence[Group]) -> str:
    """The env as its runs ran it (:func:`~per_cli.analysis.envname.env_as_run`: the id, and the episode limit
    where it is not the registered one)."""
    return env_as_run(env, [r.config.get("env.max_episode_steps") for g in groups for r in g.runs])


def _grid(runs: Sequence[Run], tag: str) -> np.ndarray | None:
    spans = [
        (steps.min(), max(steps.max(), r.end_step or 0))
        for r in runs
        if tag in r.scalars and len(steps := r.scalars[tag].steps)
    ]
    if not spans:
        return None
    lo, hi = min(start for start, _ in spans), max(end for _, end in spans)
    return np.linspace(lo, hi, GRID_POINTS) if hi > lo else np.array([float(lo)])


def plot_curves(
    ax, groups: Sequence[Group], tag: str, smooth: int, styles: dict[str, dict], counts: bool = True
) -> bool:
    """Each group's mean over seeds and 95% bootstrap band of ``tag`` on ``ax``, stopped where fewer than half its
    runs remain; False if none logged it. ``counts``: seed counts in the legend labels."""
    grid = _grid([r for g in groups for r in g.curve_runs], tag)
    if grid is None:
        ax.text(0.5, 0.5, "not logged", transform=ax.transAxes, ha="center", va="center", color="0.5")
        return False
    for g in groups:
        runs = [r for r in g.curve_runs if tag in r.scalars]
        if not runs:
            continue
        curves = np.stack([curve_on_grid(*r.scalars[tag], grid, smooth, r.end_step) for r in runs])
        mean, lo, hi = mean_band(curves)
        few = ~enough_runs(curves)
        mean[few], lo[few], hi[few] = np.nan, np.nan, np.nan
        style = styles[g.label]
        marker = "o" if len(grid) == 1 else None
        ax.plot(grid, mean, label=legend_label(g, counts), marker=marker, markersize=3, **style)
        band = np.isfinite(lo)
        if band.any():
            ax.fill_between(grid, lo, hi, where=band, color=style["color"], alpha=0.2, linewidth=0)
    from matplotlib.ticker import EngFormatter

    ax.xaxis.set_major_formatter(EngFormatter(sep=""))
    ax.set_xlabel("environment steps")
    ax.set_ylabel(LABELS.get(tag, tag))
    return True


def _threshold_line(ax, value: float | None) -> None:
    if value is not None:
        ax.axhline(value, color="0.4", linestyle="--", linewidth=0.8, zorder=1)
        ax.annotate(f"threshold {value:g}", (0.01, value), xycoords=("axes fraction", "data"), xytext=(0, 2),
                    textcoords="offset points", fontsize=6, color="0.4", va="bottom")  # fmt: skip


def _subplots(rows: int, cols: int, width: float, height: float):
    import matplotlib.pyplot as plt

    return plt.subplots(rows, cols, figsize=(width, height), squeeze=False, layout="constrained")


def figure_curves(env: str, groups: Sequence[Group], tags: Sequence[str], stem: str, smooth: int,
                  styles: dict[str, dict], out: Output, threshold: float | None = None):  # fmt: skip
    """One panel per tag (a row). Returns the figure (saved and closed, so that what is drawn can be checked);
    None, and nothing written, when no run logged any of the tags."""
    if not any(tag in r.scalars for g in groups for r in g.curve_runs for tag in tags):
        return None
    width = SINGLE if len(tags) == 1 else DOUBLE
    ncol_max, caption = 2 if len(tags) == 1 else 3, band_caption(smooth)
    labels = [legend_label(g) for g in groups]
    fig, axes = _subplots(1, len(tags), width, 2.0 + legend_height(width, labels, ncol_max, caption))
    for ax, tag in zip(axes[0], tags, strict=True):
        plot_curves(ax, groups, tag, smooth, styles)
        if tag == RETURN_TAG:
            _threshold_line(ax, threshold)
    title = env_title(env, groups)
    if len(tags) == 1:
        axes[0, 0].set_title(title)
    else:
        fig.suptitle(title, fontsize=8)
    legend_inside(fig, axes, list(styles), title=caption, ncol_max=ncol_max)
    what = ", ".join(LABELS.get(t, t) for t in tags)
    out.save(fig, f"{stem}_{slug(env)}", f"{title}: {what} against env steps; {caption}")
    return fig


def figure_all_returns(by_env: dict[str, list[Group]], smooth: int, styles: dict[str, dict],
                       thresholds: dict[str, float | None], out: Output) -> None:  # fmt: skip
    envs = list(by_env)
    cols = min(len(envs), 3)
    rows = math.ceil(len(envs) / cols)
    labels = list(dict.fromkeys(g.label for gs in by_env.values() for g in gs))
    caption = band_caption(smooth)
    fig, axes = _subplots(rows, cols, DOUBLE, 2.0 * rows + legend_height(DOUBLE, labels, 3, caption))
    for ax, env in zip(axes.ravel(), envs, strict=False):
        plot_curves(ax, by_env[env], RETURN_TAG, smooth, styles, counts=False)
        _threshold_line(ax, thresholds.get(env))
        ax.set_title(env_title(env, by_env[env]))
    for ax in axes.ravel()[len(envs) :]:
        ax.remove()
    legend_inside(fig, axes.ravel()[: len(envs)], list(styles), title=caption)
    out.save(fig, "returns", f"episodic return against env steps, every env; {caption}")


SCATTER_TITLE = "one point per completed run; ρ: Spearman rank correlation"


def _scatter_panel(ax, groups: Sequence[Group], tag: str, styles: dict[str, dict], env: str, first: bool) -> bool:
    """One env × measure panel: the env's name on the row's first panel, ρ over its runs on every panel."""
    xs, ys = [], []
    for g in groups:
        pts = [(run_mean(r, tag), r.final_return) for r in g.completed]
        pts = [(x, y) for x, y in pts if x is not None and y is not None]
        if not pts:
            continue
        x, y = np.array(pts).T
        ax.scatter(x, y, s=14, color=styles[g.label]["color"], marker=marker_of(styles[g.label]), label=g.label,
                   alpha=0.85, edgecolors="none")  # fmt: skip
        xs += list(x)
        ys += list(y)
    rho = spearman(np.array(xs), np.array(ys))
    stats = f"ρ = {rho:.2f}, {len(xs)} runs" if math.isfinite(rho) else f"{len(xs)} runs"
    # the env's name on a line of its own: beside ρ it ran into the next panel's title
    ax.set_title(f"{env_title(env, groups)}\n{stats}" if first else stats, loc="left")
    if not xs:
        ax.text(0.5, 0.5, "not logged", transform=ax.transAxes, ha="center", va="center", color="0.5")
    ax.set_xlabel(f"{MEASURE_TAGS.get(tag, tag)} (run mean)")
    if first:
        ax.set_ylabel("final return")
    return bool(xs)


def figure_hypothesis(by_env: dict[str, list[Group]], styles: dict[str, dict], out: Output,
                      final: str = "mean of the last 20 training episodes"):  # fmt: skip
    """Each completed run's mean of each batch measure against its final return (``final``: what that is), a row
    per env. Returns the figure (saved and closed); None, and nothing written, if no run has both."""
    envs = [env for env, gs in by_env.items() if any(r.final_return is not None for g in gs for r in g.completed)]
    if not envs:
        return None
    labels = list(dict.fromkeys(g.label for env in envs for g in by_env[env]))
    height = 2.1 * len(envs) + legend_height(DOUBLE, labels, 3, SCATTER_TITLE)
    fig, axes = _subplots(len(envs), len(HYPOTHESIS_TAGS), DOUBLE, height)
    anything = False
    for row, env in enumerate(envs):
        for col, tag in enumerate(HYPOTHESIS_TAGS):
            anything |= _scatter_panel(axes[row, col], by_env[env], tag, styles, env, col == 0)
    if not anything:
        import matplotlib.pyplot as plt

        plt.close(fig)
        return None
    legend_inside(fig, axes, list(styles), title=SCATTER_TITLE)
    caption = (
        f"per completed run: the run's mean of each batch measure against its final return ({final}); "
        "ρ: Spearman rank correlation over the env's runs"
    )
    out.save(fig, "hypothesis", caption)
    return fig
