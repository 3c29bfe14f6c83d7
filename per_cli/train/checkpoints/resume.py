"""What a resumed run may change: how long it trains and how it logs, not what it learns."""

from __future__ import annotations

from per_cli.config import Config, to_dict
from per_cli.errors import ConfigError

# config sections a resumed run may change
RESUMABLE_SECTIONS = ("train", "log", "metrics", "device")
# and keys of other sections: like the device, how the work is launched, not what is learned
RESUMABLE_KEYS = ("agent.cuda_graph",)


def check_resume(saved: dict, step: int, episodes: int, cfg: Config) -> None:
    """ConfigError unless ``cfg`` may continue a checkpoint of config ``saved`` taken after ``step`` steps
    and ``episodes`` episodes: no key outside RESUMABLE_SECTIONS and RESUMABLE_KEYS (env, agent, replay, seed)
    changed, and budget is left."""
    may = f"only {', '.join(RESUMABLE_SECTIONS)} keys and {', '.join(RESUMABLE_KEYS)} may change"
    for section, value in to_dict(cfg).items():
        if section in RESUMABLE_SECTIONS:
            continue
        if isinstance(value, dict):
            for key, v in value.items():
                if saved.get(section, {}).get(key) != v and f"{section}.{key}" not in RESUMABLE_KEYS:
                    raise ConfigError(
                        f"--set {section}.{key}: cannot change it when resuming (the checkpoint was trained with "
                        f"{saved.get(section, {}).get(key)!r}); {may}"
                    )
        elif saved.get(section) != value:
            raise ConfigError(f"{section}: cannot change it when resuming; {may}")
    t = cfg.train
    if step >= t.total_steps:
        raise ConfigError(
            f"train.total_steps: the run already reached step {step}; resume with a larger one, "
            f"e.g. --set train.total_steps={2 * step}"
        )
    if t.total_episodes is not None and episodes >= t.total_episodes:
        raise ConfigError(
            f"train.total_episodes: the run already finished {episodes} episodes; resume with a larger one, "
            f"e.g. --set train.total_episodes={2 * episodes}"
        )
