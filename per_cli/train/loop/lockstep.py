"""The one training loop, over S ≥ 1 members (a solo run is a cohort of one).

A member is a :class:`~per_cli.train.loop.trainer.Trainer`: it owns everything of its run (env, memory, agent,
RNG streams, ε and β schedules, counters, evaluator, run directory) and exposes the loop's phases. This module
only orders them, the same for every member, step by step:

1. collect: ``choose_action()`` (ε's draw), the greedy actions (``Solo.greedy``), ``step_env()`` (step, store),
   the insertion TD errors where ``replay.initial_priority: td_error`` (``Solo.insertion_td``, then
   ``Solo.insert_priorities``), ``end_collect()`` (count, log an episode that ended, reset);
2. ``learning()`` / ``update_due()``: which members train this step; then ``train.gradient_steps`` times:
   each samples a batch (``Solo.sample``), ``Solo.learn`` updates all of them in one call (a solo run: the
   agent's own update; a cohort: :mod:`per_cli.rl.engines.cohort`) after their IS weights took the loss's
   rule (``Solo.weigh``, ``replay.is_weights``), each ``check_result()``, the new
   priorities (``Solo.update_priorities``), each ``record_update()`` (measures, logs);
3. ``end_step()``: target syncs, the budget, periodic evaluation, progress, checkpoint;
4. a member whose budget is spent ``finish()``-es (final evaluation, summary) and leaves.

A member that raises is recorded ``failed`` in its own summary and leaves; the others go on. Ctrl-C or SIGTERM
stop them all (each recorded ``interrupted``, resumable from its checkpoint).

What the loop does for several members at once goes through a :class:`Solo`, which calls each
member's own engine (a solo run, and cohorts under the torch engine); :class:`per_cli.train.loop.cohort.NumbaBatched`
makes one compiled call for all of them, with the same results.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from per_cli.envs.pool import PooledEnv, step_together
from per_cli.rl.is_weights import apply_rule
from per_cli.train.loop.stopping import SignalStop, as_interrupt


class Solo:
    """The steps the loop takes for several members at once, taken one member at a time with its own engine
    (a solo run; a cohort under the torch engine); a member that fails is recorded and gets None. A cohort's
    subclass (:class:`per_cli.train.loop.cohort.NumbaBatched`) makes one compiled call each, with the same values."""

    def choose_actions(self, members: Sequence[Any]) -> list:
        """Each member's action of this step (None for a member that failed): ε's draw (``choose_action``),
        then the greedy actions of those that act greedily (``greedy``)."""
        greedy = [m for m in members if _guard(m, m.choose_action)]  # (a member that failed gave None: not greedy)
        actions = {id(m): a for m, a in zip(greedy, self.greedy(greedy) if greedy else [], strict=True)}
        return [actions.get(id(m), m.action) if m.error is None else None for m in members]

    def step_envs(self, members: Sequence[Any], actions: Sequence[Any]) -> None:
        """Each member steps its env with its action and stores the transition (``step_env``); EnvPool envs
        step in one call per pool first (:func:`_step_pooled`)."""
        _step_pooled(members, actions)
        for member, action in zip(members, actions, strict=True):
            _guard(member, member.step_env, action)

    def end_collects(self, members: Sequence[Any]) -> None:
        """Each member counts its step, logs an episode that ended and resets (``end_collect``)."""
        for member in members:
            _guard(member, member.end_collect)

    def due(self, members: Sequence[Any]) -> tuple[list, list]:
        """(the members learning at this step, those of them that train now): ``learning()``, ``update_due()``."""
        learning = [m for m in members if _guard(m, m.learning)]
        return learning, [m for m in learning if _guard(m, m.update_due)]

    def check_results(self, members: Sequence[Any], results: Sequence[Any]) -> None:
        """Each member's update must be finite (``check_result``); one that is not fails."""
        for member, result in zip(members, results, strict=True):
            _guard(member, member.check_result, result)

    def end_steps(self, members: Sequence[Any], learning: Sequence[Any]) -> None:
        """Each member's ``end_step`` (``learning``: those that were learning at this step)."""
        learning_ids = {id(m) for m in learning}
        for member in members:  # (a member that failed on the way is skipped)
            if member.error is None:
                _guard(member, member.end_step, id(member) in learning_ids)

    def measure(self, members: Sequence[Any], batches: Sequence[Any], results: Sequence[Any]) -> list:
        """Each member's update measured already (for its ``record_update``), or None: measured by its window."""
        return [None] * len(members)

    def weigh(self, members: Sequence[Any], batches: Sequence[Any]) -> None:
        """Each batch's IS weights rewritten in place by the loss's rule (``replay.is_weights``; the members of
        a cohort share it): the one place it is applied, between every draw and every update
        (:mod:`per_cli.rl.is_weights`). ``memory_max`` keeps the sampler's weights: nothing to do."""
        rule = members[0].cfg.replay.is_weights
        if rule != "memory_max":
            for batch in batches:
                apply_rule(batch.weights, rule)

    def learn(self, members: Sequence[Any], batches: Sequence[Any]) -> list:
        """Each member's agent learns from its batch: their ``UpdateResult``-s."""
        return [m.agent.learn(b) for m, b in zip(members, batches, strict=True)]

    def sample(self, members: Sequence[Any]) -> list:
        """Each member's next batch (``member.sample()``)."""
        return [_guard(m, m.sample) for m in members]

    def greedy(self, members: Sequence[Any]) -> list:
        """Each member's greedy action for the observation in hand."""
        return [_guard(m, m.greedy_action) for m in members]

    def insertion_td(self, members: Sequence[Any]) -> list:
        """Each member's TD errors (one) of the transition it stored last."""
        return [_guard(m, m.insertion_td) for m in members]

    def insert_priorities(self, members: Sequence[Any], td_errors: Sequence[Any]) -> None:
        """Each member's new transition gets its priority from its ``insertion_td``."""
        for member, td in zip(members, td_errors, strict=True):
            _guard(member, member.set_insertion_priority, td)

    def update_priorities(self, members: Sequence[Any], batches: Sequence[Any], results: Sequence[Any]) -> None:
        """Each member's batch gets its new priorities from the update's TD errors."""
        for member, batch, result in zip(members, batches, results, strict=True):
            _guard(member, member.update_priorities, batch, result)


