"""docs/results/scripts/effects.py, the causal study's effects tables, on real run directories: it takes the
Holm-adjusted p, the n < 5 rule and the whole-curve measures from per_cli.analysis, and names the env as run."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from per_cli.analysis.stats import holm, smallest_p

from ..runfactory import linear_returns, write_run

SCRIPT = Path(__file__).resolve().parents[2] / "docs" / "results" / "scripts" / "effects.py"


@pytest.fixture(scope="module")
def effects():
    spec = importlib.util.spec_from_file_location("effects_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_effects_table_has_holm_p_no_interval_below_five_seeds_and_curve_measures(tmp_path, effects):
    """LAP 5 runs above PAL's 5 in 23 of 25 pairs (p 0.032) and above uniform's 3 in all (p 2/C(8,3) = 0.036):
    both below 0.05 raw, neither after Holm over the table's two effects (0.063), so nothing is bold."""
    finals = {"lap": [35, 55, 65, 75, 85], "pal": [10, 20, 30, 40, 50], "uniform": [1, 2, 3]}
    for kind, values in finals.items():
        for seed, final in enumerate(values, start=1):
            # a run that rises to its peak (2 × final) halfway and falls to its final return
            returns = linear_returns(40, 4000, lambda s, f=final: f * (1 + (s <= 2000)))
            write_run(tmp_path / "d2" / "cartpole" / "runs" / f"cartpole__{kind}__s{seed}", replay=kind, seed=seed,
                      returns=returns, final_return=float(final), tensorboard=False,
                      overrides={"env.max_episode_steps": 200})  # fmt: skip
    text = effects.table("cartpole", root=tmp_path)
    assert text.startswith("## CartPole-v1 (200-step limit)")
    assert "Family: the 2 effects of this table with a p" in text
    rows = {line.split(" | ")[0][2:]: line.split(" | ") for line in text.splitlines() if line.startswith("| LAP")}
    vs_pal, vs_uniform = rows["LAP against PAL"], rows["LAP against uniform"]
    raw = [float(vs_pal[3]), float(vs_uniform[3].split(" ")[0])]
    assert raw[1] == pytest.approx(smallest_p(5, 3), rel=1e-3) and all(p < 0.05 for p in raw)
    assert [float(vs_pal[4]), float(vs_uniform[4])] == pytest.approx(list(holm(raw)), rel=1e-2)
    assert "**" not in text  # bold follows the adjusted p, which is 0.063 for both
    assert "no interval (n = 3)" in vs_uniform[1] and "smallest reachable p at 5 vs 3" in vs_uniform[3]
    assert re.fullmatch(r"-?\d+\.\d \[-?\d+\.\d, -?\d+\.\d\]", vs_pal[1])  # 5 vs 5: an interval
    # AUC from each run's metrics.csv (these summaries predate return_auc): returns 2f for 20 episodes, f for 20
    # → AUC 1.5 f; IQM of LAP's 1.5 × (55, 65, 75) minus PAL's 1.5 × (20, 30, 40) = 52.5
    assert vs_pal[5].startswith("52.5 [")
    assert vs_pal[7] == "65.0 / 30.0"  # drop = peak − final = f, IQM over each cell's runs
