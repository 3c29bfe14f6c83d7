"""Checkpoints: everything a run needs to continue with ``per train --resume RUN_DIR``.

Layout inside the run directory::

    checkpoints/
      latest                  the name of the newest complete checkpoint (written last, atomically)
      step_000000500000/
        trainer.pt            torch.save of the state below
        replay/               only with train.save_replay: one .npy per large array + replay.pkl

A checkpoint is written into ``.tmp-...``, renamed, and only then named in ``latest``; older ones are
deleted afterwards. A crash at any moment leaves ``latest`` pointing at a complete checkpoint.

What is saved (``trainer_state``) and how exactly a resumed run continues:

* network, target network, optimizer (whatever ``DQNAgent.state_dict`` returns) and the update counter;
* the step (which is also the position of the ε and β schedules), episode counter, the running return
  and length of the episode in progress, the window of recent returns, the last evaluation;
* RNG states: the action-selection generator, the replay sampler's generator, torch's CPU (and CUDA) RNG;
* the training env and the evaluation env, pickled with the observation in hand. Gymnasium envs written
  in Python (classic control, the research envs here) pickle exactly; ALE games are restored from the
  emulator's own state with its RNG (``clone_state(include_rng=True)``) plus the env's ``np_random``, so
  sticky actions and noop starts continue exactly too. An env that cannot be pickled starts a new episode
  on resume (the episode in progress is dropped from the logs); the run goes on, but not bit-for-bit;
* the per-update metrics not yet logged, and the wall time so far (``wall_time`` keeps counting);
* the replay memory (storage + sampler state) only with ``train.save_replay: true``; without it the
  resumed run refills the memory for ``train.learning_starts`` steps before it learns again.

With the replay memory saved, a resumed run on the CPU repeats the uninterrupted run exactly (same
``metrics.csv`` apart from wall-clock columns, same TensorBoard scalars apart from ``charts/SPS``).
Raising ``train.total_steps`` on resume continues past the old end, but the ε and β schedules are
defined over ``total_steps`` and so change from that point on.
"""

from __future__ import annotations

import csv
import os
import pickle
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from per_cli.config import ConfigError, to_dict
from per_cli.train.logger import atomic_write_text

if TYPE_CHECKING:  # pragma: no cover
    from per_cli.train.trainer import Trainer

CHECKPOINT_DIR = "checkpoints"
FORMAT_VERSION = 1
_LARGE_ARRAY_BYTES = 1 << 20  # replay arrays above this go to their own .npy (written and read without copies)


# ----------------------------------------------------------------------------------------------------------
# envs


def snapshot_env(env) -> bytes | None:
    """Pickle an env (with its wrappers) so that it continues exactly; None if it cannot be pickled."""
    if env is None:
        return None
    base = env.unwrapped
    extra: dict[str, Any] = {}
    if hasattr(base, "ale") and hasattr(base, "clone_state"):  # ale_py pickles only its constructor arguments
        extra["ale_state"] = base.clone_state(include_rng=True)
        extra["np_random"] = base.np_random.bit_generator.state
    try:
        return pickle.dumps((env, extra))
    except Exception:  # noqa: BLE001 - envs holding sockets, simulators, ...: resume starts a new episode
        return None


def restore_env(blob: bytes):
    env, extra = pickle.loads(blob)
    if "ale_state" in extra:
        base = env.unwrapped
        base.restore_state(extra["ale_state"])
        base.np_random.bit_generator.state = extra["np_random"]
    return env


# ----------------------------------------------------------------------------------------------------------
# large array trees (the replay memory)


class _NpyRef:
    def __init__(self, name: str):
        self.name = name


def _save_tree(tree: Any, folder: Path) -> None:
    folder.mkdir(parents=True)
    counter = iter(range(1 << 62))

    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items()}
        if isinstance(node, np.ndarray) and node.nbytes >= _LARGE_ARRAY_BYTES:
            name = f"a{next(counter)}.npy"
            np.save(folder / name, node, allow_pickle=False)
            return _NpyRef(name)
        return node

    skeleton = strip(tree)
    with open(folder / "replay.pkl", "wb") as f:
        pickle.dump(skeleton, f)


