"""The scalars of one run directory: TensorBoard event files where the run wrote them, else its per-episode
``metrics.csv``."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from per_cli.train.logger import EPISODE_UPDATE_COLUMNS

RETURN_TAG = "charts/episodic_return"
# metrics.csv columns as the TensorBoard tags they average (the CSV holds per-episode values)
CSV_TAGS = {
    "return": RETURN_TAG,
    "length": "charts/episodic_length",
    "epsilon": "charts/epsilon",
    "success": "charts/success_rate",
    **{column: tag for tag, column in EPISODE_UPDATE_COLUMNS.items()},
}

Scalars = dict[str, tuple[np.ndarray, np.ndarray]]  # tag -> (steps, values)


def read_tensorboard(run_dir: Path) -> Scalars:
    """Every scalar of the run's event files, without downsampling (TensorBoard's ``EventAccumulator``)."""
    import logging

    from tensorboard.backend.event_processing import event_accumulator as ea

    # a resumed run's events restart at its checkpoint (purge_step): the accumulator drops the stale ones,
    # as it should, but says so on stderr
    logging.getLogger("tensorboard").setLevel(logging.ERROR)
    guidance = {ea.SCALARS: 0, ea.TENSORS: 1, ea.HISTOGRAMS: 1, ea.IMAGES: 1, ea.AUDIO: 1, ea.COMPRESSED_HISTOGRAMS: 1}
    acc = ea.EventAccumulator(str(run_dir), size_guidance=guidance)
    acc.Reload()
    out: Scalars = {}
    for tag in acc.Tags()["scalars"]:
        events = acc.Scalars(tag)
        out[tag] = (
            np.fromiter((e.step for e in events), dtype=np.int64, count=len(events)),
            np.fromiter((e.value for e in events), dtype=np.float64, count=len(events)),
        )
    return out


def read_metrics_csv(path: Path) -> Scalars:
    """The per-episode CSV as scalars over env steps (blank cells are left out)."""
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    out: Scalars = {}
    for column, tag in CSV_TAGS.items():
        pairs = [(int(row["step"]), float(row[column])) for row in rows if row.get(column) not in (None, "")]
        if pairs:
            steps, values = zip(*pairs, strict=True)
            out[tag] = (np.asarray(steps, dtype=np.int64), np.asarray(values, dtype=np.float64))
    return out


def read_scalars(run_dir: Path) -> tuple[Scalars, str]:
    """TensorBoard events where the run wrote them, else ``metrics.csv``; (scalars, source)."""
    if any(p.name.startswith("events.out.tfevents") for p in run_dir.iterdir()):
        scalars = read_tensorboard(run_dir)
        if scalars:
            return scalars, "tensorboard"
    if (run_dir / "metrics.csv").is_file():
        return read_metrics_csv(run_dir / "metrics.csv"), "metrics.csv"
    return {}, "none"
