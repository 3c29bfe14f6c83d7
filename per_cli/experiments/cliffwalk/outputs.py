"""What ``per cliffwalk`` writes: ``cliffwalk.csv``, ``cliffwalk.json`` and a log-log ``cliffwalk.png`` (in
the replay kinds' colours that every ``per plot`` figure uses), and the table it prints."""

from __future__ import annotations

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
    """``cliffwalk.csv`` (one row per method and n), ``cliffwalk.json`` (settings, rows, every run) and
    ``cliffwalk.png`` (log-log updates against memory size)."""
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "cliffwalk.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for r in rows:
            d = asdict(r)
            writer.writerow({k: d[k] for k in CSV_COLUMNS})
    payload = {
        "experiment": "blind_cliffwalk",
        "settings": {**asdict(settings), "alpha_used": {m: settings.alpha_for(m) for m in settings.methods}},
        "wall_time_s": round(seconds, 2),
        "summary": [asdict(r) for r in rows],
        "runs": [asdict(r) for r in results],
    }
    tmp = out / "cliffwalk.json.tmp"
    tmp.write_text(json.dumps(payload, indent=2))
    tmp.replace(out / "cliffwalk.json")
    plot(rows, settings, out / "cliffwalk.png")
    return payload


MARKERS = {"uniform": "o", "prioritized": "s", "rank": "^", "oracle": "D"}


def plot(rows: list[Summary], settings: CliffwalkSettings, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    capped_label = "some runs capped"
    for method in settings.methods:
        mine = sorted((r for r in rows if r.method == method), key=lambda r: r.n)
        if not mine:
            continue
        color, marker = kind_color(method), MARKERS.get(method, "o")
        x = np.array([r.memory_size for r in mine])
        med = np.array([max(r.median_updates, 0.5) for r in mine])
        lo = np.array([max(r.min_updates, 0.5) for r in mine])
        hi = np.array([max(r.max_updates, 0.5) for r in mine])
        ax.plot(x, med, marker=marker, color=color, label=method, linewidth=1.5, markersize=4)
        ax.fill_between(x, lo, hi, color=color, alpha=0.15, linewidth=0)
        capped = [r for r in mine if r.capped_runs]
        if capped:
            ax.scatter(
                [r.memory_size for r in capped],
                [r.median_updates for r in capped],
                marker="x",
                color="red",
                zorder=5,
                label=capped_label,
            )
            capped_label = None  # one legend entry
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("memory size (transitions, 2^(n+1) - 2)")
    ax.set_ylabel(f"updates until MSE < {settings.tolerance:g}")
    ax.set_title(f"Blind Cliffwalk, {settings.learner} Q-learning: median of {settings.runs} runs (band: min-max)")
    ax.title.set_fontsize(10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


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
