"""Plugins (per_cli/plugins.py): imported by name or file, once per process, and a failure named in one line."""

from __future__ import annotations

import sys

import pytest

from per_cli.errors import ConfigError
from per_cli.plugins import load_plugins


def test_a_plugin_file_runs_once_per_process_however_often_it_is_loaded(tmp_path):
    """The record of what was imported is Python's own module cache: a second load (a cohort's members, a grid's
    runs) does not run the file again, and nothing of ours remembers it."""
    marks = tmp_path / "marks.txt"
    plugin = tmp_path / "counting_plugin.py"
    plugin.write_text(f"with open({str(marks)!r}, 'a') as f:\n    f.write('x')\n")
    load_plugins([str(plugin)])
    load_plugins([str(plugin), str(plugin)])
    assert marks.read_text() == "x"
    assert any(getattr(m, "__file__", None) == str(plugin.resolve()) for m in list(sys.modules.values()))


def test_a_plugin_that_fails_is_named_and_not_kept_half_imported(tmp_path):
    plugin = tmp_path / "broken_plugin.py"
    plugin.write_text("raise RuntimeError('not today')\n")
    for _ in range(2):  # (the failed module left no entry behind: the second load fails the same way)
        with pytest.raises(ConfigError, match=r"broken_plugin\.py failed to import: RuntimeError: not today"):
            load_plugins([str(plugin)])
    with pytest.raises(ConfigError, match="no such file"):
        load_plugins([str(tmp_path / "missing.py")])
