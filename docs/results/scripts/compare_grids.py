"""Do two grids' runs of the same env and replay kind come from one distribution of final returns?

    python docs/results/scripts/compare_grids.py DIR_A DIR_B

For each (env, replay) present in both directories (found recursively by their runs' summary.json; completed
runs only), prints each side's run count and mean final return (summary.json ``final_return_mean``, the last 20
training episodes), the two-sided Mann-Whitney U p and the two-sample Kolmogorov-Smirnov p (scipy). Used in
docs/results/README.md to check the 100-seed study on EnvPool's envs against the 10-seed grids on Gymnasium's.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy import stats


def finals(root: Path) -> dict[tuple[str, str], np.ndarray]:
    by_cell: dict[tuple[str, str], list[float]] = defaultdict(list)
    for path in sorted(root.rglob("summary.json")):
        summary = json.loads(path.read_text())
        if summary.get("status") == "completed" and summary.get("final_return_mean") is not None:
            by_cell[(summary["env"], summary["replay"])].append(float(summary["final_return_mean"]))
    return {cell: np.array(values) for cell, values in by_cell.items()}


def main(a: Path, b: Path) -> None:
    left, right = finals(a), finals(b)
    print(f"{'env':12s} {'replay':12s} {'n A':>4s} {'mean A':>8s} {'n B':>4s} {'mean B':>8s} {'MW p':>6s} {'KS p':>6s}")
    for env, replay in sorted(set(left) & set(right)):
        x, y = left[(env, replay)], right[(env, replay)]
        mw, ks = stats.mannwhitneyu(x, y).pvalue, stats.ks_2samp(x, y).pvalue
        print(f"{env:12s} {replay:12s} {len(x):4d} {x.mean():8.1f} {len(y):4d} {y.mean():8.1f} {mw:6.3f} {ks:6.3f}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(Path(sys.argv[1]), Path(sys.argv[2]))
