"""The grid directory and the state of each run in it: the manifest (``grid.yaml``), the audit log (``grid.log``), and
what a run's ``summary.json`` says about whether to skip, resume or start it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import NamedTuple

import yaml

from per_cli.errors import ConfigError
from per_cli.rundir.logger import COMPLETED, FAILED, INTERRUPTED, UNREADABLE, atomic_write_text, read_summary
from per_cli.sweep.plan import GridPlan

MANIFEST = "grid.yaml"
EVENT_LOG = "grid.log"
LOCKS_DIR = ".locks"
GRID_LOCK = ".grid.lock"
NEW, UNFINISHED = "new", "unfinished"  # no directory yet; died mid-run (summary says running) or half-made


class RunState(NamedTuple):
    """``state``: ``new``, ``completed``, ``failed``, ``interrupted``, ``unreadable`` or ``unfinished`` (the process
    died: its summary says running, or the directory has none); ``summary``: its summary.json, if any."""

    state: str
    summary: dict | None


def run_state(run_dir: Path) -> RunState:
    summary = read_summary(run_dir)
    if summary is None:
        return RunState(UNFINISHED if run_dir.exists() else NEW, None)
    status = summary.get("status")
    return RunState(status if status in (COMPLETED, FAILED, INTERRUPTED, UNREADABLE) else UNFINISHED, summary)


def has_checkpoint(run_dir: Path) -> bool:
    if not (run_dir / "checkpoints").is_dir():  # cheap test first: per_cli.train.checkpoints.checkpoint imports torch
        return False
    from per_cli.train.checkpoints.checkpoint import latest_checkpoint

    try:
        return latest_checkpoint(run_dir) is not None
    except ConfigError:  # a ``latest`` that is refused or unreadable: the resume says so (worker.decide)
        return True


def action_for(state: str, retry_failed: bool, run_dir: Path | None = None) -> str:
    """``skip``, ``retry`` (start again after a failure), ``resume`` (from the run's checkpoint; only when
    ``run_dir`` is given and has one), ``restart`` or ``start``."""
    if state == COMPLETED:
        return "skip"
    if state == UNREADABLE and retry_failed and run_dir is not None and has_checkpoint(run_dir):
        return "resume"  # its summary is lost, not its training: continue, keeping metrics.csv and events
    if state in (FAILED, UNREADABLE):
        return "retry" if retry_failed else "skip"
    if state in (INTERRUPTED, UNFINISHED):
        return "resume" if run_dir is not None and has_checkpoint(run_dir) else "restart"
    return "start"


SET_ASIDE_DIR = ".set-aside"  # hidden: per plot and the grid never take what is in it for a run


def set_aside(run_dir: Path) -> Path:
    """Move ``run_dir`` to ``<grid>/.set-aside/<name>-<time>`` (never deleted: a run whose summary.json cannot
    be read may still hold a whole metrics.csv and event file) and return where it went."""
    target = run_dir.parent / SET_ASIDE_DIR / f"{run_dir.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    target.parent.mkdir(exist_ok=True)
    suffix = 0
    while target.exists():
        suffix += 1
        target = target.with_name(f"{target.name.rsplit('.', 1)[0]}.{suffix}")
    run_dir.rename(target)
    return target


def missing_config_note(run_dir: Path, state: str) -> str | None:
    """A completed run without its config.yaml is not whole (plots cannot group it by its settings): said
    once by the grid, which does not run it again."""
    if state == COMPLETED and not (run_dir / "config.yaml").is_file():
        return f"{run_dir.name}: completed, but its config.yaml is missing; per plot cannot group it by its settings"
    return None


def skip_note(state: str) -> str:
    """Why a run is not run, for the tables and the workers' answers."""
    return {
        COMPLETED: "already complete",
        FAILED: "failed before; --retry-failed re-runs it",
        UNREADABLE: "summary.json cannot be read; --retry-failed resumes it (or sets its files aside and re-runs it)",
    }.get(state, "")


