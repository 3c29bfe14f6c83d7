"""The frame storages' store over the members (:class:`FrameStore`, one compiled call) stores every member's rows
byte for byte as each member's own rows stored one at a time, the old ``add`` semantics kept here as the oracle
(:func:`old_add`), with the kind's events in the order ``ReplayMemory._store`` made them: padding at an episode's
start, episodes continuing, terminals and truncations, the ring's wrap-around making transitions unsampleable,
refused rows beside good ones, one member twice in a call; and the cohort's gather sees its writes."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from per_cli.replay.gather import FrameGather
from per_cli.replay.storage.frame_store import FrameStore
from per_cli.replay.storage.frames import FrameStackStorage
from per_cli.replay.storage.rows import Rows, rows_of
from per_cli.replay.store import add_transition
from tests.replay.test_frames import SIZE, CounterEnv

_SHIFTED = "FrameStackStorage needs next_obs to be obs shifted by one frame (a frame stack)"


def old_add(st: FrameStackStorage, obs, action, reward, next_obs, terminated, truncated, ends=None):
    """The Python ``add`` this store replaced, step for step (the action now checked before anything is written):
    returns (slot, entering, the slots it made unsampleable), the events ``ReplayMemory._store`` passed on."""
    obs, next_obs = np.asarray(obs), np.asarray(next_obs)
    if obs.shape != st.obs_shape or next_obs.shape != st.obs_shape:
        raise ValueError(f"expected observations of shape {st.obs_shape}, got {obs.shape} and {next_obs.shape}")
    s = st.stack
    if not np.array_equal(next_obs[:-1], obs[1:]):
        raise ValueError(_SHIFTED)
    if not 0 <= action < 256:
        raise ValueError(f"FrameStackStorage keeps actions as uint8 (Atari has <= 18), got {action}")

    def write(frame):
        st.frames[st.frames_written % st.n_frames] = frame
        st.frames_written += 1

    if st._episode_open and np.array_equal(obs, st._last_next):
        hist = min(int(st.hist[(st.cursor - 1) % st.capacity]) + 1, s - 1)
    else:
        pad = 0
        while pad < s - 1 and not obs[pad].any():
            pad += 1
        for frame in obs[pad:]:
            write(frame)
        hist = s - 1 - pad
    slot = st.cursor
    st.frame_gid[slot] = st.frames_written - 1
    st.hist[slot] = hist
    write(next_obs[-1])
    st.actions[slot], st.rewards[slot], st.terminated[slot], st.truncated[slot] = action, reward, terminated, truncated
    st.ids[slot], st.episode_ids[slot] = st.added, st.episodes_ended
    st.episodes_ended += bool(terminated or truncated) if ends is None else bool(ends)
    st.added += 1
    st.cursor = (slot + 1) % st.capacity
    st.size = min(st.size + 1, st.capacity)
    st._episode_open = not (terminated or truncated)
    st._last_next[...] = next_obs
    oldest_kept = st.frames_written - st.n_frames
    start = first = max(st.first_sampleable_id, st.added - st.size)
    while first < st.added and st.frame_gid[first % st.capacity] - int(st.hist[first % st.capacity]) < oldest_kept:
        first += 1
    st.first_sampleable_id = first
    return slot, bool(st.sampleable(np.array([slot]))[0]), np.arange(start, first, dtype=np.int64) % st.capacity


def storage(capacity=7, stack=4, extra=5) -> FrameStackStorage:
    return FrameStackStorage(capacity, (stack, SIZE, SIZE), extra_frames=extra, check_memory=False)


def transitions(seed: int, steps: int, stack: int, max_len: int = 5) -> list[tuple]:
    """A member's stream of (obs, action, reward, next_obs, terminated, truncated) from the stacked CounterEnv."""
    env = gym.wrappers.FrameStackObservation(CounterEnv(max_len, seed), stack, padding_type="zero")
    obs, _ = env.reset()
    out = []
    for i in range(steps):
        nxt, reward, terminated, truncated, _ = env.step(i % 3)
        out.append((np.array(obs), i % 3, reward, np.array(nxt), terminated, truncated))
        obs = nxt
        if terminated or truncated:
            obs, _ = env.reset()
    return out


