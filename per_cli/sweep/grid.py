"""``per grid``: expand a sweep (env × replay kind × seed × swept keys) into runs, run them on a local process
pool or on Ray, and resume after any crash.

The run directories are the only state. A run whose ``summary.json`` says ``completed`` is never started
again; ``running`` (the process died) or an interrupted run is started again from scratch; ``failed`` is
re-run only with ``--retry-failed``. Everything the grid needs is validated before any directory is made.
The executors (where a run actually trains) live in :mod:`per_cli.sweep.backends`.
"""

from __future__ import annotations

import copy
import itertools
import os
import re
import shlex
import signal
import sys
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from per_cli.config import ConfigError, apply_override, from_dict, parse_override, read_yaml, to_dict
from per_cli.train.logger import atomic_write_text, read_summary

MANIFEST = "grid.yaml"
EVENT_LOG = "grid.log"
LOCKS_DIR = ".locks"
GRID_LOCK = ".grid.lock"
DEFAULT_SEEDS = 3
# kinds that only make sense for goal-conditioned envs: in the default set only where a config names them
GOAL_ONLY_KINDS = frozenset({"hindsight"})
# keys the grid itself sets per run; they are axes (--envs, --replays, --seeds), not --set/--sweep values
AXIS_KEYS = {"env.id": "--envs", "replay.kind": "--replays", "seed": "--seeds"}
FULL_TABLE_MAX_RUNS = 60


# file-name short forms of replay kinds: configs/pong_per.yaml holds prioritized, bitflip_her.yaml hindsight
FILE_KINDS = {"prioritized": "per", "hindsight": "her"}


def config_candidates(configs_dir: Path, label: str, kind: str) -> list[Path]:
    """``<label>_<short form>.yaml``, then ``<label>_<kind>.yaml``: the env's own config for a kind."""
    names = dict.fromkeys([FILE_KINDS.get(kind, kind), kind])
    return [configs_dir / f"{label}_{name}.yaml" for name in names]


def default_workers() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return os.cpu_count() or 1


def default_configs_dir() -> Path:
    """``./configs`` when it exists (running from the repository root or a project of one's own), else the
    ``configs/`` next to the installed package (an editable install from the repository)."""
    here = Path("configs")
    if here.is_dir():
        return here
    return Path(__file__).resolve().parent.parent / "configs"


# ----------------------------------------------------------------------------------------------------------
# what was asked


@dataclass(frozen=True)
class Sweep:
    key: str
    raw: tuple[str, ...]  # the values as typed, used in run names
    values: tuple[Any, ...]  # the values as YAML reads them


@dataclass
class GridRequest:
    """The options that define a grid; equal requests mean the same grid (what resuming compares)."""

    envs: list[str]
    replays: list[str] | None  # None: every kind that has a config
    seeds: list[int]
    sweeps: list[Sweep] = field(default_factory=list)
    sets: list[str] = field(default_factory=list)
    config: Path | None = None
    configs_dir: Path = field(default_factory=default_configs_dir)

    def manifest(self) -> dict[str, Any]:
        return {
            "envs": list(self.envs),
            "replays": None if self.replays is None else list(self.replays),
            "seeds": list(self.seeds),
            "sweeps": [{"key": s.key, "values": list(s.raw)} for s in self.sweeps],
            "sets": list(self.sets),
            "config": None if self.config is None else str(self.config.resolve()),
            "configs_dir": str(self.configs_dir.resolve()),
        }


def _split_list(text: str, option: str) -> list[str]:
    """Split ``a,b,c`` on commas outside brackets and quotes (``[64,64],[256,256]`` is two values)."""
    items, depth, quote, current = [], 0, None, []
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append("".join(current).strip())
            current = []
            continue
        current.append(ch)
    items.append("".join(current).strip())
    if any(not item for item in items):
        raise ConfigError(f"{option} {text!r}: empty item in the comma-separated list")
    if len(set(items)) != len(items):
        raise ConfigError(f"{option} {text!r}: an item is repeated")
    return items


def parse_seeds(text: str) -> list[int]:
    """``3`` -> seeds 1, 2, 3; ``1,5,9`` -> exactly those seeds."""
    try:
        if "," in text:
            seeds = [int(s) for s in _split_list(text, "--seeds")]
        else:
            n = int(text)
            if n < 1:
                raise ConfigError(f"--seeds {text}: give a count >= 1 or a list such as 1,2,3")
            seeds = list(range(1, n + 1))
    except ValueError:
        raise ConfigError(f"--seeds {text!r}: give a count (3 runs seeds 1..3) or a list of seeds (1,5,9)") from None
    if any(s < 0 for s in seeds):
        raise ConfigError(f"--seeds {text!r}: seeds must be >= 0")
    return seeds


