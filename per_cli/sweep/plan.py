"""The plan of a grid: one :class:`RunSpec` per run, every config resolved and checked before anything runs."""

from __future__ import annotations

import copy
import itertools
from collections import Counter
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from per_cli.analysis.text import slug
from per_cli.config import apply_override, from_dict, parse_override, read_yaml, to_dict
from per_cli.config.reading import parse_yaml, read_text
from per_cli.errors import ConfigError
from per_cli.sweep.request import HER_SUFFIX, GridRequest, split_label

# file-name short forms of replay kinds: configs/pong_per.yaml holds prioritized
FILE_KINDS = {"prioritized": "per"}
HER_FILE = "her"  # configs/<env>_her.yaml: the env's hindsight-relabelling config (any sampler)
# runs one grid plans: each is a run directory, a manifest entry and a state read on every start; the seeds alone
# are capped at per_cli.config.seeds.MAX_SEEDS, and the settings multiply them
MAX_RUNS = 10_000


@dataclass
class RunSpec:
    name: str
    env: str
    replay: str  # the replay label: kind, or kind+her
    seed: int
    sweep: dict[str, str]  # key -> value as typed
    source: str  # the config file it started from
    config: dict[str, Any]  # the resolved, validated config as plain data

    @property
    def total_steps(self) -> int:
        return int(self.config["train"]["total_steps"])

    def manifest(self) -> dict[str, Any]:
        """The run's entry in grid.yaml: every field but the config (its config.yaml holds that), each a copy (the
        seeds of a setting share its ``sweep``, which YAML would write as an alias)."""
        return {f.name: copy.copy(getattr(self, f.name)) for f in fields(self) if f.name != "config"}

    def with_seed(self, seed: int, env_label: str) -> RunSpec:
        """The run of this run's setting with ``seed`` (``env_label``: the env's in run names)."""
        name = run_name(env_label, self.replay, seed, self.sweep)
        return replace(self, name=name, seed=seed, config={**self.config, "seed": seed})


@dataclass
class GridPlan:
    request: GridRequest
    runs: list[RunSpec]


def config_candidates(configs_dir: Path, env_label: str, replay: str) -> list[Path]:
    """The env's own config files for a replay label, best first: ``<env>_<short form>.yaml`` then
    ``<env>_<kind>.yaml``; for ``kind+her`` the same with ``_her`` appended, then ``<env>_her.yaml`` (whose
    sampler the grid replaces by ``kind``)."""
    kind, her = split_label(replay)
    names = list(dict.fromkeys([FILE_KINDS.get(kind, kind), kind]))
    if her:
        names = [f"{name}_{HER_FILE}" for name in names] + [HER_FILE]
    return [configs_dir / f"{env_label}_{name}.yaml" for name in names]


def default_labels(configs_dir: Path, env_label: str) -> list[str]:
    """Every sampler kind, plus ``<kind>+her`` where the env has a hindsight config: ``<env>_her.yaml`` (under
    the sampler its file names) or ``<env>_<kind>_her.yaml``."""
    from per_cli.replay import KINDS

    labels = list(KINDS)
    her_file = configs_dir / f"{env_label}_{HER_FILE}.yaml"
    if her_file.is_file():
        data = parse_yaml(her_file, read_text(her_file))  # (a person's file: read as every config is)
        replay = data.get("replay") if isinstance(data, dict) else None
        labels.append(f"{(replay or {}).get('kind', 'uniform')}{HER_SUFFIX}")
    for kind in KINDS:
        label = f"{kind}{HER_SUFFIX}"
        if label not in labels and any(p.is_file() for p in config_candidates(configs_dir, env_label, label)[:-1]):
            labels.append(label)
    return labels


def base_labels(config: Path) -> list[str]:
    """Every sampler kind as a base config runs it: ``kind+her`` where its ``replay.her_strategy`` is on."""
    from per_cli.replay import KINDS

    her = ((read_yaml(config).get("replay") or {}).get("her_strategy") or "off") != "off"
    return [f"{kind}{HER_SUFFIX}" if her else kind for kind in KINDS]


def env_file_label(env: str) -> str:
    """The ``<env>`` of ``configs/<env>_<kind>.yaml``: the alias of a known id (CartPole-v1 -> cartpole)."""
    from per_cli.envs import ALIASES, env_label, resolve_env_id

    env_id = resolve_env_id(env)
    for alias, alias_id in ALIASES.items():
        if alias_id == env_id:
            return alias
    return env_label(env)


def run_name(env_label: str, replay: str, seed: int, sweep: dict[str, str]) -> str:
    parts = [env_label, replay, f"s{seed}"] + [f"{key}={value_slug(raw)}" for key, raw in sweep.items()]
    return "__".join(parts)


def value_slug(raw: str) -> str:
    """A swept value in a run name: ``slug`` keeping a leading minus, so ``env.done_reward=-10`` is not named
    ``=10`` (which another value may be)."""
    negative = raw.strip().startswith("-")
    return ("-" if negative else "") + slug(raw)


def display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path.resolve())