def _load_tree(folder: Path) -> Any:
    with open(folder / "replay.pkl", "rb") as f:
        skeleton = pickle.load(f)

    def fill(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: fill(v) for k, v in node.items()}
        if isinstance(node, _NpyRef):  # memory-mapped: copied straight into the preallocated memory
            return np.load(folder / node.name, mmap_mode="r")
        return node

    return fill(skeleton)


# ----------------------------------------------------------------------------------------------------------
# the checkpoint directory


def checkpoints_dir(run_dir: Path) -> Path:
    return run_dir / CHECKPOINT_DIR


def latest_checkpoint(run_dir: Path) -> Path | None:
    pointer = checkpoints_dir(run_dir) / "latest"
    try:
        name = pointer.read_text().strip()
    except FileNotFoundError:
        return None
    path = checkpoints_dir(run_dir) / name
    return path if (path / "trainer.pt").is_file() else None


def _fsync_tree(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            with open(path, "rb") as f:
                os.fsync(f.fileno())


def save_checkpoint(run_dir: Path, step: int, state: dict, replay_state: dict | None) -> Path:
    """Write a complete checkpoint, point ``latest`` at it, then delete the older ones."""
    root = checkpoints_dir(run_dir)
    root.mkdir(parents=True, exist_ok=True)
    name = f"step_{step:012d}"
    tmp = root / f".tmp-{name}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    torch.save(state, tmp / "trainer.pt")
    if replay_state is not None:
        _save_tree(replay_state, tmp / "replay")
    _fsync_tree(tmp)
    final = root / name
    if final.exists():  # the same step saved again (the end of a run that also checkpointed there)
        shutil.rmtree(final)
    os.replace(tmp, final)
    atomic_write_text(root / "latest", name + "\n")
    for old in root.iterdir():
        if old.is_dir() and old.name != name:
            shutil.rmtree(old, ignore_errors=True)
    return final


# ----------------------------------------------------------------------------------------------------------
# capture and restore a trainer


def trainer_state(trainer: Trainer, obs: Any) -> dict:
    s = trainer.state
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    return {
        "format": FORMAT_VERSION,
        "step": s.step,
        "config": to_dict(trainer.cfg),
        "loop": {
            "episode": s.episode,
            "episode_return": s.episode_return,
            "episode_length": s.episode_length,
            "recent_returns": list(s.recent_returns),
            "eval_return_mean": s.eval_return_mean,
            "eval_return_std": s.eval_return_std,
            "success_rate": s.success_rate,
        },
        "obs": obs,
        "agent": trainer.agent.state_dict(),
        "rng": {
            "action": trainer.action_rng.bit_generator.state,
            "sampler": trainer.memory.sampler.rng.bit_generator.state,
            "torch": torch.get_rng_state(),
            "cuda": cuda,
        },
        "env": snapshot_env(trainer.env),
        "eval_env": snapshot_env(trainer._eval_env),
        "metrics": pickle.dumps((trainer._window, trainer._log_means, trainer._episode_means)),
        "elapsed_s": time.time() - trainer._start_time,
        "replay_saved": bool(trainer.cfg.train.save_replay),
    }


def save_trainer(trainer: Trainer, run_dir: Path, obs: Any) -> Path:
    replay = trainer.memory.state_dict() if trainer.cfg.train.save_replay else None
    return save_checkpoint(run_dir, trainer.state.step, trainer_state(trainer, obs), replay)


# config sections a resumed run may change: how long and how it logs, not what it learns
RESUMABLE_SECTIONS = ("train", "log", "metrics", "device")


def check_resume_overrides(saved: dict, new: dict) -> None:
    """ConfigError for a change of a key outside RESUMABLE_SECTIONS (env, agent, replay, seed)."""
    for section, value in new.items():
        if section in RESUMABLE_SECTIONS:
            continue
        if isinstance(value, dict):
            for key, v in value.items():
                if saved.get(section, {}).get(key) != v:
                    raise ConfigError(
                        f"--set {section}.{key}: cannot change it when resuming (the checkpoint was trained with "
                        f"{saved.get(section, {}).get(key)!r}); only {', '.join(RESUMABLE_SECTIONS)} keys may change"
                    )
        elif saved.get(section) != value:
            raise ConfigError(f"{section}: cannot change it when resuming; only {', '.join(RESUMABLE_SECTIONS)} may")


def restore_trainer(trainer: Trainer, run_dir: Path) -> int:
    """Load the latest checkpoint of ``run_dir`` into a freshly built trainer; returns its step."""
    path = latest_checkpoint(run_dir)
    if path is None:
        raise ConfigError(
            f"--resume: {run_dir} has no checkpoint (runs write one every train.checkpoint_every steps; "
            "that key was 0 for this run)"
        )
    try:
        state = torch.load(path / "trainer.pt", map_location=trainer.device, weights_only=False)
    except Exception as exc:  # noqa: BLE001 - a damaged file is bad input, not a crash
        raise ConfigError(f"--resume: cannot read {path / 'trainer.pt'}: {type(exc).__name__}: {exc}") from None
    if state.get("format") != FORMAT_VERSION:
        raise ConfigError(f"--resume: {path} has checkpoint format {state.get('format')}, expected {FORMAT_VERSION}")
    check_resume_overrides(state["config"], to_dict(trainer.cfg))
    step = int(state["step"])
    if step >= trainer.cfg.train.total_steps:
        raise ConfigError(
            f"train.total_steps: the run already reached step {step}; resume with a larger one, "
            f"e.g. --set train.total_steps={2 * step}"
        )

    trainer.agent.load_state_dict(state["agent"])
    s, loop = trainer.state, state["loop"]
    s.step = step
    s.episode = loop["episode"]
    s.episode_return, s.episode_length = loop["episode_return"], loop["episode_length"]
    s.recent_returns.clear()
    s.recent_returns.extend(loop["recent_returns"])
    s.eval_return_mean, s.eval_return_std = loop["eval_return_mean"], loop["eval_return_std"]
    s.success_rate = loop["success_rate"]

    rng = state["rng"]
    trainer.action_rng.bit_generator.state = rng["action"]
    trainer.memory.sampler.rng.bit_generator.state = rng["sampler"]
    torch.set_rng_state(rng["torch"].cpu())
    if rng["cuda"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([t.cpu() for t in rng["cuda"]])

    if state["env"] is not None:
        trainer.env.close()
        trainer.env = restore_env(state["env"])
        trainer._resume_obs = state["obs"]
    else:  # the episode in progress is lost: start a new one, seeded by the step
        s.episode_return, s.episode_length = 0.0, 0
        trainer._resume_obs, _ = trainer.env.reset(seed=trainer.cfg.seed + step)
    if state["eval_env"] is not None:
        trainer._eval_env = restore_env(state["eval_env"])

    trainer._window, trainer._log_means, trainer._episode_means = pickle.loads(state["metrics"])
    trainer._elapsed_before = float(state["elapsed_s"])

    replay_dir = path / "replay"
    if state["replay_saved"] and replay_dir.is_dir():
        trainer.memory.load_state_dict(_load_tree(replay_dir))
    else:  # an empty memory: collect learning_starts transitions again before learning
        trainer._min_fill = min(
            max(trainer.cfg.train.learning_starts, trainer.cfg.replay.batch_size), trainer.cfg.replay.capacity
        )
    trainer._resumed_from = step
    return step


def truncate_metrics(run_dir: Path, step: int) -> None:
    """Drop ``metrics.csv`` rows logged after the checkpoint (a crashed run wrote them; they come again)."""
    path = run_dir / "metrics.csv"
    if not path.exists():
        return
    with open(path, newline="") as f:
        reader = csv.reader(f)
        rows = list(reader)
    if not rows:
        return
    header, body = rows[0], rows[1:]
    col = header.index("step") if "step" in header else None
    if col is None:
        return
    kept = [r for r in body if r and int(float(r[col])) <= step]
    if len(kept) == len(body):
        return
    import io

    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(header)
    writer.writerows(kept)
    atomic_write_text(path, out.getvalue())