def run_members(members: Sequence[Any], run_dirs: Sequence[Path], batched: Solo) -> list[dict[str, Any]]:
    """Train ``members`` in lockstep, each into its run directory; returns their final summaries (a failed
    member's says ``failed`` and keeps its exception in ``member.error``). Interrupts are re-raised as
    RunInterrupted after every unfinished member recorded one; numpy's overflow warnings stay quiet
    (divergence is checked).

    Denormal floats are flushed to zero on this thread while training (torch, numpy and the numba engine
    alike): Adam's moments of dead ReLU units decay through the denormal range, where x86 arithmetic is ~100x
    slower (it tripled the update time of configs/cartpole_uniform.yaml). The flag is process state, restored
    when the loop ends.
    """
    for member, run_dir in zip(members, run_dirs, strict=True):
        member.begin(run_dir)
    torch.set_flush_denormal(True)
    with SignalStop().installed() as stop, np.errstate(over="ignore", invalid="ignore"):
        try:
            _loop(list(members), batched, stop)
        except KeyboardInterrupt as exc:
            interrupt = as_interrupt(exc)
            for member in members:
                if not member.summary:
                    member.record_interrupt(interrupt)
            raise interrupt from None
        except BaseException as exc:  # noqa: BLE001 - every failure must be recorded, then re-raised
            for member in members:
                if not member.summary:
                    member.record_failure(exc)
            raise
        finally:
            torch.set_flush_denormal(False)
            for member in members:
                member.close()
    return [member.summary for member in members]


def _guard(member: Any, phase: Callable, *args: Any) -> Any:
    """Run one phase of one member; an exception fails that member only (recorded with its traceback).

    An exception caused by an interrupt is the interrupt, not a failure: a signal that arrives while a compiled
    (numba) function returns surfaces as ``SystemError: ... returned a result with an exception set``, chained
    to the RunInterrupted that the handler raised. It stops every member (recorded ``interrupted``)."""
    try:
        return phase(*args)
    except Exception as exc:  # noqa: BLE001 - recorded in the member's summary, the others go on
        fail(member, exc)
        return None


