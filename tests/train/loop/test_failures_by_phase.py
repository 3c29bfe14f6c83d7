"""A seed that fails in any phase of a step leaves alone: the loop's alive mask takes it out before the next
phase (per_cli/train/loop/lockstep.py), and the other seed's run is its solo run, row for row."""

from __future__ import annotations

import numpy as np
import pytest

from per_cli.replay import cohort as cohort_module
from per_cli.replay.cohort import CohortSampling
from per_cli.replay.sampler import FAILED
from per_cli.train.loop import learning_rules, reporting, tasks
from per_cli.train.loop.cohort import Cohort
from per_cli.train.loop.learning import LearningPhases
from per_cli.train.loop.stopping import RunDiverged
from per_cli.train.loop.trainer import build_member, run_member
from per_cli.train.measures import cohort_rows

from ..checkpoints.test_checkpoint import _rows
from .test_cohort import _configs

FAIL_AT = 150  # (after learning starts at step 100: the learning phases have run)


def _failing(member, own, name: str, at: int, by_member: bool = True):
    """``own`` (a function of the member's data, or with ``by_member=False`` one of the member's own objects'
    methods), raising for ``member`` alone from its step ``at`` on."""

    def failing(*args):
        if (not by_member or args[0] is member) and member.state.step >= at:
            raise ValueError(f"a broken {name}")
        return own(*args)

    return failing


OWNERS = {"reporting": reporting, "learning_rules": learning_rules, "tasks": tasks}


@pytest.mark.parametrize(
    ("phase", "owner", "name"),
    [
        ("step_envs", "env", "step"), ("end_collects", "reporting", "end_episode"),
        ("due", "learning_rules", "learning"), ("update_priorities", None, None), ("end_steps", "tasks", "end_step"),
    ],
)  # fmt: skip
def test_a_seed_failing_in_a_phase_leaves_alone_and_the_other_is_its_solo_run(
    tmp_path, monkeypatch, phase, owner, name
):
    cfgs = _configs([1, 2], "agent.engine=numba", "replay.kind=prioritized")
    cohort = Cohort(cfgs)
    bad = cohort.members[0]
    # (learning is asked until it is first True, at learning_starts: the due phase fails it at its first ask)
    at = 0 if phase == "due" else FAIL_AT
    if owner == "env":  # (step_envs: the member's env raises in the envs' batch)
        bad.env.step = _failing(bad, bad.env.step, name, at, by_member=False)
    elif owner is not None:  # (the phase's call of the member's collaborator raises for it alone)
        module = OWNERS[owner]
        monkeypatch.setattr(module, name, _failing(bad, getattr(module, name), name, at))
    else:  # seed 1's TD errors reported non-finite at a log point: the priority update refuses them, seed 1 diverged
        update, every = CohortSampling.update_priorities, bad.cfg.log.every

        def one_not_finite(self, which, ids, td_errors):
            finite = np.asarray(update(self, which, ids, td_errors), dtype=bool).copy()
            at = bad.state.step >= FAIL_AT and bad.agent.updates % every == 0
            finite[[k for k, i in enumerate(which) if i == 0 and at]] = False
            return finite

        monkeypatch.setattr(CohortSampling, "update_priorities", one_not_finite)
    own_log_point, called_failed = reporting.log_point, []

    def log_point(member):  # (no phase may call a member that failed)
        if member is bad and bad.error is not None:
            called_failed.append(bad.state.step)
        own_log_point(member)

    monkeypatch.setattr(reporting, "log_point", log_point)
    first, second = cohort.run([tmp_path / "c1", tmp_path / "c2"])
    error = f"a broken {name}" if name is not None else f"a TD error became non-finite at step {bad.state.step + 1}"
    assert first["status"] == "failed" and error in first["error"]
    alive = bad.alive.loop
    assert alive.mask.tolist() == [False, True] and alive.failed == 1 and not called_failed  # (once, in its phase)
    monkeypatch.undo()
    run_member(build_member(cfgs[1]), tmp_path / "solo2")
    assert second["status"] == "completed" and _rows(tmp_path / "c2") == _rows(tmp_path / "solo2")


