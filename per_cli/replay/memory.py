"""A replay memory is a storage plus a sampler, with the one face the training loop uses."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from per_cli.replay.gather import FrameGather, RingGather, gather_for
from per_cli.replay.sampler import DRAWN, MemberLists, Sampler, defines, draw_batches, draw_error
from per_cli.replay.storage.ring import ONE, TransitionStorage
from per_cli.replay.storage.rows import Rows, rows_of
from per_cli.replay.store import Store, own_store
from per_cli.replay.writers.base import Writer


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
    episodes: np.ndarray  # int64 episode id of each (episodes that ended before it, in this memory)
    # (not a field) obs and next_obs gathered on the training device as well, where the storage mirrors its
    # frames there (replay.device_frames: storage/device_frames.py); None otherwise
    device_stacks = None


_VIEWS = ("gather", "lists")  # (ReplayMemory's views of its storage and sampler, built on first use)


class ReplayMemory:
    """``storage`` holds transitions, ``sampler`` picks batches, ``writer`` decides what ``add`` stores (each
    transition as it comes by default; hindsight relabelling stores episodes with relabelled copies). Its calls
    of the kind are the cohort's over a member axis of one (``lists``)."""

    def __init__(
        self, storage: TransitionStorage, sampler: Sampler, writer: Writer | None = None, n_step: int = 1,
        gamma: float = 0.99,
    ):  # fmt: skip
        self.storage = storage
        self.sampler = sampler
        self.writer = writer if writer is not None else Writer()
        self.n_step, self.gamma = n_step, gamma  # replay.n_step returns, at gather (storage.nstep)
        self._structured = defines(type(sampler), "add_members")  # (else an add is the storage's alone)

    def __len__(self) -> int:
        """Stored (sampleable or not) transitions; a writer's pending ones are not counted."""
        return self.storage.size

    def add(self, obs, action, reward, next_obs, terminated: bool, truncated: bool) -> None:
        """Give the writer one transition; what it passes on is stored (:meth:`store`), or its error raised."""
        states, next_states = np.asarray(obs)[None], np.asarray(next_obs)[None]
        rows = rows_of(ONE, states, [action], [reward], next_states, [terminated], [truncated])
        errors = self.store(self.writer.add(rows))
        if errors:
            raise next(iter(errors.values()))

    def store(self, rows: Rows) -> Mapping[int, Exception]:
        """Store ``rows`` (``which`` all 0: this member's) by the storage's store over this member alone and tell
        the kind; returns the refused rows' errors (replay/store.py)."""
        stored = self.storer(rows)
        if self._structured and stored.events.which.shape[0]:
            type(self.sampler).add_members(self.lists, *stored.events)
        return stored.errors

    def begin_phase(self, n_batches: int) -> None:
        """The training loop is about to draw ``n_batches`` batches with no add in between (one burst of
        ``train.gradient_steps``); samplers whose batches depend on the phase (``none``, ``combined``) plan it."""
        self.sampler.begin_phase(n_batches)

    def episodes_held(self) -> int:
        """Distinct episodes with at least one sampleable transition in the memory."""
        return self.storage.episodes_held()

    def sample(self, batch_size: int, beta: float = 1.0) -> Batch:
        """The next batch: :meth:`draw`, then the memory's gather (replay/gather.py) over this member alone."""
        if batch_size > len(self):
            raise ValueError(f"cannot sample {batch_size} transitions from a memory holding {len(self)}")
        slots, weights = self.draw(batch_size, beta)
        arrays, device = self.gather(ONE, slots[None], weights[None])
        batch = Batch(*(array[0] for array in arrays))
        if device is not None:
            batch.device_stacks = device[0]
        return batch

    def draw(self, batch_size: int, beta: float) -> tuple[np.ndarray, np.ndarray]:
        """The next batch's (slots, IS weights as float32): the kind's draw over this member alone."""
        slots = np.empty((1, batch_size), dtype=np.int64)
        weights = np.empty((1, batch_size), dtype=np.float32)
        betas = np.array([beta], dtype=np.float64)
        status = draw_batches(type(self.sampler), self.lists, ONE, betas, slots, weights, self.sampler.chunk).item()
        if status != DRAWN:
            raise draw_error(self.sampler, int(status), batch_size)
        return slots[0], weights[0]

    @cached_property
    def lists(self) -> MemberLists:
        """The kind's lists of this member alone (built on first use)."""
        return MemberLists.of([self.sampler])

    @cached_property
    def gather(self) -> RingGather | FrameGather:
        """How this memory's drawn slots become a batch (chosen once, on first use, by its storage's class)."""
        return gather_for([self.storage], self.n_step, self.gamma)

    @property
    def storer(self) -> Store:
        """How rows reach this memory's storage: the storage's own store (chosen once, on first use, by its class)."""
        return own_store(self.storage)

    def adopted(self) -> None:
        """Its storage's or its sampler's arrays moved into a cohort's blocks
        (:func:`~per_cli.replay.storage.ring.member_axis`): its views of the old ones are rebuilt (on first use)."""
        for name in _VIEWS:
            self.__dict__.pop(name, None)
        self.storage.adopted()

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in _VIEWS}  # (views and typed lists: rebuilt)

    def update_priorities(self, indices: np.ndarray, td_errors: np.ndarray) -> None:
        """Give sampled transitions new priorities from their TD errors; ids overwritten since are skipped
        (the kind's ``update_members`` over this member alone)."""
        ids = np.ascontiguousarray(indices, dtype=np.int64).reshape(1, -1)
        td_errors = np.ascontiguousarray(td_errors).reshape(1, -1)
        if not type(self.sampler).update_members(self.lists, ONE, ids, td_errors).item():
            raise FloatingPointError(
                "non-finite TD error in a priority update: the loss diverged "
                "(lower agent.lr, set agent.max_grad_norm, or use agent.loss=huber)"
            )

    def stats(self) -> dict[str, float]:
        return {**self.sampler.stats(), **self.writer.stats()}

    def state_dict(self) -> dict:
        return {
            "storage": self.storage.state_dict(),
            "rng": self.sampler.rng.bit_generator.state,
            "sampler": self.sampler.state_dict(),
            "writer": self.writer.state_dict(),
        }

    def load_state_dict(self, state: dict) -> None:
        self.storage.load_state_dict(state["storage"])
        self.sampler.rng.bit_generator.state = state["rng"]
        self.sampler.load_state_dict(state["sampler"])
        self.writer.load_state_dict(state["writer"])
