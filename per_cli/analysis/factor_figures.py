"""Figures of a grid's factors, per env: a heat map of the final-return IQM over the first two factors, and each
factor's marginal effect with 95% CIs (a line across numeric levels only; categories are points)."""

from __future__ import annotations

import textwrap

import numpy as np

from per_cli.analysis.factors import REPLAY_FACTOR, Design, marginal
from per_cli.analysis.groups import format_value
from per_cli.analysis.stats import iqm
from per_cli.analysis.style import DOUBLE, SINGLE, Output, kind_color
from per_cli.analysis.text import slug


def figure_heatmap(design: Design, out: Output, env: str) -> None:
    """The IQM of the final return over the first two factors; nothing for a one-factor design. ``env``: the env
    as run, for the title."""
    if len(design.factors) < 2:
        return
    import matplotlib.pyplot as plt

    y = design.y  # the IQM in each (level of factor 0, level of factor 1), over seeds and other factors
    values = iqm(y.reshape(y.shape[0], y.shape[1], -1), axis=-1)
    rows, cols = design.levels[0], design.levels[1]
    fig, ax = plt.subplots(figsize=(SINGLE, 0.9 + 0.32 * len(rows) + 0.6), layout="constrained")
    image = ax.imshow(values, cmap="viridis", aspect="auto", origin="lower")
    lo, hi = np.nanmin(values), np.nanmax(values)
    for (r, c), v in np.ndenumerate(values):
        dark = hi > lo and (v - lo) / (hi - lo) < 0.5
        ax.text(c, r, f"{v:.3g}", ha="center", va="center", fontsize=6, color="white" if dark else "black")
    ax.set_xticks(range(len(cols)), [format_value(v) for v in cols])
    ax.set_yticks(range(len(rows)), [format_value(v) for v in rows])
    ax.set_xlabel(design.factors[1])
    ax.set_ylabel(design.factors[0])
    ax.grid(False)
    others = f", pooled over {', '.join(design.factors[2:])}" if len(design.factors) > 2 else ""
    ax.set_title(f"{env}: final-return IQM over {len(design.seeds)} seeds{others}")
    fig.colorbar(image, ax=ax, label="final return IQM")
    caption = (
        f"{design.env}: IQM over seeds of the final return (mean of the last 20 training episodes) in each cell of "
        f"{design.factors[0]} × {design.factors[1]}{others}"
    )
    out.save(fig, f"factors_heatmap_{slug(design.env)}", caption)


def figure_marginals(design: Design, out: Output, env: str | None = None):
    """One panel per factor: the final-return IQM at each of its levels with a 95% bootstrap CI; numeric levels are
    joined by a line, categorical ones (the replay kind) are separate points. Returns the figure (saved, closed)."""
    import matplotlib.pyplot as plt

    k = len(design.factors)
    fig, axes = plt.subplots(1, k, figsize=(SINGLE if k == 1 else DOUBLE, 2.3), squeeze=False, layout="constrained")
    for i, ax in enumerate(axes[0]):
        stats = np.array(marginal(design, i))
        levels = design.levels[i]
        x = np.arange(len(levels))
        yerr = [stats[:, 0] - stats[:, 1], stats[:, 2] - stats[:, 0]]
        if design.numeric(i):
            ax.errorbar(x, stats[:, 0], yerr=yerr, color="0.2", marker="o", markersize=3, capsize=2, linewidth=1)
        else:
            kinds = design.factors[i] == REPLAY_FACTOR
            for xi, level, (mid, lo, hi) in zip(x, levels, stats, strict=True):
                ax.errorbar([xi], [mid], yerr=[[mid - lo], [hi - mid]], color=kind_color(level) if kinds else "0.2",
                            linestyle="none", marker="o", markersize=4, capsize=2, elinewidth=1)  # fmt: skip
        ax.set_xticks(x, [format_value(v) for v in levels])
        ax.set_xlim(-0.5, len(levels) - 0.5)  # no point on the axis's edge
        ax.margins(y=0.1)
        ax.set_xlabel("replay kind" if design.factors[i] == REPLAY_FACTOR else design.factors[i])
        ax.set_ylabel("final return IQM" if i == 0 else "")
        if not design.numeric(i):
            ax.grid(False, axis="x")
    only_kind = design.factors == [REPLAY_FACTOR]
    what = "final-return IQM per replay kind (no swept key)" if only_kind else "marginal effect of each factor"
    title = f"{env or design.env}: {what}, 95% CI over seeds"
    fig.suptitle(textwrap.fill(title, 55 if k == 1 else 110), fontsize=8)
    pooled = "" if k == 1 else ", pooled over the other factors' levels"
    joined = [f for j, f in enumerate(design.factors) if design.numeric(j)]
    shape = (
        f"numeric levels ({', '.join(joined)}) evenly spaced and joined by a line; other levels separate points"
        if joined
        else "categorical levels: separate points, not a trend"
    )
    caption = (
        f"{design.env}: design {design.describe()}. IQM of the final return at each level of each factor{pooled}; "
        f"bars: 95% stratified bootstrap CI resampling seeds within each cell ({len(design.seeds)} seeds); {shape}"
    )
    out.save(fig, f"factors_marginal_{slug(design.env)}", caption)
    return fig
