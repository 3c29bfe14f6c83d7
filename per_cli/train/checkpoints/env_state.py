"""Env snapshots for checkpoints: an env (with its wrappers) pickled so that it continues exactly, and read back
by an unpickler that resolves only an allow-list of exact classes and functions.

Gymnasium envs written in Python (classic control, toy text, the research envs here, MinAtar) pickle exactly;
ALE games are restored from the emulator's own state with its RNG (``clone_state(include_rng=True)``) plus the
env's ``np_random``, so sticky actions and noop starts continue exactly too.

A snapshot is the one pickle a checkpoint holds, so it is the one place a run directory could carry code. It is
read in two passes, neither of which imports or calls anything not on :data:`ALLOWED`: a dry run resolves every
global the blob names to an inert stand-in (:func:`named_globals`), and a blob naming anything else is refused
(:class:`~per_cli.train.checkpoints.safe_read.CheckpointRefused`) before a single object is built; then the real
load resolves the allowed names only. The writer runs the same dry run and keeps no snapshot of an env whose
pickle names anything else (an env from another package, holding sockets, simulators, ...): a resumed run then
starts a new episode, as it does for an env that cannot be pickled at all.
"""

from __future__ import annotations

import io
import pickle
from typing import Any

from per_cli.train.checkpoints.safe_read import CheckpointRefused

_WRAPPERS = "gymnasium.wrappers.common"
_NUMPY_CORE = ("numpy._core.multiarray", "numpy.core.multiarray")  # numpy 2's module, numpy 1's
ALLOWED: frozenset[tuple[str, str]] = frozenset({
    # numpy: arrays, dtypes, scalars and generators, as numpy pickles them
    *((core, name) for core in _NUMPY_CORE for name in ("_reconstruct", "scalar")),
    ("numpy", "ndarray"), ("numpy", "dtype"),
    ("numpy.random._pickle", "__bit_generator_ctor"), ("numpy.random._pickle", "__generator_ctor"),
    ("numpy.random._pickle", "__randomstate_ctor"),
    ("numpy.random._pcg64", "PCG64"), ("numpy.random._mt19937", "MT19937"),
    ("numpy.random.bit_generator", "SeedSequence"), ("numpy.random.bit_generator", "__pyx_unpickle_SeedSequence"),
    ("collections", "deque"),
    # Gymnasium: spaces, the registry's spec, the wrappers gym.make and the Atari pipeline add
    ("gymnasium.envs.registration", "EnvSpec"),
    ("gymnasium.spaces.box", "Box"), ("gymnasium.spaces.discrete", "Discrete"),
    ("gymnasium.spaces.multi_binary", "MultiBinary"), ("gymnasium.spaces.dict", "Dict"),
    (_WRAPPERS, "TimeLimit"), (_WRAPPERS, "OrderEnforcing"), (_WRAPPERS, "PassiveEnvChecker"),
    (_WRAPPERS, "RecordEpisodeStatistics"),
    ("gymnasium.wrappers.atari_preprocessing", "AtariPreprocessing"),
    ("gymnasium.wrappers.stateful_observation", "FrameStackObservation"),
    # Gymnasium's classic control and toy text envs
    ("gymnasium.envs.classic_control.cartpole", "CartPoleEnv"),
    ("gymnasium.envs.classic_control.acrobot", "AcrobotEnv"),
    ("gymnasium.envs.classic_control.mountain_car", "MountainCarEnv"),
    ("gymnasium.envs.toy_text.frozen_lake", "FrozenLakeEnv"), ("gymnasium.envs.toy_text.taxi", "TaxiEnv"),
    ("gymnasium.envs.toy_text.cliffwalking", "CliffWalkingEnv"),
    # MinAtar's games
    ("minatar.gym", "BaseEnv"), ("minatar.environment", "Environment"),
    *(("minatar.environments." + game, "Env") for game in ("asterix", "breakout", "freeway", "seaquest",
                                                            "space_invaders")),
    # ALE (its env pickles its constructor's arguments; the emulator's state travels as ALEState)
    ("ale_py.env", "AtariEnv"), ("ale_py._ale_py", "ALEState"),
    # per_cli's own envs and wrappers
    ("per_cli.envs.bitflip", "BitFlipEnv"),
    ("per_cli.envs.cliffwalk", "BlindCliffwalkEnv"), ("per_cli.envs.cliffwalk", "BlindCliffwalk"),
    ("per_cli.envs.cliffwalk", "CliffwalkTransitions"),
    ("per_cli.envs.atari", "LifeLossTerminal"), ("per_cli.envs.atari", "UnitRewardClip"),
    ("per_cli.envs.atari", "FireOnReset"),
})  # fmt: skip


