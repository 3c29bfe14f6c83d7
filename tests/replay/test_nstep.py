"""n-step returns (``replay.n_step``) against a brute-force sum over the recorded episodes: on the plain ring
(across its wrap-around), the Atari frame storage and the packed MinAtar storage, episodes shorter than n
included, a termination stopping the sum and the bootstrap, a truncation stopping the sum and bootstrapping with
γ^k, the newest transitions looking ahead only as far as what is stored; solo and in a cohort alike."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from per_cli.config import load_config
from per_cli.errors import ConfigError
from per_cli.replay import ReplayMemory
from per_cli.replay.cohort import CohortSampling
from per_cli.replay.samplers import UniformSampler
from per_cli.replay.storage.frames import FrameStackStorage
from per_cli.replay.storage.packed import PackedTransitionStorage
from per_cli.replay.storage.ring import TransitionStorage

from .test_frames import SIZE, fill

GAMMA, N = 0.9, 4


def _episodes(memory, steps: int, seed: int, state) -> dict[int, tuple]:
    """Episodes of 1-9 steps (some cut by a time limit) into ``memory``; {id: (next_obs, reward, terminated,
    truncated)} as the env gave them."""
    rng, given = np.random.default_rng(seed), {}
    obs, length = state(rng), 0
    for _ in range(steps):
        next_obs, reward = state(rng), float(rng.normal())
        length += 1
        terminated = bool(rng.random() < 0.15)
        truncated = not terminated and length >= int(rng.integers(1, 10))
        memory.add(obs, int(rng.integers(2)), reward, next_obs, terminated, truncated)
        given[memory.storage.added - 1] = (next_obs, np.float32(reward), terminated, truncated)
        obs = state(rng) if terminated or truncated else next_obs
        length = 0 if terminated or truncated else length
    return given


def _brute(given: dict, t: int, newest: int) -> tuple[float, int, float]:
    """(R, last id, the engines' ``terminated``) of id t's n-step return, summed by hand."""
    total, last = 0.0, t
    for m in range(N):
        if t + m > newest:
            break
        last = t + m
        _, reward, terminated, truncated = given[last]
        total += GAMMA**m * float(reward)
        if terminated or truncated:
            break
    k, terminated = last - t + 1, given[last][2]
    return total, last, 1.0 - GAMMA ** (k - 1) * (1.0 - float(terminated))


def _check(batch, given, newest, next_state=lambda g: g[0]):
    for j, t in enumerate(batch.indices.tolist()):
        total, last, terminated = _brute(given, t, newest)
        assert batch.rewards[j] == pytest.approx(total, rel=1e-6, abs=1e-6)
        assert batch.terminated[j] == pytest.approx(terminated, abs=1e-6)
        np.testing.assert_array_equal(batch.next_obs[j], next_state(given[last]))
        # the one-step target the engines compute is the n-step one: r + γ(1 - term) V = R + γ^k (1 - term_K) V
        k = last - t + 1
        assert GAMMA * (1 - batch.terminated[j]) == pytest.approx(GAMMA**k * (1 - float(given[last][2])), abs=1e-6)


def test_nstep_returns_on_a_ring_that_wrapped_and_in_a_cohort():
    memories = []
    for seed in (1, 2):
        storage = TransitionStorage(50, (3,), np.float32)
        memories.append(ReplayMemory(storage, UniformSampler(storage, np.random.default_rng(seed)), n_step=N,
                                     gamma=GAMMA))  # fmt: skip
    givens = [_episodes(m, 137 + 20 * k, seed=k, state=lambda r: r.normal(size=3).astype(np.float32))
              for k, m in enumerate(memories)]  # fmt: skip
    alone = copy.deepcopy(memories)
    sampling = CohortSampling(memories)
    for _ in range(20):
        drawn = sampling.sample([1, 0], 32, [1.0, 1.0])
        for k, batch in zip([1, 0], drawn, strict=True):
            _check(batch, givens[k], memories[k].storage.added - 1)
            own = alone[k].sample(32, 1.0)
            assert (
                own.rewards.tobytes() == batch.rewards.tobytes() and own.next_obs.tobytes() == batch.next_obs.tobytes()
            )
    shorts = [t for t in givens[0] if givens[0][t][2] or givens[0][t][3]]
    assert len(shorts) > 10  # (episodes ended inside the look-ahead often)


def test_nstep_returns_on_packed_states():
    storage = PackedTransitionStorage(40, (3, 3, 2))
    memory = ReplayMemory(storage, UniformSampler(storage, np.random.default_rng(3)), n_step=N, gamma=GAMMA)
    given = _episodes(memory, 90, seed=5, state=lambda r: r.random((3, 3, 2)) < 0.5)
    for _ in range(20):
        _check(memory.sample(16, 1.0), given, storage.added - 1)


def test_nstep_returns_on_atari_frame_storage():
    """The frame storage keeps next states as the frame after each transition's; an n-step target's next state
    is that of the look-ahead's last transition, rebuilt from its frames."""
    storage = FrameStackStorage(64, (4, SIZE, SIZE), extra_frames=40, check_memory=False)
    memory = ReplayMemory(storage, UniformSampler(storage, np.random.default_rng(4)), n_step=N, gamma=GAMMA)
    stacks = fill(memory, 300, max_len=5)
    given = {
        t: (stacks[t][1], storage.rewards[t % 64], bool(storage.terminated[t % 64]), bool(storage.truncated[t % 64]))
        for t in range(storage.added - storage.size, storage.added)
    }  # (what the storage holds of each id: the stored one-step transitions)
    for _ in range(30):
        batch = memory.sample(16, 1.0)
        _check(batch, given, storage.added - 1)


def test_one_step_is_the_stored_transition_and_hindsight_is_refused():
    storage = TransitionStorage(30, (2,), np.float32)
    plain = ReplayMemory(storage, UniformSampler(storage, np.random.default_rng(0)))
    _episodes(plain, 45, seed=1, state=lambda r: r.normal(size=2).astype(np.float32))
    one = copy.deepcopy(plain)
    one.n_step = 1
    a, b = plain.sample(8, 1.0), one.sample(8, 1.0)
    assert a.rewards.tobytes() == b.rewards.tobytes() and a.terminated.tobytes() == b.terminated.tobytes()
    with pytest.raises(ConfigError, match="replay.n_step: hindsight relabelling"):
        load_config(None, ["replay.n_step=3", "replay.her_strategy=future"])
    assert load_config(None, ["replay.n_step=3"]).replay.n_step == 3
