"""Run directories read back (per_cli/analysis/runs.py): a run recorded before a config key existed is read
with the value that does what it did, so it groups with new runs of the same setting."""

from __future__ import annotations

import yaml

from per_cli.analysis.groups import group_runs
from per_cli.analysis.runs import ADDED_LATER, flatten, load_runs
from per_cli.config import Config, to_dict

from ..runfactory import linear_returns, write_run


def _drop_added_later(run_dir) -> None:
    """config.yaml as a run written before the ADDED_LATER keys existed."""
    data = yaml.safe_load((run_dir / "config.yaml").read_text())
    for key in ADDED_LATER:
        *sections, name = key.split(".")
        (data[sections[0]] if sections else data).pop(name)
    (run_dir / "config.yaml").write_text(yaml.safe_dump(data, sort_keys=False))


def test_the_added_later_values_are_the_schema_defaults():
    defaults = flatten(to_dict(Config()))
    assert {key: defaults[key] for key in ADDED_LATER} == ADDED_LATER


def test_an_older_run_groups_with_new_runs_of_its_setting_and_a_changed_key_still_splits(tmp_path):
    returns = linear_returns(5, 500, lambda s: s / 10)
    old = write_run(tmp_path / "old", replay="prioritized", seed=1, returns=returns)
    _drop_added_later(old)
    write_run(tmp_path / "new", replay="prioritized", seed=2, returns=returns)
    write_run(tmp_path / "off", replay="prioritized", seed=3, returns=returns, overrides={"replay.is_weights": "off"})
    groups = group_runs(load_runs(tmp_path))
    assert sorted((g.settings, sorted(r.seed for r in g.runs)) for g in groups) == [
        ((("replay.is_weights", "memory_max"),), [1, 2]),
        ((("replay.is_weights", "off"),), [3]),
    ]