class _Inert:
    """What the dry run gives for every global: called, built, appended to or set into, it does nothing."""

    def __new__(cls, *args: Any, **kwargs: Any) -> _Inert:
        return object.__new__(cls)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __setstate__(self, state: Any) -> None:
        pass

    def __setitem__(self, key: Any, value: Any) -> None:
        pass

    def append(self, value: Any) -> None:
        pass

    def extend(self, values: Any) -> None:
        pass


class _DryRun(pickle.Unpickler):
    """An unpickler that records the globals a blob names and resolves each to :class:`_Inert`."""

    def __init__(self, file: io.BytesIO):
        super().__init__(file)
        self.names: list[tuple[str, str]] = []

    def find_class(self, module: str, name: str) -> Any:
        self.names.append((module, name))
        return _Inert


class _Restricted(pickle.Unpickler):
    """pickle's Unpickler resolving only :data:`ALLOWED`'s exact (module, qualified name) pairs."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in ALLOWED:
            raise pickle.UnpicklingError(f"{module}.{name} is not on the env snapshot allow-list")
        return super().find_class(module, name)


def named_globals(blob: bytes) -> list[tuple[str, str]]:
    """Every global ``blob`` names, found by a dry run that imports and calls nothing. UnpicklingError (or
    another exception) for a blob that is not a whole pickle."""
    dry = _DryRun(io.BytesIO(blob))
    dry.load()
    return dry.names


def _disallowed(blob: bytes) -> list[str]:
    return sorted({f"{m}.{n}" for m, n in named_globals(blob) if (m, n) not in ALLOWED})


def snapshot_env(env) -> bytes | None:
    """Pickle an env (with its wrappers) so that it continues exactly; None if it cannot be pickled, or its pickle
    names anything outside :data:`ALLOWED` (a resume could not read it)."""
    if env is None:
        return None
    base = env.unwrapped
    extra: dict[str, Any] = {}
    if hasattr(base, "ale") and hasattr(base, "clone_state"):  # ale_py pickles only its constructor arguments
        extra["ale_state"] = base.clone_state(include_rng=True)
        extra["np_random"] = base.np_random.bit_generator.state
    try:
        blob = pickle.dumps((env, extra))
    except Exception:  # noqa: BLE001 - envs holding sockets, simulators, ...: resume starts a new episode
        return None
    return None if _disallowed(blob) else blob


def check_snapshot(blob: bytes) -> None:
    """CheckpointRefused when ``blob`` names a global outside :data:`ALLOWED` (or is not a whole pickle); found by
    the dry run, which builds nothing."""
    try:
        refused = _disallowed(blob)
    except Exception as exc:  # noqa: BLE001 - not a pickle per wrote
        raise CheckpointRefused(f"--resume: an env snapshot in the checkpoint cannot be read ({exc})") from None
    if refused:
        raise CheckpointRefused(
            f"--resume: an env snapshot in the checkpoint names {', '.join(refused[:4])}, which is not on the "
            "allow-list of env classes (the checkpoint was not written by per, or was altered); it was not loaded, "
            "and nothing in it ran"
        )


def restore_env(blob: bytes):
    """The env of a :func:`snapshot_env` blob, in the state it was taken. CheckpointRefused, before anything in
    it is built, when the blob names a global outside :data:`ALLOWED` (:func:`check_snapshot`)."""
    check_snapshot(blob)
    env, extra = _Restricted(io.BytesIO(blob)).load()
    if "ale_state" in extra:
        base = env.unwrapped
        base.restore_state(extra["ale_state"])
        base.np_random.bit_generator.state = extra["np_random"]
    return env
