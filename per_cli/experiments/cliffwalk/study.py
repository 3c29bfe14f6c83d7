"""The Blind Cliffwalk experiment (Schaul et al. 2016, Fig. 1 right and Fig. 2): how many Q-learning updates
each replay strategy needs before the Q-values are right.

The memory holds every transition of the ``2^n`` action sequences (``2^(n+1) - 2`` transitions, one of them
rewarded). Each update replays one transition: ``Q(s, a) += η w δ`` with ``η = 1/4`` and
``δ = r + γ (1 - terminated) max_a' Q(s', a') - Q(s, a)``, ``γ = 1 - 1/n``. A run ends when the mean squared
error of all ``2n`` Q-values against the exact ones falls below the tolerance (10^-3), or at the cap.

Methods:
- ``uniform``, ``prioritized``, ``rank``: the project's own samplers (``per_cli.replay.REPLAY_KINDS``, the code
  that trains DQNs) over the project's ``TransitionStorage``; each update samples one transition and hands its
  |δ| back as the new priority;
- ``oracle``: at each step, the transition whose update lowers the global loss (the MSE) the most.

Learners: ``tabular`` (one Q-value per state and action) and ``linear`` (``Q(s, a) = θ_a · [onehot(s), 1]``:
one-hot state features plus a bias), both starting from ``θ ~ N(0, 0.1²)``.
"""

from __future__ import annotations

import csv
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from per_cli.config import ConfigError, ReplayConfig
from per_cli.envs.cliffwalk import BlindCliffwalk, CliffwalkTransitions

METHODS = ("uniform", "prioritized", "rank", "oracle")
LEARNERS = ("tabular", "linear")
STEP_SIZE = 0.25
TOLERANCE = 1e-3
INIT_STD = 0.1
N_RANGE = (2, 20)  # chain lengths accepted (the paper: 2..16; uniform at n = 16 already takes minutes)
# uniform draws do not depend on the learning, so they are fetched in chunks (the same sampler, fewer calls);
# chunks stay below 1/256 of the memory, so draws without replacement inside a chunk are practically i.i.d.
UNIFORM_CHUNK_MAX = 256
ORACLE_STALL = 2_000


@dataclass(frozen=True)
class CliffwalkSettings:
    ns: tuple[int, ...] = tuple(range(2, 13))
    methods: tuple[str, ...] = METHODS
    runs: int = 10
    learner: str = "tabular"
    seed: int = 0
    max_updates: int | None = None  # None: cap_factor × memory size (at least min_cap)
    cap_factor: int = 200
    min_cap: int = 100_000
    tolerance: float = TOLERANCE
    step_size: float = STEP_SIZE
    alpha: float | None = None  # None: the paper's Atari value of each kind (proportional 0.6, rank 0.7)
    beta: float = 0.0  # importance-sampling exponent; 0 leaves every weight at 1
    priority_eps: float = 1e-6
    rank_resort_period: int | None = None  # None: the ReplayConfig default

    def cap(self, memory_size: int) -> int:
        if self.max_updates is not None:
            return self.max_updates
        return max(self.min_cap, self.cap_factor * memory_size)

    def alpha_for(self, method: str) -> float:
        if self.alpha is not None:
            return self.alpha
        return {"prioritized": 0.6, "rank": 0.7}.get(method, 0.0)


@dataclass
class RunResult:
    method: str
    n: int
    run: int
    updates: int
    converged: bool
    mse: float
    seconds: float


@dataclass
class Summary:
    method: str
    n: int
    memory_size: int
    learner: str
    runs: int
    median_updates: float
    min_updates: int
    max_updates: int
    capped_runs: int
    cap: int
    speedup_vs_uniform: float | None = None
    updates: list[int] = field(default_factory=list)


# ----------------------------------------------------------------------------------------------------------
# learners: one Q-learning update at a time, keeping the squared error against the true Q-values up to date