def rows(which: list[int], picked: list[tuple]) -> Rows:
    """Rows of these transitions (a 7th entry: ``ends``, else terminated or truncated)."""
    columns = list(zip(*picked, strict=True))
    ends = columns[6] if len(columns) > 6 else None
    return rows_of(which, np.stack(columns[0]), *columns[1:3], np.stack(columns[3]), *columns[4:6], ends)


def assert_same_state(a: FrameStackStorage, b: FrameStackStorage) -> None:
    """Every column and counter of two storages equal, byte for byte."""
    sa, sb = a.state_dict(), b.state_dict()
    for key, value in sa.items():
        assert type(value) is type(sb[key]), key
        np.testing.assert_array_equal(value, sb[key], err_msg=key)
    np.testing.assert_array_equal(a.counters, b.counters)
    np.testing.assert_array_equal(a.frame_counters, b.frame_counters)


def expected_events(olds: list[FrameStackStorage], which: list[int], picked: list[tuple]) -> list[tuple]:
    """The events of these rows stored one at a time by :func:`old_add`, as (member, slot, entering)."""
    out = []
    for i, row in zip(which, picked, strict=True):
        slot, entering, dropped = old_add(olds[i], *row)
        out += [(i, slot, entering)] + [(i, int(d), False) for d in dropped]
    return out


def as_list(events) -> list[tuple]:
    return list(zip(events.which.tolist(), events.slots.tolist(), events.entering.tolist(), strict=True))


@pytest.mark.parametrize("stack", [1, 2, 4])
@pytest.mark.parametrize(("capacity", "extra"), [(7, 5), (16, None), (5, 0)])
def test_one_call_over_members_equals_each_member_alone(stack, capacity, extra):
    members = 3
    streams = [transitions(seed, 60, stack) for seed in range(members)]
    cohort = [storage(capacity, stack, extra) for _ in range(members)]
    solos = [storage(capacity, stack, extra) for _ in range(members)]
    olds = [storage(capacity, stack, extra) for _ in range(members)]
    store = FrameStore(cohort)
    solo_stores = [FrameStore([s]) for s in solos]
    rng = np.random.default_rng(stack * 100 + capacity)
    nexts, dropped = [0] * members, 0
    while any(n < 60 for n in nexts):
        which, picked = [], []
        for _ in range(int(rng.integers(1, 7))):  # (a member may come several times in one call)
            i = int(rng.integers(members))
            if nexts[i] < 60:
                which.append(i)
                row = streams[i][nexts[i]]
                picked.append((*row, bool(row[4] or row[5] or rng.random() < 0.1)))  # (a writer's ends, at times)
                nexts[i] += 1
        if not which:
            continue
        stored = store(rows(which, picked))
        assert not stored.errors
        expected = expected_events(olds, which, picked)
        assert as_list(stored.events) == expected
        alone = []
        for i, row in zip(which, picked, strict=True):
            events = solo_stores[i](rows([0], [row])).events
            alone += [(i, s, e) for s, e in zip(events.slots.tolist(), events.entering.tolist(), strict=True)]
        assert alone == expected
        dropped += sum(not e for _, _, e in expected)
        for a, b, c in zip(cohort, solos, olds, strict=True):
            assert_same_state(a, c)
            assert_same_state(b, c)
    assert cohort[0].added == 60 and cohort[0].size == capacity  # wrapped around
    assert dropped > 0 or extra != 0  # (no extra frames: the ring's wrap-around made transitions unsampleable)


