"""A cohort: S runs of one config that differ only in the seed, trained in lockstep in one process.

Each member is built as its solo run would be (:func:`~per_cli.train.loop.setup.build_member`) and has its own
RNG streams and buffers, so it computes what its solo run computes, bit for bit (tests/train/loop/test_cohort.py).
:attr:`Cohort.note` says whether the torch members run stacked (:class:`~per_cli.rl.engines.stacked.StackedEngine`).
See docs/cohorts.md."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from per_cli.config import Config, ConfigError, to_dict
from per_cli.envs import resolve_env_id
from per_cli.envs.pool import make_pooled
from per_cli.rl.engines.stacked import stacked_refusal
from per_cli.train.loop import trainer_state
from per_cli.train.loop.lockstep import run_members
from per_cli.train.loop.progress import ProgressSink
from per_cli.train.loop.setup import build_member
from per_cli.train.loop.steps import Steps


def cohort_configs(cfg: Config, seeds: Sequence[int]) -> list[Config]:
    """One config per seed, identical otherwise."""
    return [dataclasses.replace(cfg, seed=int(seed)) for seed in seeds]


def _check_same_but_seed(cfgs: Sequence[Config]) -> None:
    """The configs differ in nothing but the seed (at least one, each seed once: ``parse_seeds`` checks those)."""
    lead, *others = cfgs
    first = {**to_dict(lead), "seed": None}
    for cfg in others:
        other = {**to_dict(cfg), "seed": None}
        if other != first:
            keys = sorted(k for k in first if first[k] != other.get(k))
            raise ConfigError(f"a cohort's runs differ only in the seed; seed {cfg.seed} differs in {', '.join(keys)}")


class Cohort:
    """S members built from ``cfgs`` (one config per seed, equal but for the seed), before any run directory
    exists; ``run(run_dirs)`` trains them and returns their summaries. ``progress`` follows the first member."""

    def __init__(self, cfgs: Sequence[Config], device: str | None = None, progress: ProgressSink | None = None):
        _check_same_but_seed(cfgs)
        env = cfgs[0].env  # (the members' env settings are the same)
        envs: list = [None] * len(cfgs)
        if env.backend == "envpool":  # one EnvPool for the seeds, each member its own env in it (preflight: supported)
            envs = make_pooled(resolve_env_id(env.id), [c.seed for c in cfgs], env.max_episode_steps)
        self.members = [
            build_member(cfg, device, progress if i == 0 else None, own)
            for i, (cfg, own) in enumerate(zip(cfgs, envs, strict=True))
        ]
        self.note: str | None = None
        agents = [m.agent for m in self.members]
        lead, *_ = agents  # (one config: the members' engines are the same)
        if lead.engine != "numba" and len(agents) > 1:
            refusal = stacked_refusal(agents)
            if refusal is not None:
                reason = lead.engine_note or "agent.engine is torch"
                self.note = f"the cohort's members update one at a time with the torch engine ({reason}; {refusal})"

    def resume(self, run_dirs: Sequence[Path]) -> None:
        """Load each member's latest checkpoint from its run directory (ConfigError if one cannot continue)."""
        for member, run_dir in zip(self.members, run_dirs, strict=True):
            trainer_state.resume(member, run_dir)

    def steps(self) -> Steps:
        """The loop's phases over the members (the stacked torch update where no note refused it)."""
        return Steps(self.members, stacked=self.note is None)

    def run(self, run_dirs: Sequence[Path]) -> list[dict[str, Any]]:
        """Train every member into its run directory (``run_dirs``: one per member, in order); a member that fails
        is recorded ``failed`` in its own summary while the others go on. Ctrl-C or SIGTERM: every unfinished member
        is recorded ``interrupted`` and RunInterrupted is raised."""
        return run_members(self.members, run_dirs, self.steps())