class TabularLearner:
    """A table of Q-values, ``Q(s, a) = θ · onehot(s, a)``, initialised like the linear learner's weights,
    ``θ ~ N(0, 0.1²)`` (Schaul et al. 2016, appendix B.1: both representations are ``θᵀφ(s, a)``)."""

    def __init__(self, mdp: BlindCliffwalk, rng: np.random.Generator):
        self.mdp = mdp
        self.gamma = mdp.gamma
        self.true = mdp.true_q().tolist()
        self.q = rng.normal(0.0, INIT_STD, size=(mdp.n, 2)).tolist()
        self.size = 2 * mdp.n
        self.sse = self.exact_sse()

    def values(self) -> np.ndarray:
        return np.array(self.q)

    def exact_sse(self) -> float:
        return float(((self.values() - np.array(self.true)) ** 2).sum())

    def update(self, s: int, a: int, r: float, s2: int, term: bool, step: float) -> float:
        """Apply one update; return its TD error δ (before the update)."""
        q = self.q
        target = r if term else r + self.gamma * max(q[s2])
        old = q[s][a]
        delta = target - old
        new = old + step * delta
        q[s][a] = new
        t = self.true[s][a]
        self.sse += (new - t) ** 2 - (old - t) ** 2
        return delta

    def sse_after_each(self, step: float) -> tuple[np.ndarray, np.ndarray]:
        """For every distinct transition (state s, action a), the squared error after updating it alone, and
        its δ. Both arrays have shape (n, 2)."""
        q, true = self.values(), np.array(self.true)
        delta = _targets(self.mdp, q) - q
        err = q - true
        after = self.sse - err**2 + (err + step * delta) ** 2
        return after, delta


class LinearLearner:
    """``Q(s, a) = θ[a, s] + θ[a, n]``: one-hot state features plus a bias, one weight vector per action,
    ``θ ~ N(0, 0.1²)``. An update moves the state's weight and the bias, so it changes ``Q(·, a)`` in every
    state (by ``ηδ``; in ``s`` itself by ``2ηδ``)."""

    def __init__(self, mdp: BlindCliffwalk, rng: np.random.Generator):
        n = mdp.n
        self.mdp = mdp
        self.gamma = mdp.gamma
        self.n = n
        theta = rng.normal(0.0, INIT_STD, size=(2, n + 1))
        self.w = theta[:, :n].tolist()  # w[a][s]
        self.b = theta[:, n].tolist()  # b[a]
        self.true_t = mdp.true_q().T.tolist()  # true_t[a][s]
        # e[a][s] = w[a][s] - Q*(s, a); the error of Q(s, a) is e[a][s] + b[a]
        self.e = [[self.w[a][s] - self.true_t[a][s] for s in range(n)] for a in range(2)]
        self.s1 = [sum(col) for col in self.e]
        self.s2 = [sum(x * x for x in col) for col in self.e]
        self.size = 2 * n
        self.sse = self._sse_from_sums()

    def _sse_from_sums(self) -> float:
        return sum(self.s2[a] + 2 * self.b[a] * self.s1[a] + self.n * self.b[a] ** 2 for a in range(2))

    def values(self) -> np.ndarray:
        return (np.array(self.w) + np.array(self.b)[:, None]).T

    def exact_sse(self) -> float:
        return float(((self.values() - self.mdp.true_q()) ** 2).sum())

    def update(self, s: int, a: int, r: float, s2: int, term: bool, step: float) -> float:
        w, b = self.w, self.b
        target = r if term else r + self.gamma * max(w[0][s2] + b[0], w[1][s2] + b[1])
        delta = target - (w[a][s] + b[a])
        c = step * delta
        el = self.e[a][s]
        self.e[a][s] = el + c
        self.s2[a] += (el + c) ** 2 - el * el
        self.s1[a] += c
        w[a][s] += c
        b[a] += c
        self.sse = self._sse_from_sums()
        return delta

    def sse_after_each(self, step: float) -> tuple[np.ndarray, np.ndarray]:
        q, true = self.values(), self.mdp.true_q()
        delta = _targets(self.mdp, q) - q
        err = q - true  # (n, 2)
        c = step * delta
        col_sse = (err**2).sum(axis=0)  # per action
        col_sum = err.sum(axis=0)
        # updating (s, a) adds c to every Q(·, a) through the bias and another c to Q(s, a)
        col_after = col_sse[None, :] + 2 * c * col_sum[None, :] + self.n * c**2
        col_after += (err + 2 * c) ** 2 - (err + c) ** 2
        after = col_after + (col_sse.sum() - col_sse)[None, :]
        return after, delta


