"""The config schema: a tree of frozen dataclasses whose type hints and ``metadata`` bounds drive validation
(:mod:`per_cli.config.loading`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from per_cli.errors import ConfigError

# Upper bounds of counts that multiply a run's time or memory (without one, a huge value hangs a run); each far above
# what papers use.
MAX_UPDATES_PER_STEP = 1024  # gradient steps per env step: high replay ratios in the literature are <= 128
MAX_EVAL_EPISODES = 10_000  # per evaluation (papers: 10 to 200)
MAX_BITS = 10_000  # bit flipping's n (see EnvConfig.n_bits)
MAX_NOOPS = 10_000  # Atari no-op starts (the papers: 30)
MAX_HER_K = 1_000  # relabelled copies per transition (Andrychowicz et al. 2017: 4 or 8)
# the largest priority exponent α (see ReplayConfig.__post_init__)
MAX_ALPHA = 10.0
# the longest train_freq a replay ratio may mean: integers past 2^53 are not exact in float64
MAX_TRAIN_FREQ = 2**53


def _bounds(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False) -> dict:
    return {"lo": lo, "hi": hi, "lo_open": lo_open}


@dataclass(frozen=True)
class AtariConfig:
    """Options of the Atari pipeline (ignored for other envs)."""

    frame_stack: int = field(default=4, metadata=_bounds(1, 16))
    frame_skip: int = field(default=4, metadata=_bounds(1, 16))
    screen_size: int = field(default=84, metadata=_bounds(8, 512))
    noop_max: int = field(default=30, metadata=_bounds(0, MAX_NOOPS))  # (each reset steps the emulator this often)
    sticky_actions: float = field(default=0.0, metadata=_bounds(0.0, 1.0))
    fire_reset: bool = True
    terminal_on_life_loss: bool = True
    clip_rewards: bool = True
    full_action_space: bool = False


@dataclass(frozen=True)
class MinAtarConfig:
    """Options of the MinAtar games (ignored for other envs); the defaults are MinAtar's and its paper's."""

    sticky_actions: float = field(default=0.1, metadata=_bounds(0.0, 1.0))  # P(the previous action is repeated)
    difficulty_ramping: bool = True  # games speed up as they go


@dataclass(frozen=True)
class EnvConfig:
    id: str = "cartpole"
    kwargs: dict[str, Any] = field(default_factory=dict)
    max_episode_steps: int | None = field(default=None, metadata=_bounds(1))
    atari: AtariConfig = field(default_factory=AtariConfig)
    minatar: MinAtarConfig = field(default_factory=MinAtarConfig)
    # bit flipping (env.id: bitflip) only: the number of bits n (episode length n); null: the env's default 10
    n_bits: int | None = field(default=None, metadata=_bounds(1, MAX_BITS))
    # what steps the training env: gymnasium, or envpool (CartPole, Acrobot, MountainCar; pip install envpool):
    # a cohort's envs in one C++ call (per_cli/envs/pool.py); evaluation always uses Gymnasium's env
    backend: Literal["gymnasium", "envpool"] = "gymnasium"
    # the reward the replay memory stores for a step that ends an episode (null: the env's), except where the episode's
    # return before it equals done_reward_except_return (the seed notebook's -10 and 499; docs/study.md)
    done_reward: float | None = None
    done_reward_except_return: float | None = None
    # a time-limit truncation is stored as a termination: no bootstrap from its next state (old gym's `done`)
    truncation_terminates: bool = False


@dataclass(frozen=True)
class AgentConfig:
    # auto: cnn for (C, H>=36, W>=36) Atari stacks, minatar for other (H, W, C) grids, mlp otherwise (rl/networks.py)
    network: Literal["auto", "mlp", "cnn", "minatar"] = "auto"
    hidden_sizes: list[int] = field(default_factory=lambda: [256, 256])
    activation: Literal["relu", "tanh"] = "relu"  # between the MLP's layers (the numba engine: relu only)
    # adam (eps: adam_eps), or rmsprop as the MinAtar paper's DQN uses it (centered, alpha 0.95, eps 0.01; torch
    # engine only); lr is either's step size
    optimizer: Literal["adam", "rmsprop"] = "adam"
    lr: float = field(default=1e-3, metadata=_bounds(0.0, lo_open=True))
    adam_eps: float = field(default=1e-8, metadata=_bounds(0.0, lo_open=True))
    gamma: float = field(default=0.99, metadata=_bounds(0.0, 1.0))
    loss: Literal["huber", "mse"] = "huber"
    double_dqn: bool = False
    target_update_period: int = field(default=500, metadata=_bounds(1))
    # also copy the target at the end of every episode (the seed notebook's schedule)
    target_update_on_episode_end: bool = False
    tau: float = field(default=1.0, metadata=_bounds(0.0, 1.0, lo_open=True))
    max_grad_norm: float | None = field(default=10.0, metadata=_bounds(0.0, lo_open=True))
    # torch: autograd, any network and device; numba: one compiled call per update, for the configs that
    # per_cli.rl.engines.supports accepts (a ReLU MLP on the CPU, ...); auto: see per_cli/rl/engines/__init__.py
    engine: Literal["auto", "torch", "numba"] = "auto"
    # on a CUDA device, the torch engine's update and greedy action are each replayed as a captured CUDA graph
    # (per_cli/rl/cuda_graph.py); false: eager. No effect on a CPU or under the numba engine; a resume may change it
    cuda_graph: bool = True


@dataclass(frozen=True)
class ReplayConfig:
    kind: str = "uniform"
    capacity: int = field(default=100_000, metadata=_bounds(1))
    batch_size: int = field(default=64, metadata=_bounds(1))
    # null: the kind's default (its KindSpec's priority_defaults, per_cli/replay/kinds.py), filled in where a run
    # is built (so a run's config.yaml shows the value)
    alpha: float | None = field(default=None, metadata=_bounds(0.0))
    beta0: float | None = field(default=None, metadata=_bounds(0.0, 1.0))
    beta_end_step: int | None = field(default=None, metadata=_bounds(1))
    # β of the n-th sampled batch (n from 1) is min(1, beta0 + n × beta_increment); null: the linear anneal
    beta_increment: float | None = field(default=None, metadata=_bounds(0.0, lo_open=True))
    # the importance-sampling weights the loss applies (per_cli/rl/is_weights.py; docs/replay.md)
    is_weights: Literal["memory_max", "batch_max", "batch_mean", "off"] = "memory_max"
    priority_eps: float = field(default=1e-6, metadata=_bounds(0.0))
    # lap and pal (Fujimoto et al. 2020): κ, the TD error below which priorities stop falling (max(|δ|, κ)^α) and
    # their losses turn quadratic; the authors' discrete default
    min_priority: float = field(default=1e-2, metadata=_bounds(0.0, lo_open=True))
    initial_priority: Literal["max", "td_error"] = "max"
    # rank: exact re-sort of the heap every this many priority updates (calls); null: once per `capacity`
    # updated priorities (about one pass over the memory)
    rank_resort_period: int | None = field(default=None, metadata=_bounds(1))
    # sample only among the `window` most recent transitions (uniform, combined, prioritized, rank); null: all of
    # them. W = batch_size is `none`'s set of transitions, W = capacity ordinary replay (docs/replay.md)
    window: int | None = field(default=None, metadata=_bounds(1))
    # a batch is batch_size / chunk runs of `chunk` consecutive stored transitions, each run's start drawn by the
    # kind's own rule; 1: each transition drawn on its own
    chunk: int = field(default=1, metadata=_bounds(1))
    # n-step returns: each sampled transition's target sums up to n discounted rewards of its episode before
    # bootstrapping with γ^k (computed at sampling from the stored one-step transitions: every storage, every kind)
    n_step: int = field(default=1, metadata=_bounds(1, 1000))
    # Atari frame stacks: the frame ring kept on the training device as well, each batch's stacks gathered there
    # (per_cli/replay/storage/device_frames.py: byte for byte the host's; no host-to-device copy of a batch)
    device_frames: bool = False
    # goal relabelling (Hindsight Experience Replay, per_cli/replay/writers/hindsight.py) over the sampler of
    # `kind`: which achieved goals replace the desired one (off: no relabelling), relabelled copies per transition
    her_strategy: Literal["off", "final", "future", "episode", "random"] = "off"
    her_k: int = field(default=4, metadata=_bounds(1, MAX_HER_K))  # (every stored step is written k + 1 times)
    # the kind's own parameters (a registered kind's params dataclass: per_cli/replay/kinds.py), checked against it
    # by per_cli.train.preflight and filled in with its defaults where a run is built; {} for a kind without any
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Constraints among replay keys (kind names, which kinds draw runs and a kind's ``params`` are checked
        against the registry in per_cli.train.preflight).

        An α past MAX_ALPHA is refused: priorities are p^α (proportional kinds raise |δ| + ε, or lap/pal's
        max(|δ|, κ); rank-based ones 1/rank), and beyond it p^α reaches 0 or inf and every importance-sampling weight
        0 (nothing learnt, silently). Below it priorities stay finite and non-zero."""
        if self.alpha is not None and self.alpha > MAX_ALPHA:
            raise ConfigError(
                f"replay.alpha: {self.alpha:g} makes priorities p^α overflow or vanish in float64 (every "
                f"importance-sampling weight 0, nothing learnt); the paper's α is in [0, 1], give at most {MAX_ALPHA:g}"
            )
        if self.kind == "hindsight":
            raise ConfigError(
                "replay.kind: hindsight is now a writer over any sampler; use replay.kind: uniform (or "
                "prioritized, rank, ...) with replay.her_strategy: future"
            )
        if self.window is not None:
            if self.kind == "none":
                raise ConfigError(
                    "replay.window: kind none always samples the newest batch_size transitions; drop replay.window"
                )
            if not self.batch_size <= self.window <= self.capacity:
                raise ConfigError(
                    f"replay.window: {self.window} must lie between replay.batch_size ({self.batch_size}) and "
                    f"replay.capacity ({self.capacity}); null samples the whole memory"
                )
        if self.chunk > 1 and self.batch_size % self.chunk:
            raise ConfigError(
                f"replay.chunk: {self.chunk} must divide replay.batch_size ({self.batch_size}): a batch is "
                "batch_size / chunk runs"
            )
        if self.beta_increment is not None and self.beta_end_step is not None:
            raise ConfigError(
                "replay.beta_increment: β rises per sampled batch, so replay.beta_end_step (the linear anneal's end) "
                "has no meaning; set one of them to null"
            )
        if self.n_step > 1 and self.her_strategy != "off":
            raise ConfigError(
                "replay.n_step: hindsight relabelling stores relabelled copies after their episode, so the n steps "
                "after one are not its episode's; use replay.n_step: 1 with replay.her_strategy"
            )
        if self.her_strategy != "off" and self.initial_priority == "td_error":
            raise ConfigError(
                "replay.initial_priority: td_error does not work with replay.her_strategy (transitions are stored "
                "when their episode ends); use max"
            )