def parse_sweep(text: str) -> Sweep:
    key, sep, values = text.partition("=")
    key = key.strip()
    if not sep or not key or not values.strip():
        raise ConfigError(f"--sweep {text!r}: expected KEY=v1,v2,... e.g. --sweep replay.capacity=1000,100000")
    raw = _split_list(values, f"--sweep {key}=")
    parsed = [parse_override(f"{key}={v}")[1] for v in raw]
    return Sweep(key, tuple(raw), tuple(parsed))


def build_request(
    envs: str,
    replays: str | None = None,
    seeds: str = str(DEFAULT_SEEDS),
    sweeps: list[str] | None = None,
    sets: list[str] | None = None,
    config: Path | None = None,
    configs_dir: Path | None = None,
) -> GridRequest:
    """Parse the command-line strings of ``per grid``; raises ConfigError on bad input."""
    from per_cli.envs import check_env_id
    from per_cli.replay import REPLAY_KINDS

    env_list = _split_list(envs, "--envs")
    for env in env_list:
        try:
            check_env_id(env)
        except ConfigError as exc:
            raise ConfigError(str(exc).replace("env.id: ", "--envs: ", 1)) from None
    replay_list = None
    if replays is not None:
        replay_list = _split_list(replays, "--replays")
        for kind in replay_list:
            if kind == "per":
                raise ConfigError("--replays: 'per' is the file-name short form; the kind is called 'prioritized'")
            if kind not in REPLAY_KINDS:
                raise ConfigError(f"--replays: unknown replay kind {kind!r}; choose from {', '.join(REPLAY_KINDS)}")
    sweep_list = [parse_sweep(s) for s in sweeps or []]
    keys = [s.key for s in sweep_list]
    for key in keys:
        if keys.count(key) > 1:
            raise ConfigError(f"--sweep {key}: swept twice; give all its values in one --sweep")
    set_list = list(sets or [])
    for key, option in [(k, "--sweep") for k in keys] + [(parse_override(s)[0], "--set") for s in set_list]:
        if key in AXIS_KEYS:
            raise ConfigError(f"{option} {key}: the grid sets {key} itself; use {AXIS_KEYS[key]} instead")
    if config is not None and not config.is_file():
        raise ConfigError(f"--config {config}: file not found")
    cdir = configs_dir if configs_dir is not None else default_configs_dir()
    if configs_dir is not None and not cdir.is_dir():
        raise ConfigError(f"--configs-dir {cdir}: not a directory")
    return GridRequest(env_list, replay_list, parse_seeds(seeds), sweep_list, set_list, config, cdir)


# ----------------------------------------------------------------------------------------------------------
# the plan: one spec per run


@dataclass
class RunSpec:
    name: str
    env: str
    replay: str
    seed: int
    sweep: dict[str, str]  # key -> value as typed
    source: str  # the config file it started from
    config: dict[str, Any]  # the resolved, validated config as plain data

    @property
    def total_steps(self) -> int:
        return int(self.config["train"]["total_steps"])

    def manifest(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "env": self.env,
            "replay": self.replay,
            "seed": self.seed,
            "sweep": dict(self.sweep),
            "source": self.source,
        }


@dataclass
class GridPlan:
    request: GridRequest
    runs: list[RunSpec]
    notes: list[str]  # kinds left out of the defaults, and why


def env_file_label(env: str) -> str:
    """The ``<env>`` of ``configs/<env>_<kind>.yaml``: the alias of a known id (CartPole-v1 -> cartpole)."""
    from per_cli.envs import ALIASES, env_label, resolve_env_id

    env_id = resolve_env_id(env)
    for alias, alias_id in ALIASES.items():
        if alias_id == env_id:
            return alias
    return env_label(env)


def _slug(text: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9._+-]+", "-", text).strip("-")
    return slug or "x"


def run_name(label: str, kind: str, seed: int, sweep: dict[str, str]) -> str:
    parts = [label, kind, f"s{seed}"] + [f"{key}={_slug(raw)}" for key, raw in sweep.items()]
    return "__".join(parts)


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path.resolve())