def test_a_new_episode_continuing_ending_and_truncated_by_hand():
    st = storage(capacity=10, stack=4, extra=20)
    store = FrameStore([st])
    f = [np.full((SIZE, SIZE), v, np.uint8) for v in range(1, 9)]
    z = np.zeros((SIZE, SIZE), np.uint8)

    def put(obs, nxt, terminated=False, truncated=False):
        return store(rows_of([0], np.stack(obs)[None], [1], [0.5], np.stack(nxt)[None], [terminated], [truncated]))

    put([z, z, f[0], f[1]], [z, f[0], f[1], f[2]])  # a new episode: its 2 padding frames not written
    assert st.frames_written == 3 and st.hist[0] == 1 and st.frame_gid[0] == 1
    np.testing.assert_array_equal(st.frames[:3], np.stack(f[:3]))
    put([z, f[0], f[1], f[2]], [f[0], f[1], f[2], f[3]], terminated=True)  # continues: one frame
    assert st.frames_written == 4 and st.hist[1] == 2 and st.frame_gid[1] == 2 and st._episode_open is False
    events = put([z, f[0], f[1], f[2]], [f[0], f[1], f[2], f[3]]).events  # after a terminal: a new episode again
    assert st.frames_written == 8 and st.hist[2] == 2 and st.frame_gid[2] == 6 and st.episode_ids[2] == 1
    assert as_list(events) == [(0, 2, True)]
    put([f[0], f[1], f[2], f[3]], [f[1], f[2], f[3], f[4]], truncated=True)  # truncated: ends its episode too
    assert st.hist[3] == 3 and st.frames_written == 9 and st.truncated[3] and st.episodes_ended == 2
    np.testing.assert_array_equal(st.gather(np.array([2]))["next_obs"][0], np.stack(f[:4]))


def test_the_ring_wrapping_makes_the_oldest_unsampleable_by_hand():
    st = storage(capacity=4, stack=2, extra=0)  # 4 + 3 frames: a new episode writes 3
    store = FrameStore([st])
    f = [np.full((SIZE, SIZE), v, np.uint8) for v in range(1, 30)]
    got = []
    for t in range(4):  # one-step episodes with no padding: 3 frames each
        a, b, c = f[3 * t : 3 * t + 3]
        got.append(as_list(store(rows_of([0], np.stack([a, b])[None], [0], [0.0], np.stack([b, c])[None], [True],
                                          [False])).events))  # fmt: skip
    # t = 2 writes gids 6-8 over 0-1: transition 0 (gids 0-2) goes; t = 3 writes 9-11 over 2-4: transition 1 goes
    assert got == [[(0, 0, True)], [(0, 1, True)], [(0, 2, True), (0, 0, False)], [(0, 3, True), (0, 1, False)]]
    assert st.first_sampleable_id == 2 and st.sampleable(np.arange(4)).tolist() == [False, False, True, True]


def test_refused_rows_write_nothing_and_the_others_are_stored():
    stack = 4
    stream = [transitions(seed, 12, stack) for seed in range(2)]
    cohort, olds = [storage() for _ in range(2)], [storage() for _ in range(2)]
    store = FrameStore(cohort)
    good = stream[0][0]
    not_shifted = (good[0], 1, 0.0, good[0] + 1, False, False)
    wide = (good[0], 300, 0.0, good[3], False, False)
    negative = (good[0], -1, 0.0, good[3], False, False)
    which = [0, 1, 0, 1, 0, 1]
    picked = [stream[0][0], not_shifted, stream[0][1], stream[1][0], wide, negative]
    stored = store(rows(which, picked))
    errors = {}
    for k, (i, row) in enumerate(zip(which, picked, strict=True)):
        try:
            expected_events(olds, [i], [row])
        except ValueError as exc:
            errors[k] = exc
    assert sorted(stored.errors) == sorted(errors) == [1, 4, 5]
    for k, exc in errors.items():
        assert type(stored.errors[k]) is type(exc) and str(stored.errors[k]) == str(exc)
    assert str(stored.errors[1]) == _SHIFTED and str(stored.errors[4]).endswith("got 300")
    assert stored.events.which.tolist() == [0, 0, 1]
    for a, b in zip(cohort, olds, strict=True):
        assert_same_state(a, b)


def test_observations_of_another_shape_refuse_every_row():
    st = storage()
    store = FrameStore([st])
    obs = np.zeros((2, 3, SIZE, SIZE), np.uint8)
    stored = store(rows_of([0, 0], obs, [0, 0], [0.0, 0.0], obs, [False, False], [False, False]))
    assert sorted(stored.errors) == [0, 1] and stored.events.slots.size == 0 and st.added == 0
    with pytest.raises(ValueError, match=r"expected observations of shape \(4, 6, 6\), got \(3, 6, 6\)"):
        add_transition(st, obs[0], 0, 0.0, obs[0], False, False)


