"""A seed that fails in any phase of a step leaves alone: the loop's alive mask takes it out before the next
phase (per_cli/train/loop/lockstep.py), and the other seed's run is its solo run, row for row."""

from __future__ import annotations

import numpy as np
import pytest

from per_cli.replay.cohort import CohortSampling
from per_cli.train.loop.cohort import Cohort
from per_cli.train.loop.trainer import Trainer

from ..checkpoints.test_checkpoint import _rows
from .test_cohort import _configs

FAIL_AT = 150  # (after learning starts at step 100: the learning phases have run)


def _failing(member, name: str, at: int, owner=None):
    """``owner``'s method ``name`` (the member's own by default), raising from the member's step ``at`` on."""
    own = getattr(member if owner is None else owner, name)

    def failing(*args):
        if member.state.step >= at:
            raise ValueError(f"a broken {name}")
        return own(*args)

    return failing


@pytest.mark.parametrize(
    ("phase", "method"),
    [
        ("step_envs", "step"), ("end_collects", "end_episode"), ("due", "learning"),
        ("update_priorities", "update_priorities"), ("end_steps", "end_step"),
    ],
)  # fmt: skip
def test_a_seed_failing_in_a_phase_leaves_alone_and_the_other_is_its_solo_run(tmp_path, monkeypatch, phase, method):
    cfgs = _configs([1, 2], "agent.engine=numba", "replay.kind=prioritized")
    cohort = Cohort(cfgs)
    bad = cohort.members[0]
    # (learning() is asked until it is first True, at learning_starts: the due phase fails it at its first ask)
    owner = bad.env if phase == "step_envs" else bad  # (step_envs: the member's env raises in the envs' batch)
    setattr(owner, method, _failing(bad, method, 0 if phase == "due" else FAIL_AT, owner))
    if phase == "update_priorities":  # seed 1's TD errors reported non-finite at a log point: its own update raises
        update, every = CohortSampling.update_priorities, bad.cfg.log.every

        def one_not_finite(self, which, ids, td_errors):
            finite = np.asarray(update(self, which, ids, td_errors), dtype=bool).copy()
            at = bad.state.step >= FAIL_AT and bad.agent.updates % every == 0
            finite[[k for k, i in enumerate(which) if i == 0 and at]] = False
            return finite

        monkeypatch.setattr(CohortSampling, "update_priorities", one_not_finite)
    own_log_point, called_failed = bad.log_point, []

    def log_point():  # (no phase may call a member that failed)
        if bad.error is not None:
            called_failed.append(bad.state.step)
        own_log_point()

    bad.log_point = log_point
    first, second = cohort.run([tmp_path / "c1", tmp_path / "c2"])
    assert first["status"] == "failed" and f"a broken {method}" in first["error"]
    alive = bad.alive.loop
    assert alive.mask.tolist() == [False, True] and alive.failed == 1 and not called_failed  # (once, in its phase)
    monkeypatch.undo()
    Trainer(cfgs[1]).run(tmp_path / "solo2")
    assert second["status"] == "completed" and _rows(tmp_path / "c2") == _rows(tmp_path / "solo2")