def plan_grid(request: GridRequest) -> GridPlan:
    """Resolve and validate the config of every run; raises ConfigError (nothing is written)."""
    from per_cli.replay import REPLAY_KINDS

    notes: list[str] = []
    sources: list[tuple[str, str, Path]] = []  # (env, kind, config file) in env-major order
    for env in request.envs:
        label = env_file_label(env)
        kinds = request.replays if request.replays is not None else list(REPLAY_KINDS)
        for kind in kinds:
            candidates = config_candidates(request.configs_dir, label, kind)
            own = next((c for c in candidates if c.is_file()), candidates[0])
            if request.config is not None:
                if request.replays is None and kind in GOAL_ONLY_KINDS and not own.is_file():
                    notes.append(f"{env}: {kind} left out (goal-conditioned envs only; name it in --replays)")
                    continue
                sources.append((env, kind, request.config))
            elif own.is_file():
                sources.append((env, kind, own))
            elif request.replays is None:
                hint = "goal-conditioned envs only" if kind in GOAL_ONLY_KINDS else "give --config BASE to run it"
                notes.append(f"{env}: {kind} left out (no {_display(own)}; {hint})")
            else:
                raise ConfigError(
                    f"--replays {kind}: no config {_display(own)} for {env}; "
                    "give --config BASE.yaml to run it from a base config"
                )
    if not sources:
        raise ConfigError(
            f"nothing to run: no configs/<env>_<kind>.yaml for {', '.join(request.envs)} in "
            f"{_display(request.configs_dir)}; give --config BASE.yaml or --configs-dir DIR"
        )

    files: dict[Path, dict] = {}
    combos = list(itertools.product(*[list(zip(s.raw, s.values, strict=True)) for s in request.sweeps]))
    runs: list[RunSpec] = []
    checked_envs: set[str] = set()
    # seed-major order: a grid stopped half-way has the first seeds of every setting, not all seeds of a few
    for seed in request.seeds:
        for env, kind, path in sources:
            if path not in files:
                files[path] = read_yaml(path)
            for combo in combos:
                data = copy.deepcopy(files[path])
                apply_override(data, "env.id", env)
                apply_override(data, "replay.kind", kind)
                for text in request.sets:
                    apply_override(data, *parse_override(text))
                sweep = {}
                for sw, (raw, value) in zip(request.sweeps, combo, strict=True):
                    apply_override(data, sw.key, value)
                    sweep[sw.key] = raw
                apply_override(data, "seed", seed)
                where = f"{env} × {kind} × seed {seed}" + "".join(f" × {k}={v}" for k, v in sweep.items())
                try:
                    cfg = from_dict(data)
                except ConfigError as exc:
                    raise ConfigError(f"{_display(path)} ({where}): {exc}") from None
                if cfg.env.id not in checked_envs:
                    _check_env_actions(cfg, where)
                    checked_envs.add(cfg.env.id)
                name = run_name(env_file_label(env), kind, seed, sweep)
                runs.append(RunSpec(name, env, kind, seed, sweep, _display(path), to_dict(cfg)))
    dup = next((n for n, count in Counter(r.name for r in runs).items() if count > 1), None)
    if dup is not None:
        raise ConfigError(
            f"two runs would share the directory name {dup!r}; make the --envs or --sweep values distinct"
        )
    return GridPlan(request, runs, notes)


def _check_env_actions(cfg, where: str) -> None:
    """DQN needs a Discrete action space: check each env once here rather than fail in every run."""
    import gymnasium as gym

    from per_cli.envs import make_env

    try:
        env = make_env(cfg.env, cfg.seed)
    except ConfigError as exc:
        raise ConfigError(f"{exc} ({where})") from None
    except Exception as exc:  # noqa: BLE001 - a missing ROM, a bad env kwarg, ...: bad input, said in one line
        raise ConfigError(f"--envs {cfg.env.id} ({where}): cannot make the env: {type(exc).__name__}: {exc}") from None
    try:
        if not isinstance(env.action_space, gym.spaces.Discrete):
            raise ConfigError(
                f"--envs {cfg.env.id} ({where}): a {type(env.action_space).__name__} action space; DQN needs a "
                "Discrete one"
            )
    finally:
        env.close()


def check_devices(plan: GridPlan) -> None:
    if any(r.config["device"] == "cuda" for r in plan.runs):
        import torch

        if not torch.cuda.is_available():
            raise ConfigError("device: cuda was asked for but no CUDA GPU is visible; use --set device=cpu or auto")


# ----------------------------------------------------------------------------------------------------------
# the grid directory and the state of each run


