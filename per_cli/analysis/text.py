"""Small text helpers shared by the tables of ``per plot`` and ``per grid``: file-name slugs, numbers in
cells, and column-aligned plain-text tables."""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Iterable, Sequence
from typing import Any, TextIO


def slug(text: str) -> str:
    """``text`` as one safe path component: runs of other characters than ``A-Za-z0-9._+-`` become ``-``;
    never empty (``x``)."""
    return re.sub(r"[^A-Za-z0-9._+-]+", "-", text).strip("-") or "x"


def num(value: Any, digits: int = 1, missing: str = "-") -> str:
    """A number with ``digits`` decimals; ``missing`` for None, NaN and anything that is not a number (a
    hand-edited summary.json's ``"abc"``: a table cell, never a traceback)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value):
        return missing
    return f"{value:.{digits}f}"


def print_table(header: Sequence[str], rows: Sequence[Sequence[str]], out: TextIO) -> None:
    """Left-aligned columns two spaces apart, trailing blanks stripped; nothing printed for no rows."""
    if not rows:
        return
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    for row in (header, *rows):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip(), file=out)


def heading(title: str, made: str = "") -> list[str]:
    """A Markdown document's first lines: its ``title`` and, where given, what ``made`` it
    (:func:`per_cli.analysis.provenance.made_by`), each followed by a blank line."""
    return [title, "", *([made, ""] if made else [])]


def markdown_table(head: Sequence[str], rows: Iterable[Sequence[str]], left: int) -> list[str]:
    """A Markdown table's lines: the first ``left`` columns left-aligned (labels), the others right-aligned."""
    align = "|" + "|".join("---" if i < left else "---:" for i in range(len(head))) + "|"
    return ["| " + " | ".join(head) + " |", align, *("| " + " | ".join(cells) + " |" for cells in rows)]
