"""``train.priority_lag: 1`` delays each update's priority update by one update, and changes nothing else.

Real CartPole runs with prioritized replay: the lagged loop draws the same batches and learns the same
parameters as the unlagged loop whose ``update_priorities`` phase is explicitly held back one call
(``HeldBack``; applied before a checkpoint, as the lagged loop does), and ends with the same priorities. With
uniform replay (no priorities) it is the unlagged run, batch for batch. Both engines: numba (results on the
host at once) and torch (``learn(wait=False)``: results read an update later).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from per_cli.config import load_config
from per_cli.config.shipped import shipped_root
from per_cli.train.loop import tasks
from per_cli.train.loop.lockstep import run_members
from per_cli.train.loop.steps import Steps
from per_cli.train.loop.trainer import build_member

BASE = [
    "train.total_steps=400", "train.learning_starts=100", "train.eval_episodes=0", "train.checkpoint_every=200",
    "train.eps_decay_steps=200", "replay.capacity=400", "replay.batch_size=16", "log.every=50",
    "log.tensorboard=false", "train.train_freq=1", "train.gradient_steps=1", "agent.hidden_sizes=[32,32]",
]  # fmt: skip


class Recording(Steps):
    """The loop's phases, recording each batch's transition ids as drawn."""

    def __init__(self, members):
        super().__init__(members)
        self.drawn: list[np.ndarray] = []

    def sample(self, members):
        batches = super().sample(members)
        self.drawn.append(np.array([b.indices for b in batches]))
        return batches


class HeldBack(Recording):
    """The unlagged loop with its priority update applied one call later, by hand; the one held is applied
    before a checkpoint (so a resumed run starts with none held) and by ``flush`` after the run."""

    held: tuple | None = None

    def update_priorities(self, members, batches, results):
        held, self.held = self.held, (members, batches, results)
        if held is not None:
            super().update_priorities(*held)

    def end_steps(self, members, learning):
        if any(tasks.checkpoints_now(m) for m in members):
            self.flush()
        super().end_steps(members, learning)

    def flush(self) -> None:
        if self.held is not None:
            super().update_priorities(*self.held)
            self.held = None


def run(tmp_path, name: str, config: str, overrides: list[str], steps_class=Recording):
    cfg = load_config(shipped_root() / config, [*BASE, *overrides], device="cpu", seed=3)
    member = build_member(cfg)
    steps = steps_class([member])
    [summary] = run_members([member], [tmp_path / name], steps)
    assert summary["status"] == "completed" and summary["updates"] == 301
    return member, steps


def params(member) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in member.agent.q_net.state_dict().items()}


def assert_same_params(a, b) -> None:
    for name, value in params(a).items():
        assert torch.equal(value, params(b)[name]), name


@pytest.mark.parametrize("engine", ["numba", "torch"])
def test_the_lag_is_the_priority_update_held_back_one_update(tmp_path, engine):
    eng = f"agent.engine={engine}"
    lagged, lag_steps = run(tmp_path, "lag", "cartpole_per.yaml", [eng, "train.priority_lag=1"])
    held, held_steps = run(tmp_path, "held", "cartpole_per.yaml", [eng], HeldBack)
    plain, plain_steps = run(tmp_path, "plain", "cartpole_per.yaml", [eng])
    assert len(lag_steps.drawn) == len(held_steps.drawn) == 301
    for k, (a, b) in enumerate(zip(lag_steps.drawn, held_steps.drawn, strict=True)):
        np.testing.assert_array_equal(a, b, err_msg=f"batch {k}")
    assert_same_params(lagged, held)
    held_steps.flush()  # (the lagged loop read its last update's results before the run finished)
    np.testing.assert_array_equal(lagged.memory.sampler.tree.state_dict()["tree"],
                                  held.memory.sampler.tree.state_dict()["tree"])  # fmt: skip
    # and the lag is a change: without it the second batch on is drawn from other priorities
    assert np.array_equal(lag_steps.drawn[0], plain_steps.drawn[0])
    assert not all(np.array_equal(a, b) for a, b in zip(lag_steps.drawn, plain_steps.drawn, strict=True))


@pytest.mark.parametrize("engine", ["numba", "torch"])
def test_without_priorities_the_lag_changes_nothing(tmp_path, engine):
    eng = f"agent.engine={engine}"
    lagged, lag_steps = run(tmp_path, "lag", "cartpole_uniform.yaml", [eng, "train.priority_lag=1"])
    plain, plain_steps = run(tmp_path, "plain", "cartpole_uniform.yaml", [eng])
    for a, b in zip(lag_steps.drawn, plain_steps.drawn, strict=True):
        np.testing.assert_array_equal(a, b)
    assert_same_params(lagged, plain)
    assert lagged.state.episode == plain.state.episode  # (episodes logged alike: the same acting)