def read_manifest(grid_dir: Path) -> dict | None:
    from per_cli.config.reading import file_limit, parse_yaml

    try:
        text = (grid_dir / MANIFEST).read_text()
        data = parse_yaml(grid_dir / MANIFEST, text, file_limit(text))  # (an alias bomb: unreadable, at once)
    except (FileNotFoundError, NotADirectoryError, UnicodeDecodeError, ConfigError):
        return None
    return data if isinstance(data, dict) else None


def write_manifest(grid_dir: Path, command: str, request: dict, runs: list[dict]) -> None:
    """``grid.yaml``: the request that made the grid (what resuming compares), the command, and the runs;
    its creation time is kept across resumes."""
    old = read_manifest(grid_dir) or {}
    data = {
        "version": 1,
        "created": old.get("created") or time.strftime("%Y-%m-%dT%H:%M:%S"),
        "updated": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "command": command,
        "request": request,
        "notes": [],
        "runs": runs,
    }
    atomic_write_text(grid_dir / MANIFEST, yaml.safe_dump(data, sort_keys=False, allow_unicode=True))


# Where the configs were read from: a checkout's absolute path, not what the grid is (the runs' configs are).
PATH_KEYS = ("config", "configs_dir")


def first_config_change(plan: GridPlan, grid_dir: Path) -> str | None:
    """The first planned run already in ``grid_dir`` whose config.yaml is not the config the plan gives it."""
    from per_cli.config import read_yaml

    for spec in plan.runs:
        stored = grid_dir / spec.name / "config.yaml"
        if not stored.is_file():
            continue
        try:
            if read_yaml(stored) != spec.config:
                return spec.name
        except ConfigError:  # unreadable: nothing shows it is the same run
            return spec.name
    return None


def find_grid_dir(plan: GridPlan, runs_dir: Path, name: str | None) -> tuple[Path, bool]:
    """The grid directory of ``plan`` and whether it exists already: ``--name``'s (a request that differs only in
    ``--seeds`` grows it; one with a run whose config changed is refused), else an existing grid of the same
    request, else a new ``grid-<timestamp>`` (not created). ``name`` is checked by the CLI (``check_run_name``)."""
    wanted = plan.request.manifest()
    if name is not None:
        grid_dir = runs_dir / name
        if not grid_dir.exists():
            return grid_dir, False
        manifest = read_manifest(grid_dir)
        if manifest is None:
            raise ConfigError(f"--name {name}: {grid_dir} exists and is not a grid directory (no {MANIFEST})")
        changed = first_config_change(plan, grid_dir)
        if changed is not None:
            raise ConfigError(
                f"--name {name}: {grid_dir / changed / 'config.yaml'} differs from the config this request gives "
                "that run (was a config file edited?); restore it to resume the grid, or choose another --name"
            )
        # (PATH_KEYS: the same configs, read from another path)
        diff = [k for k in wanted if manifest.get("request", {}).get(k) != wanted[k] and k not in PATH_KEYS]
        if diff and diff != ["seeds"]:  # other seeds of the same grid: its runs are kept, new seeds added
            raise ConfigError(
                f"--name {name}: {grid_dir} was made by a different request (differs in {', '.join(diff)}); "
                "repeat its options to resume it, or choose another --name"
            )
        return grid_dir, True
    matches = sorted(
        p.parent
        for p in runs_dir.glob(f"grid-*/{MANIFEST}")
        if (m := read_manifest(p.parent)) is not None and m.get("request") == wanted
    )
    if matches and first_config_change(plan, matches[-1]) is None:
        return matches[-1], True  # (after a config file was edited the same options make a new grid)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    grid_dir, n = runs_dir / f"grid-{stamp}", 1
    while grid_dir.exists():
        n += 1
        grid_dir = runs_dir / f"grid-{stamp}-{n}"
    return grid_dir, False


class EventLog:
    """``grid.log``: one line per start and end of a run, appended and flushed (an audit trail of attempts)."""

    def __init__(self, path: Path):
        self._file = open(path, "a", buffering=1)  # noqa: SIM115 - closed in close(); line-buffered: each line flushed

    def write(self, event: str, name: str, detail: str = "") -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        self._file.write(f"{stamp} {event} {name} {detail}".rstrip() + "\n")

    def close(self) -> None:
        self._file.close()