def _targets(mdp: BlindCliffwalk, q: np.ndarray) -> np.ndarray:
    """The Q-learning target of each distinct transition (s, a), shape (n, 2)."""
    n = mdp.n
    states = np.arange(n)
    right = mdp.right_action(states)
    targets = np.zeros((n, 2))
    onward = np.append(mdp.gamma * q[1:].max(axis=1), 1.0)  # right in the last state: reward 1, terminal
    targets[states, right] = onward
    return targets


LEARNER_CLASSES: dict[str, Callable[..., TabularLearner | LinearLearner]] = {
    "tabular": TabularLearner,
    "linear": LinearLearner,
}


# ----------------------------------------------------------------------------------------------------------
# one run


def _converged(learner, sse_tol: float) -> bool:
    """The running sum can drift by rounding: confirm a crossing with the exact error."""
    if learner.sse >= sse_tol:
        return False
    learner.sse = learner.exact_sse()
    return learner.sse < sse_tol


def make_sampler(method: str, transitions: CliffwalkTransitions, settings: CliffwalkSettings, rng):
    """Fill the project's TransitionStorage with the memory and build the project's sampler for ``method``
    through the replay registry (new transitions enter it exactly as in a DQN run)."""
    from per_cli.replay import REPLAY_KINDS, ReplayMemory
    from per_cli.replay.storage.ring import TransitionStorage

    if method not in REPLAY_KINDS:
        raise ConfigError(f"--methods: replay kind {method!r} is not available; registered: {', '.join(REPLAY_KINDS)}")
    size = len(transitions)
    extra = {} if settings.rank_resort_period is None else {"rank_resort_period": settings.rank_resort_period}
    cfg = ReplayConfig(
        kind=method,
        capacity=size,
        batch_size=1,
        alpha=settings.alpha_for(method),
        beta0=settings.beta,
        priority_eps=settings.priority_eps,
        **extra,
    )
    storage = TransitionStorage(size, (), np.int64)
    memory = ReplayMemory(storage, REPLAY_KINDS[method](cfg, storage, rng))
    order = rng.permutation(size)  # insertion order: no systematic tie-breaking in favour of any transition
    t = transitions
    for i in order:
        memory.add(t.states[i], t.actions[i], t.rewards[i], t.next_states[i], t.terminated[i], False)
    return memory


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
        updates = _run_oracle(mdp, learner, cap, sse_tol, settings.step_size)
    else:
        transitions = transitions if transitions is not None else mdp.all_sequences()
        rng = np.random.default_rng(np.random.SeedSequence([settings.seed, n, run, 1]))
        memory = make_sampler(method, transitions, settings, rng)
        updates = _run_sampled(memory, learner, method, cap, sse_tol, settings)
    converged = learner.exact_sse() < sse_tol
    return RunResult(
        method, n, run, updates, converged, learner.exact_sse() / learner.size, time.perf_counter() - started
    )