@pytest.mark.parametrize("store_first", [True, False])
def test_a_store_and_a_gather_over_the_same_storages_share_their_blocks(store_first):
    stack, members = 4, 3
    streams = [transitions(seed, 30, stack) for seed in range(members)]
    cohort = [storage(9, stack, 5) for _ in range(members)]
    for i in range(members):  # (rows before either is built: the blocks take what was written)
        for row in streams[i][:4]:
            add_transition(cohort[i], *row)
    solos = [storage(9, stack, 5) for _ in range(members)]
    for i in range(members):
        for row in streams[i][:4]:
            add_transition(solos[i], *row)
    if store_first:
        store = FrameStore(cohort)
        gather = FrameGather(cohort, 1, 0.99)
    else:
        gather = FrameGather(cohort, 1, 0.99)
        store = FrameStore(cohort)
    assert np.shares_memory(store.columns.frames, gather.columns.frames)
    assert np.shares_memory(store.columns.counters, gather.columns.counters)
    for t in range(4, 30):
        which = [t % members, (t + 1) % members]
        if t % 2:
            store(rows(which, [streams[i][t] for i in which]))
            for i in which:
                add_transition(solos[i], *streams[i][t])
        else:  # (a member's own add writes the same blocks)
            for i in which:
                add_transition(cohort[i], *streams[i][t])
                add_transition(solos[i], *streams[i][t])
        slots = np.array([[s.latest_slot, (s.latest_slot - 1) % s.capacity] for s in cohort])
        batch = gather(np.arange(members), slots, np.ones(slots.shape, np.float32)).arrays
        for i in range(members):
            expected = solos[i].gather(slots[i])
            np.testing.assert_array_equal(batch.obs[i], expected["obs"])
            np.testing.assert_array_equal(batch.next_obs[i], expected["next_obs"])
            np.testing.assert_array_equal(batch.actions[i], expected["actions"])
    for a, b in zip(cohort, solos, strict=True):
        assert_same_state(a, b)


def test_the_device_mirrors_get_the_frames_one_call_wrote():
    stack, members = 2, 3
    streams = [transitions(seed, 40, stack, max_len=3) for seed in range(members)]
    cohort = [storage(6, stack, 3) for _ in range(members)]
    for s in cohort[:2]:  # (the third keeps no mirror)
        s.mirror_to("cpu")
    store = FrameStore(cohort)
    for t in range(0, 40, 2):  # two rows of each member a call: the ring wraps around within calls
        which = [0, 1, 2, 0, 1, 2]
        store(rows(which, [streams[i][t + (k >= 3)] for k, i in enumerate(which)]))
        for s in cohort[:2]:
            np.testing.assert_array_equal(s.mirror.frames.numpy(), s.frames)
    assert cohort[2].mirror is None and cohort[0].frames_written > cohort[0].n_frames


def test_a_checkpoint_keeps_its_format_and_loads_into_the_store():
    stack = 4
    stream = transitions(0, 30, stack)
    a, b = storage(9, stack, 5), storage(9, stack, 5)
    for row in stream[:17]:
        add_transition(a, *row)
    state = a.state_dict()  # (the keys and scalar types the Python add's checkpoints had)
    assert type(state["frames_written"]) is int and type(state["_episode_open"]) is bool
    b.load_state_dict(state)
    store = FrameStore([b])
    for row in stream[17:]:
        add_transition(a, *row)
        store(rows([0], [row]))
    assert_same_state(a, b)


@pytest.mark.parametrize(("dtype", "size"), [(np.uint8, 5), (np.float32, SIZE), (np.uint16, 3)])
def test_frames_of_any_width_and_dtype_are_stored_as_the_old_add_did(dtype, size):
    stack = 3
    stream = [(o[:, :size, :size].astype(dtype), a, r, n[:, :size, :size].astype(dtype), t, u)
              for o, a, r, n, t, u in transitions(0, 40, stack)]  # fmt: skip
    new = FrameStackStorage(6, (stack, size, size), dtype, extra_frames=2, check_memory=False)
    old = FrameStackStorage(6, (stack, size, size), dtype, extra_frames=2, check_memory=False)
    store = FrameStore([new])
    for row in stream:
        assert as_list(store(rows([0], [row])).events) == expected_events([old], [0], [row])
        assert_same_state(new, old)