def fail(member: Any, exc: Exception) -> None:
    """``member``'s phase raised ``exc`` (called in the ``except`` that caught it): the member fails and
    leaves, unless ``exc`` stems from an interrupt, which is re-raised (see :func:`_guard`)."""
    interrupt = _interrupt_behind(exc)
    if interrupt is not None:
        raise interrupt from None
    member.record_failure(exc)
    member.close()


def _interrupt_behind(exc: BaseException) -> KeyboardInterrupt | None:
    """The KeyboardInterrupt (a signal's RunInterrupted) in ``exc``'s chain of causes, if any."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        if isinstance(link, KeyboardInterrupt):
            return as_interrupt(link)
        seen.add(id(link))
        link = link.__cause__ or link.__context__
    return None


def _settle(active: list) -> list:
    """Finish the members whose budget is spent; keep those still training."""
    for member in active:
        if member.done and member.error is None:
            _guard(member, member.finish)
    return [m for m in active if not m.done and m.error is None]


def _any_failed(members: list) -> bool:
    return any(m.error is not None for m in members)


def _ok(members: list) -> list:
    return [m for m in members if m.error is None]


def _collect(active: list, batched: Solo) -> list:
    """One env step of every member (see the module docstring); returns those still running."""
    actions = batched.choose_actions(active)
    stepping = [(m, a) for m, a in zip(active, actions, strict=True) if m.error is None]
    batched.step_envs([m for m, _ in stepping], [a for _, a in stepping])
    inserting = [m for m in active if m.error is None and m.inserts_by_td]
    if inserting:
        tds = batched.insertion_td(inserting)
        ok = [k for k, m in enumerate(inserting) if m.error is None]
        batched.insert_priorities([inserting[k] for k in ok], [tds[k] for k in ok])
    batched.end_collects(_ok(active))
    return _ok(active)


def _step_pooled(members: Sequence[Any], actions: Sequence[Any]) -> None:
    """The members whose env is an EnvPool env (``env.backend: envpool``) step in one call per pool; each
    member's ``step_env`` then takes its result. Should the call raise, nothing is left and each member steps
    its own env (its own error, if any, is its own)."""
    pooled = [k for k, m in enumerate(members) if isinstance(m.env, PooledEnv)]
    if len(pooled) < 2:  # (a solo run steps its env itself)
        return
    try:
        step_together([members[k].env for k in pooled], [actions[k] for k in pooled])
    except Exception as exc:  # noqa: BLE001 - each member's own step reports its own error
        for k in pooled:
            members[k].env.drop_pending()
        interrupt = _interrupt_behind(exc)
        if interrupt is not None:
            raise interrupt from None


def _loop(active: list, batched: Solo, stop: SignalStop) -> None:
    while active := _settle(active):
        stop.check()
        active = _collect(active, batched)
        learning, training = batched.due(active)
        for _ in range(training[0].cfg.train.gradient_steps if training else 0):
            batches = batched.sample(training)
            if _any_failed(training):
                batches = [b for m, b in zip(training, batches, strict=True) if m.error is None]
                training = _ok(training)
            if not training:
                break
            batched.weigh(training, batches)
            results = batched.learn(training, batches)
            batched.check_results(training, results)
            if _any_failed(training):
                done = [k for k, m in enumerate(training) if m.error is None]
                training = [training[k] for k in done]
                batches, results = [batches[k] for k in done], [results[k] for k in done]
            batched.update_priorities(training, batches, results)
            measured = batched.measure(training, batches, results)
            for member, batch, result, row in zip(training, batches, results, measured, strict=True):
                if member.error is None:
                    try:  # (as _guard, without a call per member)
                        member.record_update(batch, result, row)
                    except Exception as exc:  # noqa: BLE001 - recorded in the member's summary, the others go on
                        fail(member, exc)
            training = _ok(training)
        batched.end_steps(active, learning)