def test_a_seed_whose_update_goes_non_finite_fails_alone_with_the_diverged_message(tmp_path, monkeypatch):
    """check_results reads the losses and mean Q values as arrays: a member whose row is not finite fails with
    the diverged error built from its row (its loss, its step), and no member is asked to check itself."""
    cfgs = _configs([1, 2], "agent.engine=numba")
    cohort = Cohort(cfgs)
    bad = cohort.members[0]
    learn = LearningPhases.learn

    def non_finite_for_seed_1(self, members, batches):
        results = learn(self, members, batches)
        if bad.state.step >= FAIL_AT and members[0] is bad:
            results.loss[0] = np.nan  # (the row is the update's own, handed to the phases after it)
        return results

    monkeypatch.setattr(LearningPhases, "learn", non_finite_for_seed_1)
    first, second = cohort.run([tmp_path / "c1", tmp_path / "c2"])
    assert first["status"] == "failed" and f"the loss became nan at step {bad.state.step + 1}: " in first["error"]
    assert bad.state.step >= FAIL_AT and isinstance(bad.error, RunDiverged)
    monkeypatch.undo()
    run_member(build_member(cfgs[1]), tmp_path / "solo2")
    assert second["status"] == "completed" and _rows(tmp_path / "c2") == _rows(tmp_path / "solo2")


def test_a_measuring_pass_that_raises_fails_every_member_whose_updates_it_held(tmp_path, monkeypatch):
    """The one measuring pass covers every member's updates kept since the last (it has no branch on one member's
    data, so the member whose data made it raise cannot be named): it raises again at each member's next event
    that reads its window, and every member fails with its error (no member measures its updates again alone)."""
    cohort = Cohort(_configs([1, 2], "agent.engine=numba"))
    table = cohort_rows.measure_table
    calls = []

    def broken_at(window, *arrays):
        if cohort.members[0].state.step >= FAIL_AT:
            calls.append(cohort.members[0].state.step)
            raise ValueError("a broken measure")
        return table(window, *arrays)

    monkeypatch.setattr(cohort_rows, "measure_table", broken_at)
    summaries = cohort.run([tmp_path / "c1", tmp_path / "c2"])
    for summary, member in zip(summaries, cohort.members, strict=True):
        assert summary["status"] == "failed" and "a broken measure" in summary["error"]
        assert member.state.step >= FAIL_AT
    assert len(calls) == 2  # (once at each member's event: the first to read fails, then the other)


@pytest.mark.parametrize("rule", ["batch_max", "batch_mean", "off"])
def test_a_seed_whose_draw_fails_leaves_alone_and_the_others_weights_follow_the_rule(tmp_path, monkeypatch, rule):
    """A draw that fails for one member leaves the others' batches as rows of that draw: the IS-weight rule is
    applied to the draw's weights in one call, the failed member's row too, and the other seeds' runs are their
    solo runs with the rule applied."""
    cfgs = _configs([1, 2, 3], "agent.engine=numba", "replay.kind=prioritized", f"replay.is_weights={rule}")
    cohort = Cohort(cfgs)
    bad = cohort.members[1]
    draw = cohort_module.draw_batches

    def failing_for_seed_2(kind, lists, members, betas, slots, weights, chunk):
        status = draw(kind, lists, members, betas, slots, weights, chunk)
        if bad.state.step >= FAIL_AT:
            status[members == 1] = FAILED  # (seed 2 is the cohort's member 1)
        return status

    monkeypatch.setattr(cohort_module, "draw_batches", failing_for_seed_2)
    first, second, third = cohort.run([tmp_path / "c1", tmp_path / "c2", tmp_path / "c3"])
    assert second["status"] == "failed" and "no sampleable transition in the memory" in second["error"]
    assert bad.state.step >= FAIL_AT and bad.alive.loop.mask.tolist() == [True, False, True]
    monkeypatch.undo()
    for k, summary in ((0, first), (2, third)):
        run_member(build_member(cfgs[k]), tmp_path / f"solo{k}")
        assert summary["status"] == "completed" and _rows(tmp_path / f"c{k + 1}") == _rows(tmp_path / f"solo{k}")
