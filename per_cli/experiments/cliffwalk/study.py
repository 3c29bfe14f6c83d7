"""The Blind Cliffwalk experiment (Schaul et al. 2016, Fig. 1 right and Fig. 2): how many Q-learning updates each replay
strategy needs before the Q-values are right."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from per_cli.envs.cliffwalk import BlindCliffwalk
from per_cli.errors import ConfigError
from per_cli.experiments.cliffwalk.learners import LEARNER_CLASSES
from per_cli.experiments.cliffwalk.memory import make_sampler, run_sampled
from per_cli.experiments.cliffwalk.oracle import run_oracle
from per_cli.experiments.cliffwalk.settings import METHODS, N_MAX, N_MIN, CliffwalkSettings, RunResult, Summary


def run_once(
    n: int, method: str, learner_kind: str, run: int, settings: CliffwalkSettings, transitions=None
) -> RunResult:
    """One run of ``method`` on the chain of ``n`` states; seeds depend on (seed, n, run) only, so every
    method starts from the same initial weights."""
    mdp = BlindCliffwalk(n)
    init_rng = np.random.default_rng(np.random.SeedSequence([settings.seed, n, run, 0]))
    learner = LEARNER_CLASSES[learner_kind](mdp, init_rng)
    sse_tol = settings.tolerance * learner.size
    cap = settings.cap(mdp.memory_size())
    started = time.perf_counter()
    if method == "oracle":
        updates = run_oracle(mdp, learner, cap, sse_tol, settings.step_size)
    else:
        transitions = transitions if transitions is not None else mdp.all_sequences()
        rng = np.random.default_rng(np.random.SeedSequence([settings.seed, n, run, 1]))
        memory = make_sampler(method, transitions, settings, rng)
        updates = run_sampled(memory, learner, method, cap, sse_tol, settings)
    converged = learner.exact_sse() < sse_tol
    return RunResult(
        method, n, run, updates, converged, learner.exact_sse() / learner.size, time.perf_counter() - started
    )


def parse_ns(text: str) -> tuple[int, ...]:
    """``'2..14'`` (inclusive), ``'4,8,12'`` or ``'10'``."""
    try:
        if ".." in text:
            lo, hi = (int(x) for x in text.split("..", 1))
            values = tuple(range(lo, hi + 1))
        else:
            values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ConfigError(f"--n: {text!r} is not a range like 2..14 or a list like 4,8,12") from None
    if not values:
        raise ConfigError(f"--n: {text!r} names no chain length")
    bad = [v for v in values if not N_MIN <= v <= N_MAX]
    if bad:
        raise ConfigError(
            f"--n: {bad[0]} is out of range; chain lengths must be in [{N_MIN}, {N_MAX}] (the paper uses 2..16)"
        )
    return values


def parse_methods(text: str) -> tuple[str, ...]:
    import difflib

    methods = tuple(m.strip() for m in text.split(",") if m.strip())
    if not methods:
        raise ConfigError("--methods: name at least one of " + ", ".join(METHODS))
    for m in methods:
        if m not in METHODS:
            close = difflib.get_close_matches(m, METHODS, n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            raise ConfigError(f"--methods: unknown method {m!r}; {hint}choose from {', '.join(METHODS)}")
    return methods


def summarise(results: Sequence[RunResult], settings: CliffwalkSettings) -> list[Summary]:
    rows: list[Summary] = []
    for method in settings.methods:
        for n in settings.ns:
            mine = [r for r in results if r.method == method and r.n == n]
            if not mine:
                continue
            ups = [r.updates for r in mine]
            size = BlindCliffwalk(n).memory_size()
            rows.append(
                Summary(
                    method=method,
                    n=n,
                    memory_size=size,
                    learner=settings.learner,
                    runs=len(mine),
                    median_updates=float(np.median(ups)),
                    min_updates=int(min(ups)),
                    max_updates=int(max(ups)),
                    capped_runs=sum(not r.converged for r in mine),
                    cap=settings.cap(size),
                    updates=ups,
                )
            )
    uniform = {r.n: r.median_updates for r in rows if r.method == "uniform"}
    capped_median = {(r.method, r.n) for r in rows if 2 * r.capped_runs >= r.runs}
    for r in rows:
        if (r.method, r.n) in capped_median or ("uniform", r.n) in capped_median:
            continue  # a capped median is a bound, not a measurement
        if r.n in uniform and r.median_updates > 0:
            r.speedup_vs_uniform = round(uniform[r.n] / r.median_updates, 3)
    return rows


def run_experiment(
    settings: CliffwalkSettings, progress: Callable[[str], None] | None = None
) -> tuple[list[RunResult], list[Summary]]:
    results: list[RunResult] = []
    for n in settings.ns:
        mdp = BlindCliffwalk(n)
        transitions = mdp.all_sequences()
        for method in settings.methods:
            started = time.perf_counter()
            mine = [run_once(n, method, settings.learner, run, settings, transitions) for run in range(settings.runs)]
            results.extend(mine)
            if progress is not None:
                ups = [r.updates for r in mine]
                capped = sum(not r.converged for r in mine)
                progress(
                    f"n={n:2d} memory={mdp.memory_size():7d} {method:11s} median {np.median(ups):12.0f} updates "
                    f"[{min(ups)}, {max(ups)}]"
                    + (f" ({capped} capped)" if capped else "")
                    + f"  {time.perf_counter() - started:.1f}s"
                )
    return results, summarise(results, settings)


def default_out_dir(learner: str) -> Path:
    return Path("runs") / f"cliffwalk__{learner}__{time.strftime('%Y%m%d-%H%M%S')}"
