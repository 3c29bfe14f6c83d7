"""Design 3 at a fixed step budget: capacity × n-step at each replay ratio, with the interaction and its CI.

    python docs/results/scripts/design3_steps.py [--out docs/results/causal/d3s/effects.md]

The first design 3 ran to 300 episodes with the target copied at each episode's end, so the replay ratio changed
the env steps, the updates and the target syncs together (ratio 0.25 stopped at a median ~26k steps, ratio 1 at
~48k). This one (`causal/d3s/`) holds every cell at 40,000 env steps with the target copied every 200 env steps,
so within a ratio the cells differ only in capacity and n, and across ratios only in the updates per step.

Each row is a contrast of the committed runs' final returns (IQM difference [95% CI], two-sided Mann–Whitney p,
the measures of ``effects.py``); the interaction rows are (100k − 1k at n 3) − (100k − 1k at n 1), a difference of
IQM differences whose 95% percentile bootstrap CI resamples each of the four cells on its own, and whose p is the
bootstrap's two-sided tail (twice the smaller share of resampled interactions on either side of 0). Holm's
adjustment runs over every row of the table (the family: design 3 at a fixed step budget, CartPole).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
from effects import CAUSAL, Cell, _pick, _values, cells, env_title

from per_cli.analysis.comparisons import compare_pair, marked, p_cells
from per_cli.analysis.provenance import made_by
from per_cli.analysis.stats import DEFAULT_REPS, MIN_INTERVAL_SEEDS, holm, iqm
from per_cli.analysis.tables import with_ci

FOLDER = CAUSAL / "d3s" / "cartpole"
RATIOS = (0.25, 1.0)
SMALL, LARGE = 1000, 100000


def _cell(capacity: int, n: int, ratio: float) -> tuple[str, dict]:
    return ("uniform", {"replay.capacity": capacity, "replay.n_step": n, "train.replay_ratio": ratio})


def interaction(runs: list[Cell], ratio: float, reps: int = DEFAULT_REPS, seed: int = 0) -> dict[str, float]:
    """(LARGE − SMALL at n 3) − (LARGE − SMALL at n 1) of the cells' final-return IQMs at ``ratio``: the point, its
    percentile bootstrap CI (each cell resampled on its own; none below 5 seeds a cell) and the bootstrap p."""
    groups = [_values(_pick(runs, _cell(c, n, ratio)), "final") for n in (3, 1) for c in (LARGE, SMALL)]
    signs = np.array([1.0, -1.0, -1.0, 1.0])
    point = float(sum(s * iqm(g) for s, g in zip(signs, groups, strict=True)))
    out = {"point": point, "low": math.nan, "high": math.nan, "p": math.nan, "n": min(map(len, groups))}
    if out["n"] < MIN_INTERVAL_SEEDS:
        return out
    rng = np.random.default_rng(seed)
    draws = sum(s * iqm(g[rng.integers(0, len(g), size=(reps, len(g)))], axis=-1)
                for s, g in zip(signs, groups, strict=True))  # fmt: skip
    out["low"], out["high"] = (float(v) for v in np.percentile(draws, [2.5, 97.5]))
    out["p"] = float(min(1.0, 2 * min(np.mean(draws <= 0), np.mean(draws >= 0))))
    return out


def contrasts() -> list[tuple[str, tuple, tuple]]:
    """(name, X cell, Y cell) of each pairwise row, ratio by ratio, then the ratio itself."""
    rows = []
    for r in RATIOS:
        for n in (1, 3):
            rows.append((f"ratio {r:g}: a larger memory (100k vs 1k), n {n}", _cell(LARGE, n, r), _cell(SMALL, n, r)))
        for c in (SMALL, 10000, LARGE):
            rows.append((f"ratio {r:g}: n-step (3 vs 1), capacity {c:,}", _cell(c, 3, r), _cell(c, 1, r)))
    rows.append(("replay ratio 0.25 vs 1, capacity 10,000, n 1", _cell(10000, 1, 0.25), _cell(10000, 1, 1.0)))
    return rows


def table(folder: Path = FOLDER) -> str:
    runs = cells(folder, "cartpole")
    pairs = [(name, _pick(runs, x), _pick(runs, y)) for name, x, y in contrasts()]
    tested = [compare_pair(_values(x, "final"), _values(y, "final")) for _, x, y in pairs]
    joint = [interaction(runs, r) for r in RATIOS]
    adjusted = holm([m["mann_whitney_p"] for m in tested] + [j["p"] for j in joint])
    lines = [f"## {env_title('cartpole', runs)}, design 3 at 40,000 env steps (target copied every 200 steps)", "",
             f"Family: the {len(adjusted)} rows of this table (Holm 1979); bold: Holm-adjusted p < 0.05.", "",
             "| effect | X − Y: IQM difference [95% CI] | Mann–Whitney p (interaction: bootstrap p) | Holm-adjusted p "
             "| seeds X / Y |", "|---|---:|---:|---:|---:|"]  # fmt: skip
    for (name, x, y), m, p_adj in zip(pairs, tested, adjusted, strict=False):
        n = min(len(x), len(y))
        diff = with_ci(m["iqm_difference"], m["iqm_difference_ci_low"], m["iqm_difference_ci_high"], 1, n)
        raw, adj = p_cells(m["mann_whitney_p"], float(p_adj), len(x), len(y), exact=True)
        lines.append(f"| {name} | {marked(diff, p_adj)} | {raw} | {adj} | {len(x)} / {len(y)} |")
    for r, j, p_adj in zip(RATIOS, joint, adjusted[len(pairs):], strict=True):
        diff = with_ci(j["point"], j["low"], j["high"], 1, j["n"])
        lines.append(f"| ratio {r:g}: interaction, (100k − 1k at n 3) − (100k − 1k at n 1) | {marked(diff, p_adj)} | "
                     f"{j['p']:.2g} | {float(p_adj):.2g} | {j['n']} per cell |")  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="write the table here (else print it)")
    args = parser.parse_args()
    text = "# Design 3 at a fixed step budget: capacity × n-step at each replay ratio\n\n"
    text += made_by(["python", "docs/results/scripts/design3_steps.py", "--out", "docs/results/causal/d3s/effects.md"])
    text += (" Final return: the mean return of a run's last 20 training episodes; IQM differences with 95% "
             "percentile bootstrap CIs (each cell's seeds resampled on their own).\n\n" + table() + "\n")
    if args.out:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
