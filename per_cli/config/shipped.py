"""The configs shipped inside the package, and how a ``--config`` argument finds one."""

from __future__ import annotations

import difflib
import itertools
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from per_cli.errors import ConfigError

SUFFIXES = (".yaml", ".yml")
_SENTENCE_END = re.compile(r"(?<!\bal)(?<!\be\.g)(?<!\bi\.e)\.(?=\s|$)")
DESCRIPTION_MAX = 110


def shipped_root() -> Path:
    """The folder of the shipped configs (package data; a real directory for every pip install)."""
    root = resources.files("per_cli").joinpath("configs")
    if not isinstance(root, Path):  # pragma: no cover - a zipped install; setuptools wheels unpack to disk
        raise RuntimeError("per_cli is installed as a zip; the shipped configs need an unpacked install")
    return root


def shipped_configs(root: Path | None = None) -> dict[str, Path]:
    """Every shipped config (or every config below ``root``), by name: its path below the root, POSIX-style,
    without ``.yaml`` (``cartpole_per``, ``seed001/cartpole_per``), sorted."""
    root = shipped_root() if root is None else root
    found = [p for p in root.rglob("*") if p.suffix in SUFFIXES and p.is_file()]
    found.sort(key=lambda p: p.relative_to(root).as_posix())
    return {p.relative_to(root).with_suffix("").as_posix(): p for p in found}


def normalize_name(text: str) -> str:
    """``./configs/cartpole_per.yaml`` -> ``cartpole_per``: the name a shipped config would have."""
    name = text.strip().replace("\\", "/")
    while name.startswith("./"):
        name = name[2:]
    name = name.removeprefix("configs/")
    for suffix in SUFFIXES:
        name = name.removesuffix(suffix)
    return name


def describe(path: Path, cut: bool = True) -> str:
    """The first sentence of the file's leading ``#`` lines, on one line; past :data:`DESCRIPTION_MAX` characters,
    the lead of a "lead: details" sentence, or (with ``cut``) the sentence cut with "…"."""
    header = itertools.takewhile(lambda line: line.startswith("#"), path.read_text(encoding="utf-8").splitlines())
    text = " ".join(words for line in header if (words := line.lstrip("#").strip()))
    match = _SENTENCE_END.search(text)
    if match:
        text = text[: match.start() + 1]
    head, colon, _ = text.partition(": ")
    if len(text) > DESCRIPTION_MAX and colon and len(head) >= 30:  # "DQN on X with Y (paper): details..."
        text = head
    return text if len(text) <= DESCRIPTION_MAX or not cut else text[: DESCRIPTION_MAX - 1].rstrip() + "…"


@dataclass(frozen=True)
class Resolved:
    """A ``--config`` argument resolved: the file to read, its shipped name (if it is a shipped config) and a
    note to show the user (a local file shadowing a shipped config), or None."""

    path: Path
    name: str | None
    note: str | None = None


def resolve_config(text: str | Path, option: str = "--config", root: Path | None = None) -> Resolved:
    """Resolve a ``--config`` argument: an existing path first, then a shipped config by name (``root``: look
    among the configs below this folder instead of the shipped ones)."""
    text = str(text)
    shipped = shipped_configs(root)
    path = Path(text)
    if path.is_dir():
        raise ConfigError(f"{option} {text}: is a directory; give a YAML file (per configs lists the shipped ones)")
    if path.exists():
        return Resolved(path, None, _shadow_note(path, text, shipped))
    name = normalize_name(text)
    if name in shipped:
        return Resolved(shipped[name], name)
    if "/" not in name:
        nested = [n for n in shipped if n.rpartition("/")[2] == name]
        if len(nested) == 1:
            return Resolved(shipped[nested[0]], nested[0])
        if len(nested) > 1:
            raise ConfigError(f"{option} {text}: ambiguous; shipped configs of that name: {', '.join(nested)}")
    raise ConfigError(f"{option} {text}: no such file and no shipped config of that name{_closest(name, shipped)}")


def _shadow_note(path: Path, text: str, shipped: dict[str, Path]) -> str | None:
    name = normalize_name(text)
    own = shipped.get(name)
    if own is None or path.resolve() == own.resolve():
        return None
    return f"{text} is a local file; it shadows the shipped config '{name}' (use another file name to avoid this)"


def _closest(name: str, shipped: dict[str, Path]) -> str:
    pool = list(shipped) + sorted({n.rpartition("/")[2] for n in shipped})
    close = list(dict.fromkeys(difflib.get_close_matches(name, pool, n=3, cutoff=0.5)))
    if close:
        return f"; closest: {', '.join(close)} (per configs lists them all)"
    return "; per configs lists them all"
