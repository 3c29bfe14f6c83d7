"""An env's name as it was run, for titles: the Gymnasium id, and the episode limit where the runs' differs from the
registered one (CartPole-v1 cut at 200 steps is not the literature's)."""

from __future__ import annotations

from collections.abc import Iterable


def registered_spec(env_id: str):  # noqa: ANN201 - gymnasium's EnvSpec, imported late
    """The id's Gymnasium spec (None: unregistered, or an optional env not imported here)."""
    import gymnasium as gym

    try:
        return gym.spec(env_id)
    except Exception:  # noqa: BLE001 - unregistered or optional envs simply have none
        return None


def env_as_run(env_id: str, limits: Iterable[int | None]) -> str:
    """``CartPole-v1 (200-step limit)`` where every run set a limit other than the registered one; ``(step
    limits 200, 500)`` where the runs differ; the bare id where they ran with the registered limit (None: not set)."""
    registered = getattr(registered_spec(env_id), "max_episode_steps", None)
    ran = {registered if limit is None else int(limit) for limit in limits}
    if not ran or ran == {registered}:
        return env_id
    if len(ran) == 1:
        return f"{env_id} ({next(iter(ran))}-step limit)"
    shown = ["no limit" if v is None else f"{v}" for v in sorted(ran, key=lambda v: (v is None, v or 0))]
    return f"{env_id} (step limits {', '.join(shown)})"