def _run_sampled(memory, learner, method: str, cap: int, sse_tol: float, settings: CliffwalkSettings) -> int:
    sampler, storage = memory.sampler, memory.storage
    # slot -> transition, as plain lists (the storage was filled in a shuffled order)
    states = storage.obs.tolist()
    actions = storage.actions.tolist()
    rewards = storage.rewards.astype(np.float64).tolist()
    next_states = storage.next_obs.tolist()
    terminated = storage.terminated.astype(bool).tolist()
    size = len(states)
    # samplers whose draws do not depend on priorities can be asked for several draws at once
    chunk = max(1, min(UNIFORM_CHUNK_MAX, size // 256)) if method == "uniform" else 1
    feedback = method != "uniform"
    step, beta, update = settings.step_size, settings.beta, learner.update
    updates = 0
    if _converged(learner, sse_tol):
        return 0
    slot_buf = np.zeros(1, dtype=np.int64)
    td_buf = np.zeros(1, dtype=np.float64)
    while updates < cap:
        slots, weights = sampler.sample(min(chunk, cap - updates), beta)
        for slot, weight in zip(slots.tolist(), weights.tolist(), strict=True):
            delta = update(states[slot], actions[slot], rewards[slot], next_states[slot], terminated[slot],
                           step * weight)
            updates += 1
            if feedback:
                slot_buf[0] = slot
                td_buf[0] = abs(delta)
                sampler.update(slot_buf, td_buf)
            if learner.sse < sse_tol and _converged(learner, sse_tol):
                return updates
    return updates


def _run_oracle(mdp: BlindCliffwalk, learner, cap: int, sse_tol: float, step: float) -> int:
    """Greedy in the true loss: update the (distinct) transition whose update leaves the smallest MSE. The
    memory's duplicates are identical transitions, so choosing among the 2n distinct ones is the same choice.
    Updates that change nothing (δ = 0) are not candidates.

    Tabular, the oracle converges in O(n log(1/tolerance)) updates. With the linear learner the greedy choice
    can stall: a state is reached where no single update lowers the loss (every update also moves the shared
    bias). A run that finds no new lowest loss for ``ORACLE_STALL`` updates stops and counts as capped."""
    n = mdp.n
    right = mdp.right_action(np.arange(n))
    updates, best, since_best = 0, math.inf, 0
    while updates < cap and not _converged(learner, sse_tol):
        after, delta = learner.sse_after_each(step)
        after = np.where(np.abs(delta) > 0.0, after, np.inf)
        flat = int(np.argmin(after))
        if not np.isfinite(after.flat[flat]):
            break  # every δ is 0: a fixed point that is not the true Q (cannot happen tabular)
        s, a = (int(x) for x in np.unravel_index(flat, after.shape))
        r, s2, term = (0.0, s, True) if a != right[s] else ((1.0, s, True) if s == n - 1 else (0.0, s + 1, False))
        learner.update(s, a, r, s2, term, step)
        updates += 1
        if learner.sse < best * (1 - 1e-9):
            best, since_best = learner.sse, 0
        else:
            since_best += 1
            if since_best >= ORACLE_STALL:
                break
    return updates


# ----------------------------------------------------------------------------------------------------------
# the experiment


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
    bad = [v for v in values if not N_RANGE[0] <= v <= N_RANGE[1]]
    if bad:
        raise ConfigError(
            f"--n: {bad[0]} is out of range; chain lengths must be in [{N_RANGE[0]}, {N_RANGE[1]}] "
            "(the paper uses 2..16)"
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
            size = 2 ** (n + 1) - 2
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
    if settings.learner not in LEARNERS:
        raise ConfigError(f"--learner: {settings.learner!r} is not one of {', '.join(LEARNERS)}")
    if settings.runs < 1:
        raise ConfigError(f"--runs: {settings.runs} must be >= 1")
    results: list[RunResult] = []
    for n in settings.ns:
        transitions = BlindCliffwalk(n).all_sequences()
        for method in settings.methods:
            started = time.perf_counter()
            mine = [
                run_once(n, method, settings.learner, run, settings, transitions) for run in range(settings.runs)
            ]
            results.extend(mine)
            if progress is not None:
                ups = [r.updates for r in mine]
                capped = sum(not r.converged for r in mine)
                progress(
                    f"n={n:2d} memory={2 ** (n + 1) - 2:7d} {method:11s} median {np.median(ups):12.0f} updates "
                    f"[{min(ups)}, {max(ups)}]" + (f" ({capped} capped)" if capped else "")
                    + f"  {time.perf_counter() - started:.1f}s"
                )
    return results, summarise(results, settings)


CSV_COLUMNS = (
    "learner", "method", "n", "memory_size", "runs", "median_updates", "min_updates", "max_updates",
    "capped_runs", "cap", "speedup_vs_uniform",
)


def write_outputs(out: Path, settings: CliffwalkSettings, results, rows: list[Summary], seconds: float) -> dict:
    """``cliffwalk.csv`` (one row per method and n), ``cliffwalk.json`` (settings, rows, every run) and
    ``cliffwalk.png`` (log-log updates against memory size)."""
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "cliffwalk.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for r in rows:
            d = asdict(r)
            writer.writerow({k: d[k] for k in CSV_COLUMNS})
    payload = {
        "experiment": "blind_cliffwalk",
        "settings": {**asdict(settings), "alpha_used": {m: settings.alpha_for(m) for m in settings.methods}},
        "wall_time_s": round(seconds, 2),
        "summary": [asdict(r) for r in rows],
        "runs": [asdict(r) for r in results],
    }
    tmp = out / "cliffwalk.json.tmp"
    tmp.write_text(json.dumps(payload, indent=2))
    tmp.replace(out / "cliffwalk.json")
    plot(rows, settings, out / "cliffwalk.png")
    return payload


STYLE = {
    "uniform": ("tab:gray", "o"),
    "prioritized": ("tab:blue", "s"),
    "rank": ("tab:orange", "^"),
    "oracle": ("tab:green", "D"),
}


def plot(rows: list[Summary], settings: CliffwalkSettings, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    capped_label = "some runs capped"
    for method in settings.methods:
        mine = sorted((r for r in rows if r.method == method), key=lambda r: r.n)
        if not mine:
            continue
        color, marker = STYLE.get(method, (None, "o"))
        x = np.array([r.memory_size for r in mine])
        med = np.array([max(r.median_updates, 0.5) for r in mine])
        lo = np.array([max(r.min_updates, 0.5) for r in mine])
        hi = np.array([max(r.max_updates, 0.5) for r in mine])
        ax.plot(x, med, marker=marker, color=color, label=method, linewidth=1.5, markersize=4)
        ax.fill_between(x, lo, hi, color=color, alpha=0.15, linewidth=0)
        capped = [r for r in mine if r.capped_runs]
        if capped:
            ax.scatter([r.memory_size for r in capped], [r.median_updates for r in capped], marker="x",
                       color="red", zorder=5, label=capped_label)
            capped_label = None  # one legend entry
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("memory size (transitions, 2^(n+1) - 2)")
    ax.set_ylabel(f"updates until MSE < {settings.tolerance:g}")
    ax.set_title(f"Blind Cliffwalk, {settings.learner} Q-learning: median of {settings.runs} runs (band: min-max)")
    ax.title.set_fontsize(10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def format_table(rows: list[Summary]) -> str:
    lines = [f"{'method':11s} {'n':>3s} {'memory':>7s} {'median':>11s} {'min':>10s} {'max':>10s} {'capped':>6s} "
             f"{'x uniform':>9s}"]
    for r in rows:
        speed = "-" if r.speedup_vs_uniform is None else f"{r.speedup_vs_uniform:.1f}"
        lines.append(
            f"{r.method:11s} {r.n:3d} {r.memory_size:7d} {r.median_updates:11.0f} {r.min_updates:10d} "
            f"{r.max_updates:10d} {r.capped_runs:6d} {speed:>9s}"
        )
    return "\n".join(lines)


def default_out_dir(learner: str) -> Path:
    return Path("runs") / f"cliffwalk__{learner}__{time.strftime('%Y%m%d-%H%M%S')}"


__all__ = [
    "CliffwalkSettings",
    "LinearLearner",
    "TabularLearner",
    "format_table",
    "parse_methods",
    "parse_ns",
    "run_experiment",
    "run_once",
    "write_outputs",
]
