"""What ``per cliffwalk`` writes (``cliffwalk.csv``, ``.json`` and ``.png``, in the replay kinds' colours) and the
table it prints."""

from __future__ import annotations

import contextlib
import csv
import json
from dataclasses import asdict
from pathlib import Path

import numpy as np

from per_cli.analysis.style import kind_color
from per_cli.experiments.cliffwalk.settings import CliffwalkSettings, Summary

CSV_COLUMNS = (
    "learner",
    "method",
    "n",
    "memory_size",
    "runs",
    "median_updates",
    "min_updates",
    "max_updates",
    "capped_runs",
    "cap",
    "speedup_vs_uniform",
)


def write_outputs(out: Path, settings: CliffwalkSettings, results, rows: list[Summary], seconds: float) -> dict:
    """``cliffwalk.csv`` (a row per method and n), ``cliffwalk.png`` (log-log updates against memory size; for one
    n, the methods side by side) and ``cliffwalk.json`` (settings, rows, runs, caption); all or none."""
    made = [p for p in (out, *out.parents) if not p.exists()]
    out.mkdir(parents=True, exist_ok=True)
    temporary = {name: out / f".{name}.tmp{Path(name).suffix}" for name in ("cliffwalk.csv", "cliffwalk.png",
                                                                             "cliffwalk.json")}  # fmt: skip
    try:
        with open(temporary["cliffwalk.csv"], "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(asdict(r) for r in rows)
        _, caption = plot(rows, settings, temporary["cliffwalk.png"])
        payload = {
            "experiment": "blind_cliffwalk",
            "settings": {**asdict(settings), "alpha_used": {m: settings.alpha_for(m) for m in settings.methods}},
            "wall_time_s": round(seconds, 2),
            "figure": {"file": "cliffwalk.png", "caption": caption},
            "summary": [asdict(r) for r in rows],
            "runs": [asdict(r) for r in results],
        }
        temporary["cliffwalk.json"].write_text(json.dumps(payload, indent=2))
    except BaseException:
        for path in temporary.values():
            path.unlink(missing_ok=True)
        for folder in made:  # the deepest first
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
    for name, path in temporary.items():
        path.replace(out / name)
    return payload


MARKERS = {"uniform": "o", "prioritized": "s", "rank": "^", "oracle": "D"}
CAPPED = "some runs capped (median is a lower bound)"


def _runs_text(runs: int) -> str:
    return "one run per point" if runs == 1 else f"median of {runs} runs"


def plot(rows: list[Summary], settings: CliffwalkSettings, path: Path):
    """Draw ``cliffwalk.png``; returns the figure (saved and closed, for checking what is drawn) and its caption."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns = sorted({r.n for r in rows})
    spread = settings.runs > 1  # min == max == median for one run: no band or bar to draw
    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    capped: list[tuple[float, float]] = []  # (x, median) of the points where some runs hit the cap
    methods = [m for m in settings.methods if any(r.method == m for r in rows)]
    for i, method in enumerate(methods):
        mine = sorted((r for r in rows if r.method == method), key=lambda r: r.n)
        color, marker = kind_color(method), MARKERS.get(method, "o")
        med, lo, hi = np.maximum([[r.median_updates, r.min_updates, r.max_updates] for r in mine], 0.5).T
        if len(ns) == 1:
            x = np.array([float(i)])
            bars = {"yerr": [med - lo, hi - med], "capsize": 4, "elinewidth": 1.2} if spread else {}
            ax.errorbar(x, med, color=color, marker=marker, linestyle="none", markersize=7, **bars)
        else:
            x = np.array([float(r.memory_size) for r in mine])
            ax.plot(x, med, marker=marker, color=color, label=method, linewidth=1.5, markersize=4)
            if spread:
                ax.fill_between(x, lo, hi, color=color, alpha=0.15, linewidth=0)
        capped += [(x[j], med[j]) for j, r in enumerate(mine) if r.capped_runs]
    if capped:
        ax.scatter(*zip(*capped, strict=True), marker="x", color="red", zorder=5, label=CAPPED)
    ax.set_yscale("log")
    ax.set_ylabel(f"updates until MSE < {settings.tolerance:g}")
    if len(ns) == 1:
        ax.set_xticks(range(len(methods)), methods)
        ax.set_xlim(-0.5, len(methods) - 0.5)
        ax.set_xlabel(f"replay method (n = {ns[0]}, memory size {rows[0].memory_size})")
        ax.grid(True, axis="y", which="both", alpha=0.3)
        where = f"n = {ns[0]}"
        shape = "a point per method" + (" (the median)" if spread else "")
    else:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("memory size (transitions, 2^(n+1) - 2)")
        ax.grid(True, which="both", alpha=0.3)
        ax.margins(x=0.05)
        where = f"n = {ns[0]}..{ns[-1]}"
        shape = "a line per method through the medians against memory size, log-log"
    ax.margins(y=0.12)  # on the log scale: no median or bar end on the top or bottom edge
    spread_text = f"{'bars' if len(ns) == 1 else 'band'}: min–max over runs" if spread else ""
    head = f"Blind Cliffwalk, {settings.learner} Q-learning, {where}"
    title = f"{head}: {_runs_text(settings.runs)}"
    ax.set_title(f"{head}\n{_runs_text(settings.runs)}" + (f" ({spread_text})" if spread_text else ""))
    ax.title.set_fontsize(10)
    if ax.get_legend_handles_labels()[0]:  # only what is drawn: the methods' lines (several n), capped marks
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    what = "per method, updates until the MSE of Q falls below the tolerance"
    caption = f"{title}: {what}; {shape}" + (f"; {spread_text}" if spread else "")
    caption += "; red ×: some runs hit the cap" if capped else ""
    return fig, caption


def format_table(rows: list[Summary]) -> str:
    lines = [
        f"{'method':11s} {'n':>3s} {'memory':>7s} {'median':>11s} {'min':>10s} {'max':>10s} {'capped':>6s} "
        f"{'x uniform':>9s}"
    ]
    for r in rows:
        speed = "-" if r.speedup_vs_uniform is None else f"{r.speedup_vs_uniform:.1f}"
        lines.append(
            f"{r.method:11s} {r.n:3d} {r.memory_size:7d} {r.median_updates:11.0f} {r.min_updates:10d} "
            f"{r.max_updates:10d} {r.capped_runs:6d} {speed:>9s}"
        )
    return "\n".join(lines)