def find_grid_dir(plan: GridPlan, runs_dir: Path, name: str | None) -> tuple[Path, bool]:
    """The grid directory and whether it exists already. ``--name`` picks it; otherwise an existing grid made
    by the same request is resumed, else a new ``grid-<timestamp>`` is named (not created)."""
    wanted = plan.request.manifest()
    if name is not None:
        if not name or "/" in name or name in (".", ".."):
            raise ConfigError(f"--name {name!r}: give a plain directory name")
        grid_dir = runs_dir / name
        if not grid_dir.exists():
            return grid_dir, False
        manifest = read_manifest(grid_dir)
        if manifest is None:
            raise ConfigError(f"--name {name}: {grid_dir} exists and is not a grid directory (no {MANIFEST})")
        diff = [k for k in wanted if manifest.get("request", {}).get(k) != wanted[k]]
        if diff:
            raise ConfigError(
                f"--name {name}: {grid_dir} was made by a different request (differs in {', '.join(diff)}); "
                "repeat its options to resume it, or choose another --name"
            )
        return grid_dir, True
    matches = sorted(
        p.parent
        for p in runs_dir.glob(f"grid-*/{MANIFEST}")
        if (m := read_manifest(p.parent)) is not None and m.get("request") == wanted
    )
    if matches:
        return matches[-1], True
    stamp = time.strftime("%Y%m%d-%H%M%S")
    grid_dir, n = runs_dir / f"grid-{stamp}", 1
    while grid_dir.exists():
        n += 1
        grid_dir = runs_dir / f"grid-{stamp}-{n}"
    return grid_dir, False


def read_manifest(grid_dir: Path) -> dict | None:
    try:
        data = yaml.safe_load((grid_dir / MANIFEST).read_text())
    except (FileNotFoundError, NotADirectoryError, yaml.YAMLError):
        return None
    return data if isinstance(data, dict) else None


def run_state(run_dir: Path) -> tuple[str, dict | None]:
    """``new``, ``completed``, ``failed`` or ``unfinished`` (died mid-run, interrupted, or half-made)."""
    summary = read_summary(run_dir)
    if summary is None:
        return ("unfinished" if run_dir.exists() else "new"), None
    status = summary.get("status")
    if status == "completed":
        return "completed", summary
    if status == "failed" and not str(summary.get("error", "")).startswith("interrupted"):
        return "failed", summary
    return "unfinished", summary  # running: the process died; failed by an interrupt; anything else


def action_for(state: str, retry_failed: bool, run_dir: Path | None = None) -> str:
    if state == "completed":
        return "skip"
    if state == "failed":
        return "retry" if retry_failed else "skip"
    if state == "unfinished":
        from per_cli.sweep.backends import has_checkpoint

        return "resume" if run_dir is not None and has_checkpoint(run_dir) else "restart"
    return "start"


# ----------------------------------------------------------------------------------------------------------
# dry run


def dry_run_table(plan: GridPlan, grid_dir: Path, exists: bool, retry_failed: bool, out=None) -> None:
    out = out or sys.stdout
    rows = []
    for spec in plan.runs:
        state = run_state(grid_dir / spec.name)[0] if exists else "new"
        action = action_for(state, retry_failed, grid_dir / spec.name)
        rows.append((spec.name, spec.source, str(spec.total_steps), state, action))
    header = ("run", "config", "steps", "state", "action")
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    print(f"grid {grid_dir} ({'exists: resuming' if exists else 'new'}); dry run, nothing is written", file=out)
    for note in plan.notes:
        print(f"note: {note}", file=out)
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip(), file=out)
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip(), file=out)
    actions = [r[4] for r in rows]
    to_run = sum(a != "skip" for a in actions)
    print(f"{len(rows)} runs: {to_run} to run, {actions.count('skip')} to skip", file=out)


# ----------------------------------------------------------------------------------------------------------
# running


@dataclass
class GridOutcome:
    grid_dir: Path
    exit_code: int