@dataclass(frozen=True)
class TrainConfig:
    total_steps: int = field(default=50_000, metadata=_bounds(1))
    # an episode budget as well (the seed notebook's 300 episodes): the first budget reached ends the run
    total_episodes: int | None = field(default=None, metadata=_bounds(1))
    learning_starts: int = field(default=1_000, metadata=_bounds(0))
    train_freq: int = field(default=1, metadata=_bounds(1))
    gradient_steps: int = field(default=1, metadata=_bounds(1, MAX_UPDATES_PER_STEP))
    # Fedus et al. (2020)'s replay ratio, gradient updates per env transition: when set, it decides train_freq and
    # gradient_steps at load (replay_schedule); null: those two as given
    replay_ratio: float | None = field(default=None, metadata=_bounds(0.0, MAX_UPDATES_PER_STEP, lo_open=True))
    eps_start: float = field(default=1.0, metadata=_bounds(0.0, 1.0))
    eps_end: float = field(default=0.05, metadata=_bounds(0.0, 1.0))
    eps_fraction: float = field(default=0.1, metadata=_bounds(0.0, 1.0))
    # ε anneals over this many steps instead of eps_fraction × total_steps (the notebook: the first 1,000)
    eps_decay_steps: int | None = field(default=None, metadata=_bounds(0))
    eval_every: int = field(default=10_000, metadata=_bounds(1))
    eval_episodes: int = field(default=10, metadata=_bounds(0, MAX_EVAL_EPISODES))
    eval_eps: float = field(default=0.0, metadata=_bounds(0.0, 1.0))
    checkpoint_every: int = field(default=0, metadata=_bounds(0))
    save_replay: bool = False
    # 1: an update's TD errors reach the host one update late, so a GPU update runs while the host works; the next
    # batch is drawn before this one's priorities are set. An algorithm change, off by default (docs/atari.md)
    priority_lag: int = field(default=0, metadata=_bounds(0, 1))

    def __post_init__(self) -> None:
        if self.replay_ratio is not None:  # (it wins over a base config's train_freq: a sweep names the ratio)
            freq, steps = replay_schedule(self.replay_ratio)
            object.__setattr__(self, "train_freq", freq)
            object.__setattr__(self, "gradient_steps", steps)


