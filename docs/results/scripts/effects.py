"""The causal study's effects on final return, one table per env, from the committed run summaries alone.

    python docs/results/scripts/effects.py [--out docs/results/causal/effects.md]

Each effect is a contrast between two cells of one design that differ in the one thing the effect names (the
designs: docs/results/causal/README.md). For each, over the cells' completed runs (summary.json
``final_return_mean``: the mean return of a run's last 20 training episodes): the IQM difference X − Y with its
95% percentile bootstrap CI (each cell's seeds resampled on their own), the probability of improvement P(X > Y)
and the two-sided Mann–Whitney p (``per_cli.analysis.comparisons.compare_pair``, the measures of ``per plot``'s
comparisons table), with the Holm-adjusted p over the env's table (the family: every effect of that table with a
p; bold follows the adjusted p) and, below 5 seeds a cell, no interval and the smallest p the test can reach.
Beside the final return, the IQM differences of the runs' whole-curve measures: AUC (mean return over all
episodes) and peak (best mean of 20 consecutive episodes), and each cell's drop from peak to final (IQM), from
summary.json where it has them, else from the runs' logged returns (metrics.csv, or the design's packed
metrics.tar.xz, read without unpacking). An effect whose design has no runs yet is listed as not run.

MountainCar (zoo protocol) has designs 1 and 2; MinAtar Breakout and Freeway have design 4, whose reference cells
(`uniform` and `none`, n = 1) are the committed runs of docs/results/minatar/ (made before `replay.n_step`,
`replay.chunk` and `replay.is_weights` existed: their defaults, `DEFAULTS`, stand for the missing keys).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import tarfile
from pathlib import Path
from typing import NamedTuple

import numpy as np
import yaml

from per_cli.analysis.comparisons import compare_pair, marked, p_cells
from per_cli.analysis.envname import env_as_run
from per_cli.analysis.provenance import made_by
from per_cli.analysis.stats import holm, iqm
from per_cli.analysis.tables import with_ci
from per_cli.envs import resolve_env_id
from per_cli.rundir.returns import return_measures

RESULTS = Path(__file__).resolve().parents[1]
CAUSAL = RESULTS / "causal"
ENVS = ("cartpole", "acrobot", "mountaincar", "breakout-minatar", "freeway-minatar")
PROTOCOLS = {"mountaincar": "zoo protocol"}  # (the others: the notebook's, or the MinAtar DQN's)
# a config key a run's config.yaml lacks (written before the key existed) has its default
DEFAULTS = {"replay.n_step": 1, "replay.chunk": 1, "replay.is_weights": "memory_max"}

# α 0: every IS rule gives weights 1 (P(i) is uniform, so (N·P(i))^-β = 1), and the three α-0 cells of design 2
# are identical run for run (CartPole: 50 of 50 seeds); the α-0 cell is the memory_max one, run on every env
ALPHA_0 = {"replay.alpha": 0.0, "replay.is_weights": "memory_max"}

# design 3's cell at the notebook's capacity and replay ratio; each contrast changes one key of it
D3 = {"replay.capacity": 10000, "train.replay_ratio": 1.0}


# (effect, design folder (relative to causal/, {env} filled in), X cell, Y cell, what is held fixed)
# a cell: the replay label and the config values that pick it
def design1(batch: int, small_window: int, capacity: int, fixed: tuple[str, str]) -> list:
    """Design 1's two effects for a protocol of batch size ``batch`` (the chunk of a whole batch), the small window
    and the capacity (``fixed``: what the measures say is held fixed in each)."""
    whole, small, full = {"replay.chunk": batch}, {"replay.window": small_window}, {"replay.window": capacity}
    return [
        ("correlation at a fixed age", "d1/{env}", ("uniform", whole | full), ("uniform", {"replay.chunk": 1} | full),
         f"chunk {batch} vs 1, both W = capacity: {fixed[0]}"),
        ("recency at a fixed correlation", "d1/{env}", ("uniform", whole | small), ("uniform", whole | full),
         f"W {small_window} vs capacity, both chunk {batch}: {fixed[1]}"),
    ]  # fmt: skip


NOTEBOOK_D1 = design1(64, 256, 10000, (
    "sample age ~equal, episode diversity 0.05 vs 0.7-0.9",
    "episode diversity ~0.05-0.06 in both, sample age ~127 vs ~4,000+",
))  # fmt: skip
ZOO_D1 = design1(128, 512, 10000, (
    "sample age ~4,850 in both, episode diversity 0.03 vs 0.87",
    "episode diversity ~0.03 in both, sample age ~256 vs ~4,850",
))  # fmt: skip

EFFECTS = [
    ("TD-error focus at a fixed mean IS weight (α 1)", "d2/{env}",
     ("prioritized", {"replay.alpha": 1.0, "replay.is_weights": "batch_mean"}),
     ("prioritized", ALPHA_0),
     "α 1 vs 0 (uniform draws), both IS weights normalised to mean 1 per batch"),
    ("TD-error focus at a fixed mean IS weight (α 0.6)", "d2/{env}",
     ("prioritized", {"replay.alpha": 0.6, "replay.is_weights": "batch_mean"}),
     ("prioritized", ALPHA_0),
     "α 0.6 vs 0, both IS weights normalised to mean 1 per batch"),
    ("the IS weights' scale (α 1)", "d2/{env}",
     ("prioritized", {"replay.alpha": 1.0, "replay.is_weights": "memory_max"}),
     ("prioritized", {"replay.alpha": 1.0, "replay.is_weights": "batch_mean"}),
     "the paper's weights (mean < 1) vs mean-1 weights, same draws (α 1); under Adam a constant scale divides out"),
    ("TD-error focus with the paper's weights (α 1)", "d2/{env}",
     ("prioritized", {"replay.alpha": 1.0, "replay.is_weights": "memory_max"}),
     ("prioritized", ALPHA_0),
     "the notebook's knob: focus and the weights' scale moving together"),
    ("TD-error focus with the paper's weights (α 0.6)", "d2/{env}",
     ("prioritized", {"replay.alpha": 0.6, "replay.is_weights": "memory_max"}),
     ("prioritized", ALPHA_0), "α 0.6 vs 0, the paper's IS weights"),
    ("TD-error focus with no IS correction (α 1)", "d2/{env}",
     ("prioritized", {"replay.alpha": 1.0, "replay.is_weights": "off"}),
     ("prioritized", ALPHA_0), "α 1 vs 0, weights 1 (mean 1, but the focus's bias left uncorrected)"),
    ("TD-error focus with no IS correction (α 0.6)", "d2/{env}",
     ("prioritized", {"replay.alpha": 0.6, "replay.is_weights": "off"}),
     ("prioritized", ALPHA_0), "α 0.6 vs 0, weights 1"),
    ("LAP against PAL", "d2/{env}", ("lap", {}), ("pal", {}),
     "Fujimoto et al.'s pair: equal expected gradients, one by sampling, one by its loss"),
    ("LAP against uniform", "d2/{env}", ("lap", {}), ("uniform", {}),
     "TD-error-focused sampling with no IS weights and LAP's loss, against uniform replay"),
    ("LAP's prioritization under its own loss", "d2lap/{env}",
     ("lap", {"replay.alpha": 0.6}), ("lap", {"replay.alpha": 0.0}),
     "LAP α 0.6 vs α 0 (uniform draws), both LAP's loss (Huber at κ 0.01): sampling alone"),
    ("LAP's loss against MSE, uniform draws", ("d2lap/{env}", "d2loss/{env}"),
     ("lap", {"replay.alpha": 0.0}), ("uniform", {"agent.loss": "mse"}),
     "LAP α 0 vs uniform under the protocol's MSE: the loss alone"),
    ("LAP against uniform under Huber", ("d2lap/{env}", "d2loss/{env}"),
     ("lap", {"replay.alpha": 0.6}), ("uniform", {"agent.loss": "huber"}),
     "the LAP authors' baseline: uniform replay with a Huber loss (threshold 1)"),
    ("Huber against MSE, uniform draws", "d2loss/{env}",
     ("uniform", {"agent.loss": "huber"}), ("uniform", {"agent.loss": "mse"}), "uniform replay, the loss alone"),
    ("n-step (n 3 vs 1) at the notebook's memory and ratio", "d3/{env}", ("uniform", D3 | {"replay.n_step": 3}),
     ("uniform", D3 | {"replay.n_step": 1}), "uniform, capacity 10k, replay ratio 1"),
    ("n-step (n 3 vs 1) with a memory that never forgets", "d3/{env}",
     ("uniform", D3 | {"replay.capacity": 100000, "replay.n_step": 3}),
     ("uniform", D3 | {"replay.capacity": 100000, "replay.n_step": 1}),
     "uniform, capacity 100k (> a run's steps), ratio 1"),
    ("a larger memory (100k vs 1k), n 1", "d3/{env}", ("uniform", D3 | {"replay.capacity": 100000, "replay.n_step": 1}),
     ("uniform", D3 | {"replay.capacity": 1000, "replay.n_step": 1}), "uniform, one-step returns, ratio 1"),
    ("a larger memory (100k vs 1k), n 3", "d3/{env}", ("uniform", D3 | {"replay.capacity": 100000, "replay.n_step": 3}),
     ("uniform", D3 | {"replay.capacity": 1000, "replay.n_step": 3}), "uniform, 3-step returns, ratio 1"),
    ("replay ratio 0.25 vs 1", "d3/{env}", ("uniform", D3 | {"train.replay_ratio": 0.25, "replay.n_step": 1}),
     ("uniform", D3 | {"replay.n_step": 1}), "uniform, capacity 10k, one-step returns"),
]  # fmt: skip

# design 4 (image states, 3 seeds per cell, 5·10^5 steps): its own runs beside the committed minatar/ runs
D4_FOLDERS = ("d4/{env}", "../minatar/runs")
D4_EFFECTS = [
    ("TD-error focus: prioritized (α 0.6, the paper's weights) vs uniform", D4_FOLDERS,
     ("prioritized", {"replay.n_step": 1}), ("uniform", {"replay.n_step": 1}), "one-step returns, the MinAtar DQN"),
    ("n-step (uniform, n 3 vs 1)", D4_FOLDERS, ("uniform", {"replay.n_step": 3}), ("uniform", {"replay.n_step": 1}),
     "uniform replay, the MinAtar DQN"),
    ("replay (uniform) vs none", D4_FOLDERS, ("uniform", {"replay.n_step": 1}), ("none", {}),
     "the committed minatar/ runs"),
]  # fmt: skip
BY_ENV = {
    "cartpole": NOTEBOOK_D1 + EFFECTS, "acrobot": NOTEBOOK_D1 + EFFECTS,
    # (d3: CartPole's; the LAP and loss cells of d2lap and d2loss: CartPole's and Acrobot's)
    "mountaincar": ZOO_D1 + [effect for effect in EFFECTS if isinstance(effect[1], str) and effect[1][:3] == "d2/"],
    "breakout-minatar": D4_EFFECTS, "freeway-minatar": D4_EFFECTS,
}  # fmt: skip


def _flat(data: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


class Cell(NamedTuple):
    """A completed run: its replay label, flattened config, final return and whole-curve measures (None each
    where neither its summary nor its logged returns have them)."""

    replay: str
    config: dict
    final: float
    auc: float | None
    peak: float | None
    drop: float | None


def _returns_of(text: str) -> list[float]:
    return [float(row["return"]) for row in csv.DictReader(io.StringIO(text)) if row.get("return")]


def packed_returns(folder: Path) -> dict[Path, list[float]]:
    """Each run's logged returns from ``folder/metrics.tar.xz`` (pack_metrics.sh's archive), by run directory."""
    archive = folder / "metrics.tar.xz"
    if not archive.is_file():
        return {}
    out = {}
    with tarfile.open(archive) as tar:
        for member in tar:
            if member.isfile() and member.name.endswith("metrics.csv"):
                out[(folder / member.name).parent] = _returns_of(tar.extractfile(member).read().decode())
    return out


def cells(folder: Path, env: str) -> list[Cell]:
    """Every completed run of ``env`` under ``folder``, with its whole-curve measures: summary.json's
    (``return_auc``, ``return_peak``, ``return_drop``), else those of its logged returns (metrics.csv beside it,
    or the folder's metrics.tar.xz, opened only if some run needs it)."""
    out, packed = [], None
    for summary_path in sorted(folder.rglob("summary.json")):
        summary = json.loads(summary_path.read_text())
        config_path = summary_path.with_name("config.yaml")
        if summary.get("status") != "completed" or summary.get("final_return_mean") is None:
            continue
        if not config_path.is_file():
            continue
        config = DEFAULTS | _flat(yaml.safe_load(config_path.read_text()))
        if config.get("env.id") != env:
            continue
        measures = {k: summary.get(k) for k in ("return_auc", "return_peak", "return_drop")}
        if None in measures.values():
            csv_path = summary_path.with_name("metrics.csv")
            if csv_path.is_file():
                returns = _returns_of(csv_path.read_text())
            else:
                packed = packed_returns(folder) if packed is None else packed
                returns = packed.get(summary_path.parent, [])
            measures = return_measures(returns)
        out.append(Cell(summary["replay"], config, float(summary["final_return_mean"]), measures["return_auc"],
                        measures["return_peak"], measures["return_drop"]))  # fmt: skip
    return out


def _pick(runs: list[Cell], cell: tuple[str, dict]) -> list[Cell]:
    replay, wanted = cell
    return [r for r in runs if r.replay == replay and all(_same(r.config.get(k), v) for k, v in wanted.items())]


def _values(runs: list[Cell], field: str) -> np.ndarray:
    return np.array([getattr(r, field) for r in runs if getattr(r, field) is not None], dtype=np.float64)


def _same(have, want) -> bool:
    if isinstance(want, float) or isinstance(have, float):
        return have is not None and math.isclose(float(have), float(want))
    return have == want


def env_title(env: str, runs: list[Cell]) -> str:
    """The env as run (its id, and its episode limit where that is not the registered one), and its protocol."""
    title = env_as_run(resolve_env_id(env), [r.config.get("env.max_episode_steps") for r in runs])
    return f"{title}, {PROTOCOLS[env]}" if env in PROTOCOLS else title


def _difference(x: np.ndarray, y: np.ndarray, digits: int = 1) -> str:
    """IQM(x) − IQM(y) [95% CI] (no interval below 5 seeds a side; – without values)."""
    if not len(x) or not len(y):
        return "–"
    m = compare_pair(x, y)
    return with_ci(m["iqm_difference"], m["iqm_difference_ci_low"], m["iqm_difference_ci_high"], digits,
                   min(len(x), len(y)))  # fmt: skip


def _drop(runs: list[Cell]) -> str:
    values = _values(runs, "drop")
    return f"{iqm(values):.1f}" if len(values) else "–"


HEAD = ("| effect | X − Y: IQM difference [95% CI] | P(X > Y) [95% CI] | Mann–Whitney p | Holm-adjusted p | "
        "AUC: X − Y [95% CI] | peak: X − Y [95% CI] | drop: IQM X / Y | seeds X / Y | held fixed |")  # fmt: skip


def table(env: str, root: Path = CAUSAL) -> str:
    """The env's table, from the design folders under ``root``: one row per effect, Holm over the effects with
    a p."""
    rows, cache = [], {}
    for name, designs, x_cell, y_cell, fixed in BY_ENV[env]:
        runs = []
        for design in (designs,) if isinstance(designs, str) else designs:
            folder = root / design.format(env=env)
            if design not in cache:
                cache[design] = cells(folder, env) if folder.is_dir() else []
            runs += cache[design]
        rows.append((name, fixed, _pick(runs, x_cell), _pick(runs, y_cell)))
    tested = [(compare_pair(_values(x, "final"), _values(y, "final")) if len(x) >= 2 and len(y) >= 2 else None)
              for _, _, x, y in rows]  # fmt: skip
    adjusted = holm([m["mann_whitney_p"] if m else math.nan for m in tested])
    every = [r for design_runs in cache.values() for r in design_runs]
    lines = [f"## {env_title(env, every)}", "", f"Family: the {sum(m is not None for m in tested)} effects of this "
             "table with a p (Holm 1979); bold: Holm-adjusted p < 0.05.", "", HEAD,
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]  # fmt: skip
    for (name, fixed, x, y), m, p_adj in zip(rows, tested, adjusted, strict=True):
        if m is None:
            lines.append(f"| {name} | not run yet | | | | | | | {len(x)} / {len(y)} | {fixed} |")
            continue
        n = min(len(x), len(y))
        diff = with_ci(m["iqm_difference"], m["iqm_difference_ci_low"], m["iqm_difference_ci_high"], 1, n)
        poi = with_ci(m["p_improvement"], m["p_improvement_ci_low"], m["p_improvement_ci_high"], 2, n)
        raw, adj = p_cells(m["mann_whitney_p"], float(p_adj), len(x), len(y), exact=True)
        curve = [_difference(_values(x, f), _values(y, f)) for f in ("auc", "peak")]
        lines.append(f"| {name} | {marked(diff, p_adj)} | {poi} | {raw} | {adj} | {' | '.join(curve)} | "
                     f"{_drop(x)} / {_drop(y)} | {len(x)} / {len(y)} | {fixed} |")  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="write the tables here (else print them)")
    args = parser.parse_args()
    text = "# The causal study's effects on final return\n\n"
    text += made_by(["python", "docs/results/scripts/effects.py", "--out", "docs/results/causal/effects.md"])
    text += (" From the committed summaries, and the logged returns for the whole-curve measures. Final return: "
             "a run's last 20 training episodes (summary.json `final_return_mean`); AUC: its mean return over all "
             "its episodes; peak: its best mean over 20 consecutive episodes; drop: peak minus final (IQM over a "
             "cell's runs). IQM differences with 95% percentile bootstrap CIs (each cell's seeds resampled on "
             "their own; none below 5 seeds a cell); p: two-sided Mann–Whitney on the final returns.\n\n")
    text += "\n\n".join(table(env) for env in ENVS) + "\n"
    if args.out:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
