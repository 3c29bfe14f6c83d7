"""The run directory: resolved config, TensorBoard events, per-episode CSV, and an atomic summary."""

from __future__ import annotations

import csv
import errno
import io
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from per_cli.rundir.events import EVENT_FILE_PREFIX, FLUSH_EVERY_S, EventFile

# summary.json "status": running while the process trains; then completed, failed (an error, or the updates
# diverged) or interrupted (Ctrl-C or SIGTERM: resumable from its latest checkpoint). UNREADABLE is never
# written: read_summary reports a summary.json it cannot parse with it.
RUNNING = "running"
COMPLETED = "completed"
FAILED = "failed"
INTERRUPTED = "interrupted"
UNREADABLE = "unreadable"
STATUSES = (RUNNING, COMPLETED, FAILED, INTERRUPTED, UNREADABLE)

# the replay's state at each episode's end (Fedus et al. 2020), in the CSV columns on the right
EPISODE_REPLAY_COLUMNS = {"replay/replay_ratio": "replay_ratio", "replay/oldest_age": "oldest_age"}
# per-episode means of these update scalars go into the CSV columns on the right
EPISODE_UPDATE_COLUMNS = {
    "losses/td_loss": "loss",
    "losses/q_values": "q_values",
    "td_error/mean": "td_error_mean",
    "td_error/max": "td_error_max",
    "replay/correlation_count": "correlation_count",
    "replay/sample_age": "sample_age",
    "replay/is_weight_mean": "is_weight_mean",
    "losses/td_loss_unweighted": "td_loss_unweighted",
    "iid/state_diversity": "state_diversity",
    "iid/episode_diversity": "episode_diversity",
}
EPISODE_COLUMNS = [
    "step", "episode", "return", "length", "wall_time", "epsilon", "success",
    *EPISODE_UPDATE_COLUMNS.values(), *EPISODE_REPLAY_COLUMNS.values(),
]  # fmt: skip


def atomic_write_text(path: Path, text: str) -> None:
    """Write via a temporary file in the same directory and rename, so readers never see half a file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o644)  # mkstemp makes it private; a summary is for everyone who can read the run
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_summary(run_dir: Path, summary: dict[str, Any]) -> None:
    """Write summary.json atomically; on a full disk (where a ``failed`` summary must still be recorded), in place
    over the old one, whose blocks the new one reuses."""
    clean = {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in summary.items()}
    path = run_dir / "summary.json"
    text = json.dumps(clean, indent=2) + "\n"
    try:
        atomic_write_text(path, text)
    except OSError as exc:
        if exc.errno != errno.ENOSPC or not path.is_file():
            raise
        with open(path, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())


def read_summary(run_dir: Path) -> dict[str, Any] | None:
    """The run's summary; None if it has none yet; ``{"status": UNREADABLE, "error": ...}`` if the file is
    not a JSON object (truncated by a full disk, edited by hand): such a run is neither running nor done."""
    path = run_dir / "summary.json"
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:  # (nested thousands deep)
        return {"status": UNREADABLE, "error": f"cannot read {path}: {type(exc).__name__}: {str(exc)[:100]}"}
    if not isinstance(data, dict) or not isinstance(data.get("status"), str):
        return {"status": UNREADABLE, "error": f"{path} is not a run summary (no status)"}
    return data


_MAX_CLOCK_WAIT_S = 5.0


def wait_for_a_later_event_file_name(run_dir: Path) -> None:
    """Sleep until a new TensorBoard event file in ``run_dir`` will sort after every existing one: a resumed run's file
    (its purge marker) must be read last, and within one second names sort by host, pid and counter as text."""
    seconds = [int(field) for p in run_dir.glob(EVENT_FILE_PREFIX + "*")
               if (field := p.name[len(EVENT_FILE_PREFIX):].split(".")[0]).isdigit()]  # fmt: skip
    if not seconds:
        return
    delay = max(seconds) + 1 - time.time()
    if delay > _MAX_CLOCK_WAIT_S:
        print(
            f"warning: event files in {run_dir} are dated {delay:.0f} s ahead of this machine's clock; "
            "TensorBoard may order the resumed run's events before the earlier ones",
            file=sys.stderr,
        )
    elif delay > 0:
        time.sleep(delay)


class RunLogger:
    """Owns everything a run writes except checkpoints. ``append`` continues an existing run's logs. Rows and events
    are buffered: on disk every ``FLUSH_EVERY_S`` seconds, at ``flush`` (checkpoints) and ``close``."""

    def __init__(self, run_dir: Path, *, tensorboard: bool = True, append: bool = False, purge_step: int | None = None):
        self.run_dir = run_dir
        csv_path = run_dir / "metrics.csv"
        new_csv = not (append and csv_path.exists())
        self._csv_file = open(csv_path, "w" if new_csv else "a", newline="")  # noqa: SIM115 - closed in close()
        self._rows = io.StringIO()  # whole rows not yet written: the file never ends in half a row
        self._csv = csv.writer(self._rows)  # (what csv.DictWriter writes, without its per-row dict work)
        # a resumed run's rows keep the columns of the file they continue (one written before a column existed)
        self._columns = EPISODE_COLUMNS if new_csv else csv_header(csv_path) or EPISODE_COLUMNS
        if new_csv:
            self._csv.writerow(EPISODE_COLUMNS)
        self._flush_csv()
        self._tb: EventFile | None = None
        if tensorboard:
            if append:
                wait_for_a_later_event_file_name(run_dir)
            self._tb = EventFile(run_dir, purge_step=purge_step)

    def scalars(self, values: dict[str, float], step: int) -> None:
        """Log ``values`` at ``step`` as ONE event (:meth:`EventFile.scalars`)."""
        if self._tb is not None and values:
            self._tb.scalars(values, step)

    def episode(self, row: dict[str, Any]) -> None:
        """One metrics.csv row: ``row``'s value of each of ``EPISODE_COLUMNS`` (blank where missing or None;
        other keys are ignored)."""
        self._csv.writerow(["" if (v := row.get(k)) is None else v for k in self._columns])
        if time.monotonic() - self._csv_flushed >= FLUSH_EVERY_S:
            self._flush_csv()

    def _flush_csv(self) -> None:
        self._csv_file.write(self._rows.getvalue())
        self._csv_file.flush()
        self._rows.seek(0)
        self._rows.truncate()
        self._csv_flushed = time.monotonic()

    def flush(self) -> None:
        """Put every row and event logged so far on disk (at checkpoints: a run killed later keeps what precedes
        them)."""
        self._flush_csv()
        if self._tb is not None:
            self._tb.flush()

    def close(self) -> None:
        self._flush_csv()
        self._csv_file.close()
        if self._tb is not None:
            self._tb.close()


def csv_header(path: Path) -> list[str]:
    """The column names of an existing metrics.csv (none if it has no header yet)."""
    with path.open(newline="") as f:
        return next(csv.reader(f), [])