def replay_schedule(ratio: float) -> tuple[int, int]:
    """(train_freq, gradient_steps) of a replay ratio: (1, r) for an integer r >= 1, (1/r, 1) where 1/r is an
    integer; anything else is a ConfigError naming the nearest ratios that are."""
    if ratio >= 1 and abs(ratio - round(ratio)) < 1e-9:
        return 1, round(ratio)
    if ratio * MAX_TRAIN_FREQ < 1:  # (1 / 5e-324 is inf)
        raise ConfigError(
            f"train.replay_ratio: {ratio:g} is one update every {1 / ratio if ratio > 0 else float('inf'):.3g} env "
            "steps, more than any run has; give a ratio such as 0.25 (one update every 4 steps)"
        )
    if ratio < 1 and abs(1 / ratio - round(1 / ratio)) < 1e-6 * (1 / ratio):
        return round(1 / ratio), 1
    near = sorted({1 / max(round(1 / ratio), 1), float(max(round(ratio), 1))}, key=lambda r: abs(r - ratio))
    raise ConfigError(
        f"train.replay_ratio: {ratio} is neither an integer nor 1/integer (updates per env step = gradient_steps / "
        f"train_freq); use e.g. {near[0]:g}, or set train.train_freq and train.gradient_steps"
    )


@dataclass(frozen=True)
class LogConfig:
    every: int = field(default=100, metadata=_bounds(1))
    tensorboard: bool = True


@dataclass(frozen=True)
class MetricsConfig:
    """Per-update measures of the batch (docs/metrics.md). ``correlation``: the seed notebook's correlation
    count (blind to dependence in time; kept for comparison). ``iid``: state and episode diversity, the
    measures that separate consecutive from independent batches."""

    correlation_threshold: float = field(default=0.8, metadata=_bounds(0.0, 1.0))
    correlation: bool = True
    iid: bool = True


@dataclass(frozen=True)
class Config:
    env: EnvConfig = field(default_factory=EnvConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    replay: ReplayConfig = field(default_factory=ReplayConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    log: LogConfig = field(default_factory=LogConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    # numpy, torch and the envs take different integer widths; this range is safe for all (seed + step included)
    seed: int = field(default=1, metadata=_bounds(0, 1_000_000_000))
    device: Literal["auto", "cpu", "cuda"] = "auto"
    # modules or .py files imported before the run is built, each registering its own replay kinds
    # (per_cli/plugins.py, docs/extending.md)
    plugins: list[str] = field(default_factory=list)