class _GridProgress:
    """An overall bar (env steps of the runs to do) plus a line per finished run; plain lines off a terminal."""

    def __init__(self, total_runs: int, total_steps: int, stream=None):
        self.stream = stream or sys.stderr
        self.total_runs, self.done_runs = total_runs, 0
        self.steps: dict[str, int] = {}
        self._rich = None
        if self.stream.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            self._rich = Progress(
                TextColumn("[bold]grid"),
                BarColumn(),
                TextColumn("{task.fields[runs]}"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=Console(file=self.stream),
            )
            self._task = self._rich.add_task("grid", total=max(total_steps, 1), runs=self._runs_text())

    def _runs_text(self) -> str:
        return f"{self.done_runs}/{self.total_runs} runs"

    def __enter__(self) -> _GridProgress:
        if self._rich is not None:
            self._rich.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._rich is not None:
            self._rich.stop()

    def line(self, text: str) -> None:
        if self._rich is not None:
            self._rich.console.print(text, markup=False, highlight=False)
        else:
            print(text, file=self.stream, flush=True)

    def step(self, name: str, step: int) -> None:
        self.steps[name] = step
        if self._rich is not None:
            self._rich.update(self._task, completed=sum(self.steps.values()))

    def finished(self, spec: RunSpec, result: dict) -> None:
        self.done_runs += 1
        self.step(spec.name, spec.total_steps)
        if self._rich is not None:
            self._rich.update(self._task, runs=self._runs_text())
        status = result.get("status", "?")
        detail = ""
        if status == "completed":
            detail = f"{_fmt(result.get('wall_time_s'))} s, return {_fmt(result.get('final_return_mean'))}"
        elif result.get("error"):
            detail = str(result["error"]).splitlines()[0][:160]
        if result.get("note"):
            detail += f" ({result['note']})"
        if result.get("host"):  # Ray: the node that trained it
            detail += f" [on {result['host']}]"
        self.line(f"[{self.done_runs}/{self.total_runs}] {status:<11} {spec.name}  {detail}".rstrip())


def _fmt(value: Any) -> str:
    return "-" if value is None else f"{value:.1f}"


class _EventLog:
    """``grid.log``: one line per start and end of a run, appended and flushed (an audit trail of attempts)."""

    def __init__(self, path: Path):
        self._file = open(path, "a", buffering=1)  # noqa: SIM115 - closed in close()

    def write(self, event: str, name: str, detail: str = "") -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        self._file.write(f"{stamp} {event} {name} {detail}".rstrip() + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def _write_manifest(plan: GridPlan, grid_dir: Path, argv: list[str], created: str | None) -> None:
    data = {
        "version": 1,
        "created": created or time.strftime("%Y-%m-%dT%H:%M:%S"),
        "updated": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "command": shlex.join(["per", *argv[1:]]),
        "request": plan.request.manifest(),
        "notes": list(plan.notes),
        "runs": [spec.manifest() for spec in plan.runs],
    }
    atomic_write_text(grid_dir / MANIFEST, yaml.safe_dump(data, sort_keys=False, allow_unicode=True))


def _raise_interrupt(signum, frame):  # noqa: ARG001 - signal handler signature
    raise KeyboardInterrupt


def run_grid(
    plan: GridPlan,
    grid_dir: Path,
    *,
    workers: int | None,
    backend: str = "local",
    ray_address: str | None = None,
    retry_failed: bool = False,
    argv: list[str] | None = None,
    out=None,
) -> GridOutcome:
    """Run every run of ``plan`` that is not complete into ``grid_dir``; returns the exit code (0 all
    completed, 1 any failed, 130 interrupted)."""
    from per_cli.sweep.backends import GridLockedError, hold_lock, make_executor

    out = out or sys.stdout
    existed = grid_dir.exists()
    states = {spec.name: run_state(grid_dir / spec.name)[0] for spec in plan.runs}
    todo = [s for s in plan.runs if action_for(states[s.name], retry_failed) != "skip"]
    # the executor first: a Ray cluster that cannot be reached is bad input, and leaves nothing on disk
    n_workers = workers or (default_workers() if backend == "local" else None)  # None: all of Ray's CPUs
    n_workers = max(1, min(n_workers, len(todo))) if n_workers else None
    executor = make_executor(backend, n_workers, ray_address) if todo else None
    try:
        grid_dir.mkdir(parents=True, exist_ok=True)
        (grid_dir / LOCKS_DIR).mkdir(exist_ok=True)
        grid_lock = hold_lock(grid_dir / GRID_LOCK, wait_s=0)
    except GridLockedError:
        if executor is not None:
            executor.close()
        raise ConfigError(f"{grid_dir} is being run by another per grid process; wait for it or stop it") from None
    old_manifest = read_manifest(grid_dir) if existed else None
    _write_manifest(plan, grid_dir, argv or sys.argv, (old_manifest or {}).get("created"))

    print(
        f"grid {grid_dir}: {len(plan.runs)} runs, {len(todo)} to run, {len(plan.runs) - len(todo)} skipped "
        f"({sum(v == 'completed' for v in states.values())} already complete); backend {backend}"
        + (f", {executor.size} workers" if executor is not None else ""),
        file=sys.stderr,
        flush=True,
    )
    for note in plan.notes:
        print(f"note: {note}", file=sys.stderr)

    events = _EventLog(grid_dir / EVENT_LOG)
    ran: dict[str, dict] = {}  # finished in this invocation: name -> result
    started: set[str] = set()
    interrupted = False
    old_term = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        if executor is not None:
            with _GridProgress(len(todo), sum(s.total_steps for s in todo)) as progress:
                try:
                    _drive(executor, todo, grid_dir, retry_failed, progress, events, ran, started)
                except KeyboardInterrupt:
                    interrupted = True
                    progress.line("interrupted: stopping the runs in flight (Ctrl-C again to kill them at once)")
                    try:
                        executor.stop(interrupt=True)
                    except KeyboardInterrupt:
                        executor.kill()
    finally:
        if executor is not None:
            executor.close()
        signal.signal(signal.SIGTERM, old_term)
        events.write("end-grid", "-", "interrupted" if interrupted else "")
        events.close()
        grid_lock.release()

    code = report(plan, grid_dir, ran, started, retry_failed, interrupted, out)
    return GridOutcome(grid_dir, code)


def _payload(spec: RunSpec, grid_dir: Path, retry_failed: bool) -> dict[str, Any]:
    return {
        "name": spec.name,
        "run_dir": str(grid_dir / spec.name),
        "lock": str(grid_dir / LOCKS_DIR / f"{spec.name}.lock"),
        "config": spec.config,
        "retry_failed": retry_failed,
    }


def _drive(executor, todo, grid_dir, retry_failed, progress, events, ran, started) -> None:
    pending = deque(todo)
    in_flight: dict[str, RunSpec] = {}
    while pending or in_flight:
        while pending and executor.free() > 0:
            spec = pending.popleft()
            events.write("start", spec.name)
            executor.submit(_payload(spec, grid_dir, retry_failed))
            in_flight[spec.name] = spec
            started.add(spec.name)
        for kind, name, data in executor.poll(timeout=0.5):
            if kind == "progress":
                progress.step(name, data)
                continue
            spec = in_flight.pop(name)
            ran[name] = data
            events.write("end", name, data.get("status", "?"))
            progress.finished(spec, data)


def report(plan, grid_dir, ran, started, retry_failed, interrupted, out) -> int:
    """The end table (from the run directories on disk, the only truth) and the exit code."""
    rows, counts = [], {}
    for spec in plan.runs:
        state, summary = run_state(grid_dir / spec.name)
        summary = summary or {}
        result = ran.get(spec.name)
        if result is not None and result.get("status") == "busy":
            label, note = "busy", "locked by another process; not run"
        elif result is not None or spec.name in started:  # ran (or was stopped) in this invocation
            label = state if state in ("completed", "failed") else "unfinished"
            note = {"failed": str(summary.get("error", "")).split("\n")[0][:100], "unfinished": "interrupted"}.get(
                label, (result or {}).get("note", "")
            )
        elif state == "completed":
            label, note = "skipped", "already complete"
        elif state == "failed":
            label, note = "failed", "not reached" if retry_failed else "failed before; --retry-failed re-runs it"
        else:
            label, note = "unfinished", "not reached"
        counts[label] = counts.get(label, 0) + 1
        rows.append((spec.name, label, str(summary.get("total_steps", "-")), _fmt(summary.get("wall_time_s")),
                     _fmt(summary.get("final_return_mean")), _fmt(summary.get("eval_return_mean")), note))  # fmt: skip
    header = ("run", "status", "steps", "wall_s", "return", "eval", "note")
    show = rows if len(rows) <= FULL_TABLE_MAX_RUNS else [r for r in rows if r[1] not in ("completed", "skipped")]
    if show:
        widths = [max(len(h), *(len(r[i]) for r in show)) for i, h in enumerate(header)]
        print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip(), file=out)
        for row in show:
            print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip(), file=out)
    order = ["completed", "skipped", "failed", "unfinished", "busy"]
    print(
        f"grid {grid_dir}: " + ", ".join(f"{counts[k]} {k}" for k in order if counts.get(k)),
        file=out,
    )
    print(f"plot: per plot {shlex.quote(str(grid_dir))}", file=out)
    if interrupted:
        print("interrupted: run the same command again to resume", file=out)
        return 130
    if counts.get("failed"):
        return 1
    if counts.get("unfinished") or counts.get("busy"):
        return 1
    return 0
