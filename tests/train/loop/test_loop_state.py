"""A member's counters live in its row of the loop's Counters: what the phases move as arrays is what the member
reads, and what a checkpoint saves stays plain Python numbers."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from per_cli.train.loop.loop_state import Counters, LoopState


@given(
    st.lists(
        st.tuples(st.integers(0, 10**9), st.floats(-1e6, 1e6, allow_nan=False), st.integers(0, 10**6)),
        min_size=1,
        max_size=8,
    )
)
def test_counters_take_the_states_values_and_each_state_reads_and_writes_its_row(values):
    states = [LoopState() for _ in values]
    for state, (step, ret, length) in zip(states, values, strict=True):
        state.step, state.episode_return, state.episode_length = step, ret, length
    counters = Counters.over(states)
    np.testing.assert_array_equal(counters.step, [v[0] for v in values])
    np.testing.assert_array_equal(counters.episode_return, [v[1] for v in values])
    counters.step += 1  # (a phase moving every member at once)
    counters.episode_return[-1] += 2.5
    for k, state in enumerate(states):
        assert state.step == values[k][0] + 1 and type(state.step) is int
        expected = values[k][1] + (2.5 if k == len(states) - 1 else 0.0)
        assert state.episode_return == expected and type(state.episode_return) is float
    states[0].episode_length = 7  # (a member's own write lands in its row)
    assert counters.episode_length[0] == 7


def test_a_state_dict_is_plain_numbers_and_loads_into_a_bound_state():
    state = LoopState()
    state.step, state.episode_return = 41, 3.5
    state.finish_episode(3.5, None)
    saved = state.state_dict()
    assert json.loads(json.dumps(saved)) == saved  # plain data, whatever holds the counters
    other = LoopState()
    counters = Counters.over([LoopState(), other])
    other.load_state_dict(saved)
    assert counters.step[1] == 41 and counters.step[0] == 0 and other.state_dict() == saved


def test_return_measures_by_hand():
    from per_cli.rundir.returns import return_measures

    # 25 episodes: 0 for 5, 100 for 20 (peak: the 20 hundreds), then the last 20 of them again: no drop
    rise = [0.0] * 5 + [100.0] * 20
    assert return_measures(rise) == {"return_auc": 80.0, "return_peak": 100.0, "return_drop": 0.0}
    # a collapse: 20 at 200, then 10 at 0: final = mean of the last 20 = 100, peak 200, drop 100
    collapse = [200.0] * 20 + [0.0] * 10
    assert return_measures(collapse) == {"return_auc": pytest.approx(400 / 3), "return_peak": 200.0,
                                         "return_drop": 100.0}  # fmt: skip
    # fewer than 20 episodes: the one window there is, all of them (peak = final, drop 0)
    assert return_measures([1.0, 2.0, 6.0]) == {"return_auc": 3.0, "return_peak": 3.0, "return_drop": 0.0}
    assert return_measures([]) == {"return_auc": None, "return_peak": None, "return_drop": None}


@settings(deadline=None)  # (a pure check: a loaded machine's pause must not fail it)
@given(st.lists(st.floats(-500, 500, allow_nan=False), min_size=1, max_size=60))
def test_the_loops_running_measures_equal_the_whole_runs(returns):
    from per_cli.rundir.returns import return_measures

    state = LoopState()
    for k, ret in enumerate(returns):
        state.finish_episode(ret, None)
        if k == len(returns) // 2:  # through a checkpoint and back, halfway
            saved = json.loads(json.dumps(state.state_dict()))
            state = LoopState()
            state.load_state_dict(saved)
    running, whole = state.return_measures(), return_measures(returns)
    assert running == {k: pytest.approx(v, abs=1e-6) for k, v in whole.items()}