def _sources(request: GridRequest) -> list[tuple[str, str, Path]]:
    """(env, replay label, config file) in env-major order: by default the kinds that have a config for the env; a
    label named in --replays without one is a ConfigError."""
    sources: list[tuple[str, str, Path]] = []
    for env in request.envs:
        label = env_file_label(env)
        if request.replays is not None:
            wanted = request.replays
        elif request.config is not None:  # every sampler, with relabelling where the base config has it on
            wanted = base_labels(request.config)
        else:
            wanted = default_labels(request.configs_dir, label)
        for replay in wanted:
            candidates = config_candidates(request.configs_dir, label, replay)
            source = request.config or next((c for c in candidates if c.is_file()), None)  # (a base config: for all)
            if source is not None:
                sources.append((env, replay, source))
            elif request.replays is not None:
                raise ConfigError(
                    f"--replays {replay}: no config {display(candidates[0])} for {env}; "
                    "give --config BASE.yaml to run it from a base config"
                )
    if not sources:
        raise ConfigError(
            f"nothing to run: no configs/<env>_<kind>.yaml for {', '.join(request.envs)} in "
            f"{display(request.configs_dir)}; give --config BASE.yaml or --configs-dir DIR"
        )
    return sources


def _resolve(data: dict, request: GridRequest, env: str, replay: str, seed: int, combo, where: str, path: Path):
    """Apply the grid's axes to a copy of the file's data and validate it; returns (cfg, sweep values)."""
    data = copy.deepcopy(data)
    kind, _ = split_label(replay)
    apply_override(data, "env.id", env)
    apply_override(data, "replay.kind", kind)
    for text in request.sets:
        apply_override(data, *parse_override(text))
    sweep = {}
    for sw, (raw, value) in zip(request.sweeps, combo, strict=True):
        apply_override(data, sw.key, value)
        sweep[sw.key] = raw
    apply_override(data, "seed", seed)
    from per_cli.replay import replay_label, resolve_config

    try:  # (resolved: the config.yaml its run writes, which a grid resumed later compares)
        cfg = resolve_config(from_dict(data))
    except ConfigError as exc:
        raise ConfigError(f"{display(path)} ({where}): {exc}") from None
    got = replay_label(cfg.replay)  # (what summary.json records as ``replay``)
    if got != replay:
        raise ConfigError(
            f"{display(path)} ({where}): the config runs as replay {got!r}, not {replay!r}; "
            + ("set replay.her_strategy in it" if replay.endswith(HER_SUFFIX) else f"ask for --replays {got}")
        )
    return cfg, sweep


def _preflight(cfg, where: str, checked: set[str]) -> None:
    """Every check that needs no training, once per distinct config (the plan's are all of its first seed)."""
    from per_cli.train.preflight import preflight

    key = repr(to_dict(cfg))
    if key in checked:
        return
    try:
        preflight(cfg)
    except ConfigError as exc:
        raise ConfigError(f"{exc} ({where})") from None
    checked.add(key)


def plan_grid(request: GridRequest) -> GridPlan:
    """Resolve and validate the config of every run; raises ConfigError (nothing is written). Each setting is checked
    once: the seed changes nothing a check reads."""
    sources = _sources(request)
    combos = list(itertools.product(*[list(zip(s.raw, s.values, strict=True)) for s in request.sweeps]))
    count = len(request.seeds) * len(sources) * len(combos)
    if count > MAX_RUNS:
        raise ConfigError(
            f"the grid would have {count:,} runs ({len(request.seeds):,} seeds × {len(sources) * len(combos):,} "
            f"settings); one grid plans at most {MAX_RUNS:,} (a run directory each); give fewer --seeds or values"
        )
    files: dict[Path, dict] = {}
    settings: list[tuple[str, RunSpec]] = []  # (the env's label in run names, the setting's run of the first seed)
    checked: set[str] = set()
    for env, replay, path in sources:
        if path not in files:
            files[path] = read_yaml(path)
        for combo in combos:
            swept = "".join(f" × {s.key}={raw}" for s, (raw, _) in zip(request.sweeps, combo, strict=True))
            where = f"{env} × {replay}{swept}"
            cfg, sweep = _resolve(files[path], request, env, replay, request.seeds[0], combo, where, path)
            _preflight(cfg, where, checked)
            label, seed = env_file_label(env), request.seeds[0]
            spec = RunSpec(run_name(label, replay, seed, sweep), env, replay, seed, sweep, display(path), to_dict(cfg))
            settings.append((label, spec))
    # seed-major order: a grid stopped half-way has the first seeds of every setting, not all seeds of a few
    runs = [spec.with_seed(seed, label) for seed in request.seeds for label, spec in settings]
    dup = next((n for n, count in Counter(r.name for r in runs).items() if count > 1), None)
    if dup is not None:
        raise ConfigError(
            f"two runs would share the directory name {dup!r}; make the --envs or --sweep values distinct"
        )
    return GridPlan(request, runs)


def check_devices(plan: GridPlan) -> None:
    if any(r.config["device"] == "cuda" for r in plan.runs):
        import torch

        if not torch.cuda.is_available():
            raise ConfigError("device: cuda was asked for but no CUDA GPU is visible; use --set device=cpu or auto")
