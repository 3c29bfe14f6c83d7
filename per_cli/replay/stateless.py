"""The checkpoint-and-logging hooks of a replay part that has nothing to log or save: the defaults that samplers
and writers share (a part with state overrides them)."""

from __future__ import annotations


class Stateless:
    def stats(self) -> dict[str, float]:
        """Scalars worth logging (e.g. ``priority_max``)."""
        return {}

    def state_dict(self) -> dict:
        """What a checkpoint needs beyond the storage and the sampler's ``rng``."""
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass
