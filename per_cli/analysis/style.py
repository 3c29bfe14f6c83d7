"""How every figure looks: paper sizes and fonts, one fixed colour per replay kind everywhere, legends inside the
figure, and captions that say what the lines and bands are."""

from __future__ import annotations

import colorsys
import textwrap
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

SINGLE, DOUBLE = 3.5, 7.0  # figure widths in inches: one column, two columns of a paper
FORMATS = ("png", "svg", "pdf")
DPI = 200
# one colour per replay kind, everywhere: its KindSpec's colour (per_cli/replay/kinds.py; matplotlib's tab10
# values); kind+her: the kind's colour, dashed. Lines that are no replay kind:
OTHER_COLORS = {"oracle": "#9467bd"}  # the Blind Cliffwalk's oracle
SPARE_COLORS = ("#8c564b", "#e377c2", "#bcbd22", "#17becf", "#393b79", "#637939")  # other kinds, by name
STYLE = {
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "legend.fontsize": 7,
    "legend.title_fontsize": 6,
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


def kind_color(replay: str) -> str:
    """The fixed colour of a replay label's sampler kind (``prioritized+her`` -> prioritized's red)."""
    from per_cli.replay import KINDS

    kind = replay.partition("+")[0]
    spec = KINDS.get(kind)
    if spec is not None and spec.colour is not None:
        return spec.colour
    return OTHER_COLORS.get(kind, SPARE_COLORS[zlib.crc32(kind.encode()) % len(SPARE_COLORS)])


def shade(color: str, i: int, n: int) -> tuple[float, float, float]:
    """The ``i``-th of ``n`` shades of ``color``, dark to light (variants of one kind: settings of a sweep)."""
    from matplotlib.colors import to_rgb

    if n <= 1:
        return to_rgb(color)
    h, lightness, s = colorsys.rgb_to_hls(*to_rgb(color))
    lo, hi = max(0.18, lightness - 0.25), min(0.78, lightness + 0.25)
    return colorsys.hls_to_rgb(h, lo + (hi - lo) * i / (n - 1), s)


# line patterns that tell apart up to nine settings of one replay kind (its colour shaded besides), in order:
# solid, dashed, dotted, dash-dot, long dash, dash-dot-dot, loose dots, dense dashes, long dash-dot
LINE_PATTERNS = ("-", (0, (4, 1.5)), (0, (1, 1)), (0, (4, 1.5, 1, 1.5)), (0, (8, 2)), (0, (4, 1.5, 1, 1.5, 1, 1.5)),
                 (0, (1, 3)), (0, (2, 1)), (0, (8, 2, 1, 2)))  # fmt: skip
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", "*")  # the same settings' points in scatter plots, in step


def marker_of(style: dict) -> str:
    """The scatter marker that goes with a line style of :func:`line_styles` (its pattern's place in the list)."""
    return MARKERS[LINE_PATTERNS.index(style["linestyle"])]


def line_styles(labels: Sequence[tuple[str, str]]) -> dict[str, dict]:
    """Line properties per group label, from ``(group label, replay label)`` pairs in plotting order: the kind's
    colour, and across one replay label's settings a shade of it and a pattern of :data:`LINE_PATTERNS` (up to nine
    cells of a sweep told apart by more than shades); ``+her`` starts one pattern on."""
    by_replay: dict[str, dict[str, None]] = {}  # each replay label's group labels, in order, each once
    for label, replay in labels:
        by_replay.setdefault(replay, {})[label] = None
    styles = {}
    for replay, members in by_replay.items():
        first = 1 if replay.endswith("+her") else 0
        for i, label in enumerate(members):
            pattern = LINE_PATTERNS[(first + i) % len(LINE_PATTERNS)]
            styles[label] = {"color": shade(kind_color(replay), i, len(members)), "linestyle": pattern}
    return styles


def band_caption(smooth: int) -> str:
    """What a curve figure shows, in one line (the legend's title and the caption file)."""
    smoothing = "no smoothing" if smooth <= 1 else f"trailing mean of {smooth} logged points"
    return (f"line: mean over seeds, stopped where fewer than half a group's runs remain; band: 95% bootstrap CI over "
            f"seeds (none for 1 seed); {smoothing}")  # fmt: skip


_CHAR_PT = 0.55 * 7  # legend font 7 pt
_HANDLE_PT = 40  # the line sample, its padding and the column gap


def legend_layout(width_in: float, labels: Sequence[str], ncol_max: int = 3) -> tuple[list[str], int]:
    """The legend's labels wrapped to the figure's width, and how many columns fit (at most ``ncol_max``)."""
    width_pt = width_in * 72
    wrap = max(12, int((width_pt - _HANDLE_PT) / _CHAR_PT))
    wrapped = [textwrap.fill(label, wrap) for label in labels]
    longest = max((max(len(line) for line in lab.splitlines()) for lab in wrapped), default=1)
    ncol = max(1, min(len(wrapped), ncol_max, int(width_pt // (longest * _CHAR_PT + _HANDLE_PT))))
    return wrapped, ncol


def legend_height(width_in: float, labels: Sequence[str], ncol_max: int = 3, title: str = "") -> float:
    """Inches the legend of :func:`legend_inside` takes below the panels: its rows of (wrapped) labels and its
    title's lines, so that a figure grows with its legend instead of squeezing its panels."""
    wrapped, ncol = legend_layout(width_in, labels, ncol_max)
    rows = max(sum(label.count("\n") + 1 for label in wrapped[col::ncol]) for col in range(ncol))  # longest column
    title_lines = len(textwrap.wrap(title, int(width_in * 72 / (0.55 * 6))))  # (none for no title)
    return 0.15 + 0.14 * rows + 0.11 * title_lines


def legend_inside(fig, axes, order: Sequence[str] = (), title: str | None = None, ncol_max: int = 3) -> None:
    """One legend for every panel, below the panels (constrained layout makes room for it), with as many
    columns as fit the figure's width and long labels wrapped, so that no entry is cut off."""
    handles: dict[str, object] = {}
    for ax in np.ravel(axes):
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(lab, h)
    if not handles and not title:
        return
    rank = {label: i for i, label in enumerate(order)}
    items = sorted(handles.items(), key=lambda item: rank.get(item[0], len(rank)))
    labels, ncol = legend_layout(fig.get_figwidth(), [label for label, _ in items], ncol_max)
    fig.legend([h for _, h in items], labels, loc="outside lower center", ncol=ncol, frameon=False,
               title=textwrap.fill(title, int(fig.get_figwidth() * 72 / (0.55 * 6))) if title else None)  # fmt: skip


@dataclass
class Output:
    """Where figures go: the folder, the format, every file written, and each figure's caption (written
    together as ``captions.md``)."""

    dir: Path
    fmt: str
    files: list[Path] = field(default_factory=list)
    captions: dict[str, str] = field(default_factory=dict)

    def save(self, fig, stem: str, caption: str) -> None:
        """Write the figure as ``<stem>.<fmt>`` and close it."""
        import matplotlib.pyplot as plt

        path = self.dir / f"{stem}.{self.fmt}"
        fig.savefig(path, format=self.fmt, dpi=DPI)
        plt.close(fig)
        self.files.append(path)
        self.captions[path.name] = caption

    def write_captions(self, preamble: str = "") -> None:
        if not self.captions:
            return
        lines = ["# Figures", "", *([preamble, ""] if preamble else [])]
        lines += [f"- `{name}`: {text}" for name, text in self.captions.items()]
        path = self.dir / "captions.md"
        path.write_text("\n".join(lines) + "\n")
        self.files.append(path)
