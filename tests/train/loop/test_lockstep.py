"""The loop's per-member guard: a failure is the member's own, an interrupt stops everyone."""

from __future__ import annotations

import signal

import pytest

from per_cli.config import load_config
from per_cli.rundir.logger import COMPLETED, INTERRUPTED, read_summary
from per_cli.train.loop import run_record, trainer_state
from per_cli.train.loop.alive import Alive, AliveRow
from per_cli.train.loop.failures import guard
from per_cli.train.loop.stopping import RunInterrupted, SignalStop
from per_cli.train.loop.trainer import build_member, run_member

from ...conftest import CONFIGS, TINY_CARTPOLE


@pytest.fixture
def member():
    """A member alone in its loop's alive mask (no run directory: its failure is recorded in ``summary``)."""
    trainer = build_member(load_config(CONFIGS / "cartpole_uniform.yaml", TINY_CARTPOLE))
    trainer.alive = AliveRow(Alive(1), 0)
    yield trainer
    run_record.close(trainer)


def _failed(member) -> str | None:
    """What the guard recorded of ``member``'s failure (run_record.record_failure), None if nothing."""
    if member.error is None:
        assert not member.summary
        return None
    assert member.summary["status"] == "failed"
    return str(member.error)


def _raise(exc: BaseException):
    def phase():
        raise exc

    return phase


def _numba_style_interrupt():
    """What CPython raises when a signal handler's exception is pending as a compiled function returns."""
    try:
        raise RunInterrupted(signal.SIGTERM)
    except RunInterrupted as interrupt:
        raise SystemError("CPUDispatcher(<function window_sample>) returned a result with an exception set") \
            from interrupt  # fmt: skip


def test_a_failing_phase_fails_only_its_member(member):
    assert guard(member, _raise(ValueError("bad batch"))) is None
    assert _failed(member) == "bad batch" and "bad batch" in member.summary["error"] and member.closed
    alive, row = member.alive
    assert not alive.mask[row] and alive.failed == 1  # its row of the loop's alive mask, once


def test_an_error_caused_by_a_signal_is_the_interrupt_not_a_failure(member):
    with pytest.raises(RunInterrupted) as caught:
        guard(member, _numba_style_interrupt)
    assert caught.value.signum == signal.SIGTERM
    assert _failed(member) is None and not member.closed  # recorded interrupted by the loop, resumable


def _numba_unbox_interrupt():
    """A real SIGTERM whose handler's exception a compiled call swallowed and replaced, with no chain back to it:
    numba unboxing a typed list while the exception is set raises ``TypeError: can't unbox ... as a <NULL>``.
    (SIGTERM: the handler takes it always; Ctrl-C only where SIGINT was not ignored when Python started.)"""
    swallowed = False
    try:
        signal.raise_signal(signal.SIGTERM)
    except RunInterrupted:
        swallowed = True
    if swallowed:
        raise TypeError("can't unbox a <class 'numba.typed.typedlist.List'> as a <NULL>")


def test_an_unchained_error_after_a_received_signal_is_the_interrupt_not_a_failure(member):
    member.stop = SignalStop()  # (the loop's: run_members hands it to each member)
    with member.stop.installed(), pytest.raises(RunInterrupted) as caught:
        guard(member, _numba_unbox_interrupt)
    assert caught.value.signum == signal.SIGTERM
    assert _failed(member) is None and not member.closed
    member.stop = SignalStop()
    with member.stop.installed():  # a new run starts with no signal pending: its errors are its own
        assert guard(member, _raise(TypeError("bad batch"))) is None
    assert _failed(member) == "bad batch"


def test_a_training_runs_stop_defers_the_first_signal_to_its_check_and_takes_a_second_at_once():
    # raised at once, a handler's exception lands inside whatever compiled code is running (llvmlite's object-cache
    # callback of a numba compile crashed the process with SIGSEGV): a training run raises it between steps
    with SignalStop(deferred=True).installed() as stop:
        signal.raise_signal(signal.SIGTERM)  # nothing raised here
        with pytest.raises(RunInterrupted) as caught:
            stop.check()
        assert caught.value.signum == signal.SIGTERM
        with pytest.raises(RunInterrupted):  # a second signal: at once (a step that takes too long)
            signal.raise_signal(signal.SIGTERM)
    with SignalStop().installed(), pytest.raises(RunInterrupted):  # a grid's driver: at once
        signal.raise_signal(signal.SIGTERM)


def test_an_evaluation_stops_at_its_next_step_on_a_deferred_signal():
    trainer = build_member(load_config(CONFIGS / "cartpole_uniform.yaml", [*TINY_CARTPOLE, "train.eval_episodes=3"]))
    acted = []
    real_act = trainer.agent.act
    trainer.agent.act = lambda *args: acted.append(1) or real_act(*args)
    with SignalStop(deferred=True).installed() as stop:
        signal.raise_signal(signal.SIGTERM)
        with pytest.raises(RunInterrupted):
            trainer.evaluator.run(trainer.agent, 0, stop)
    assert acted == []  # not a single action
    assert trainer.evaluator.run(trainer.agent, 0, SignalStop())["eval/return"] > 0  # (no signal: it evaluates)
    trainer.env.close()
    trainer.evaluator.close()


def test_a_signal_in_one_runs_evaluation_is_that_runs_interrupt_and_the_next_run_starts_clean(tmp_path):
    """Runs one after another in one process (a grid worker's): SIGTERM during the first's evaluation records it
    interrupted and resumable; the second never sees that signal (each run's SignalStop keeps its own record);
    the first then resumes to its end."""
    cfg = load_config(CONFIGS / "cartpole_uniform.yaml", [*TINY_CARTPOLE, "train.checkpoint_every=100"])
    first = build_member(cfg)
    real_act = first.agent.act  # (acting greedily for an evaluation: the loop's own acting is batched)

    def act_then_sigterm(*args):
        first.agent.act = real_act
        signal.raise_signal(signal.SIGTERM)  # deferred by the run: its evaluation's next step raises it
        return real_act(*args)

    first.agent.act = act_then_sigterm
    with pytest.raises(RunInterrupted):
        run_member(first, tmp_path / "first")
    interrupted = read_summary(tmp_path / "first")
    assert interrupted["status"] == INTERRUPTED and "interrupted by SIGTERM" in interrupted["error"]
    assert interrupted["total_steps"] == 199  # in the evaluation that follows step 200 (train.eval_every=200)

    assert run_member(build_member(cfg), tmp_path / "second")["status"] == COMPLETED
    assert read_summary(tmp_path / "second")["total_steps"] == 400

    resumed = build_member(cfg)
    assert trainer_state.resume(resumed, tmp_path / "first") == 100
    assert run_member(resumed, tmp_path / "first")["status"] == COMPLETED
    assert read_summary(tmp_path / "first")["resumed_from_step"] == 100
