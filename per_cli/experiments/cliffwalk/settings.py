"""The Blind Cliffwalk study's settings and its result records."""

from __future__ import annotations

from dataclasses import dataclass, field

METHODS = ("uniform", "prioritized", "rank", "oracle")
N_MIN, N_MAX = 2, 20  # chain lengths accepted (the paper: 2..16; uniform at n = 16 already takes minutes)


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
    tolerance: float = 1e-3
    step_size: float = 0.25
    alpha: float | None = None  # None: the paper's Atari value of each kind (its KindSpec's priority_defaults)
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
        from per_cli.replay import KINDS  # (here, not at import: the CLI reads N_MAX before any bad input is refused)

        spec = KINDS.get(method)
        if spec is None or spec.priority_defaults is None:
            return 0.0
        return spec.priority_defaults.alpha


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
