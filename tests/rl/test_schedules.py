"""β per sampled batch (``replay.beta_increment``, per_cli/rl/schedules.py BatchBeta): the rule, the β each
batch is drawn with (solo and in a cohort's compiled draw) and the β logged."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from per_cli.config import load_config
from per_cli.replay.cohort import CohortSampling
from per_cli.replay.memory import ReplayMemory
from per_cli.rl.schedules import BatchBeta, LinearSchedule
from per_cli.train.loop.cohort import Cohort, cohort_configs
from per_cli.train.loop.trainer import build_member, run_member

from ..conftest import CONFIGS, TINY_CARTPOLE
from ..train.checkpoints.test_checkpoint import _scalars


@given(
    st.floats(0, 1), st.floats(0, 1), st.integers(-5, 10**6),
    st.lists(st.integers(0, 2 * 10**6), min_size=1, max_size=20),
)  # fmt: skip
def test_a_schedule_over_many_steps_is_each_steps_own_value(start, end, duration, steps):
    """The loop sets β for all members at once (``LinearSchedule.many``): each value is exactly the one a member's
    own call gives, so a run's β does not depend on who else is in its loop."""
    schedule = LinearSchedule(start, end, duration)
    values = schedule.many(np.array(steps, dtype=np.int64))
    assert values.dtype == np.float64 and values.tolist() == [schedule(step) for step in steps]


def test_batch_n_has_beta0_plus_n_increments_up_to_one():
    beta = BatchBeta(0.4, 0.001)
    assert [beta(n) for n in (1, 2, 100)] == pytest.approx([0.401, 0.402, 0.5])
    assert beta(600) == pytest.approx(1.0) and beta(601) == 1.0 and beta(10**6) == 1.0
    running = 0.4  # the rlcode memory's running sum, raised before each draw
    for n in range(1, 700):
        running = min(1.0, running + 0.001)
        assert beta(n) == pytest.approx(running, abs=1e-12)


# one update per step from step 100, 3 batches a phase every 4 steps: β must move within a phase too
PER_BATCH = [*TINY_CARTPOLE, "replay.kind=prioritized", "replay.beta0=0.4", "replay.beta_increment=0.003",
             "train.gradient_steps=3", "log.every=1", "agent.engine=numba"]  # fmt: skip


def _betas_drawn(monkeypatch) -> list[float]:
    """The β of every batch drawn, solo (``ReplayMemory.sample``) or by a cohort's compiled draw (member 0's)."""
    drawn: list[float] = []
    solo, cohort = ReplayMemory.sample, CohortSampling.sample

    def sample(self, batch_size, beta=1.0):
        drawn.append(beta)
        return solo(self, batch_size, beta)

    def draw(self, which, batch_size, betas):
        if 0 in which:
            drawn.append(float(betas[list(which).index(0)]))
        return cohort(self, which, batch_size, betas)

    monkeypatch.setattr(ReplayMemory, "sample", sample)
    monkeypatch.setattr(CohortSampling, "sample", draw)
    return drawn


@pytest.mark.parametrize("members", [1, 2])
def test_each_batch_is_drawn_and_logged_with_its_own_beta(tmp_path, monkeypatch, members):
    cfg = load_config(CONFIGS / "cartpole_uniform.yaml", PER_BATCH, device="cpu")
    drawn = _betas_drawn(monkeypatch)
    cohort = Cohort(cohort_configs(cfg, list(range(1, members + 1))))
    summaries = cohort.run([tmp_path / f"r{k}" for k in range(members)])
    updates = summaries[0]["updates"]
    assert updates == 3 * ((400 - 100) // 4 + 1)  # (the phases from step 100 on)
    want = [min(1.0, 0.4 + 0.003 * n) for n in range(1, updates + 1)]
    assert drawn == pytest.approx(want, abs=1e-12) and want[-1] == 1.0  # (reaches 1, then stays)
    logged = [value for _, value in _scalars(tmp_path / "r0")["replay/beta"]]
    assert logged == pytest.approx(want, abs=1e-6)  # log.every=1: each update logs its batch's β


def test_without_the_increment_beta_anneals_by_step(tmp_path, monkeypatch):
    """The default: one β per phase, linear in the step from β0 to 1 at train.total_steps (400)."""
    cfg = load_config(CONFIGS / "cartpole_uniform.yaml", [*PER_BATCH, "replay.beta_increment=null"], device="cpu")
    drawn = _betas_drawn(monkeypatch)
    run_member(build_member(cfg), tmp_path / "run")
    phase_steps = np.arange(99, 400, 4).repeat(3)  # (the steps that train: (step + 1) % 4 == 0 from step 99)
    assert drawn == pytest.approx((0.4 + 0.6 * phase_steps / 400).tolist(), abs=1e-12)
