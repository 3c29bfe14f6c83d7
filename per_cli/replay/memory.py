"""A replay memory is a storage plus a sampler, with the one face the training loop uses."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from per_cli.replay.samplers import Sampler
from per_cli.replay.storage import TransitionStorage


@dataclass
class Batch:
    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    next_obs: np.ndarray
    terminated: np.ndarray
    indices: np.ndarray  # transition ids, handed back to update_priorities
    weights: np.ndarray  # importance-sampling weights; ones where not prioritized
    ages: np.ndarray  # transitions added since each sampled one (0 = the latest)


class ReplayMemory:
    def __init__(self, storage: TransitionStorage, sampler: Sampler):
        self.storage = storage
        self.sampler = sampler

    def __len__(self) -> int:
        return self.storage.size

    def add(self, obs, action, reward, next_obs, terminated: bool, truncated: bool) -> None:
        slot = self.storage.add(obs, action, reward, next_obs, terminated, truncated)
        self.sampler.on_add(slot)

    def sample(self, batch_size: int, beta: float = 1.0) -> Batch:
        if batch_size > len(self):
            raise ValueError(f"cannot sample {batch_size} transitions from a memory holding {len(self)}")
        slots, weights = self.sampler.sample(batch_size, beta)
        return self._batch(slots, weights)

    def latest(self) -> Batch:
        """The transition added last, as a batch of one."""
        return self._batch(np.array([self.storage.latest_slot]), np.ones(1, dtype=np.float32))

    def _batch(self, slots: np.ndarray, weights: np.ndarray) -> Batch:
        ids = self.storage.ids[slots]
        return Batch(**self.storage.gather(slots), indices=ids, weights=weights, ages=self.storage.added - 1 - ids)

    def update_priorities(self, indices: np.ndarray, td_errors: np.ndarray) -> None:
        """Give sampled transitions new priorities from their TD errors; ids overwritten since are skipped."""
        td_abs = np.abs(np.asarray(td_errors, dtype=np.float64))
        if not np.all(np.isfinite(td_abs)):
            raise FloatingPointError(
                "non-finite TD error in a priority update: the loss diverged "
                "(lower agent.lr, set agent.max_grad_norm, or use agent.loss=huber)"
            )
        slots, current = self.storage.slots_of(np.asarray(indices))
        if current.any():
            self.sampler.update(slots[current], td_abs[current])

    def stats(self) -> dict[str, float]:
        return self.sampler.stats()

    def state_dict(self) -> dict:
        state = {"storage": self.storage.state_dict(), "rng": self.sampler.rng.bit_generator.state}
        if hasattr(self.sampler, "state_dict"):
            state["sampler"] = self.sampler.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        self.storage.load_state_dict(state["storage"])
        self.sampler.rng.bit_generator.state = state["rng"]
        if "sampler" in state:
            self.sampler.load_state_dict(state["sampler"])
