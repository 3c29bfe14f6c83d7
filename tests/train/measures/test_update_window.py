"""The update window (per_cli.train.measures.update_window): TD-error statistics, unweighted loss and i.i.d. measures of
real memories' batches, each equal to its definition computed one update at a time (each update measured as the
loop measures it, by ``measure_table``, here over S = 1: :func:`add`).

Every test here runs with warnings as errors: a constant state must not raise a NaN or divide warning.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from per_cli.config import Config, ReplayConfig
from per_cli.replay import make_replay
from per_cli.rl.engines import make_agent
from per_cli.rl.losses import TDLoss
from per_cli.train.checkpoints.safe_read import load_plain, save_plain
from per_cli.train.measures import update_window
from per_cli.train.measures.iid import REFERENCE_SIZE, state_view
from per_cli.train.measures.metrics import correlation_count
from per_cli.train.measures.reference import reference_slots
from per_cli.train.measures.update_measures import measure_table
from per_cli.train.measures.update_window import UpdateWindow
from tests.train.measures.test_iid import numpy_state_diversity, numpy_variance

pytestmark = pytest.mark.filterwarnings("error")


def _memory(obs_shape: tuple[int, ...], kind: str = "uniform", episode_length: int = 25, n: int = 400, seed: int = 0):
    """A real replay memory holding ``n`` transitions of random states in episodes of ``episode_length``."""
    dtype = np.uint8 if len(obs_shape) > 1 else np.float32
    cfg = Config(replay=ReplayConfig(kind=kind, capacity=1000, batch_size=16))
    memory = make_replay(cfg, obs_shape, np.dtype(dtype), seed)
    rng = np.random.default_rng(seed)
    for t in range(n):
        obs = (rng.random(obs_shape) * (255 if dtype == np.uint8 else 1)).astype(dtype)
        ends = (t + 1) % episode_length == 0
        memory.add(obs, int(rng.integers(2)), 1.0, obs, ends, False)
    return memory


def add(window: UpdateWindow, b, r, memory=None) -> None:
    """One update (batch ``b``, an engine's result ``r``) measured as the loop measures it (``measure_table``,
    here over S = 1) into ``window`` (``memory``: the episodes it holds, with iid)."""
    window.add_measured(*_measured(window, b, r, memory))


def _measured(window: UpdateWindow, b, r, memory=None) -> tuple:
    """(the row, the feature variances or None) of one update measured alone (``measure_table``, S = 1)."""
    held = None if memory is None else [memory.episodes_held()]
    table, variances = measure_table(window, r.td_errors[None], r.losses[None], b.weights[None], b.ages[None],
                                     b.obs[None], b.episodes[None], held, [r.loss], [r.q_mean])  # fmt: skip
    return table[0], None if variances is None else variances[0]


def _result(td: np.ndarray, loss: float = 0.0, q_mean: float = 0.0, losses: np.ndarray | None = None):
    """An engine's result for one update (``UpdateResult``'s fields): its δ and each sample's loss (by default
    Huber's of δ)."""
    if losses is None:
        d = np.abs(td)
        losses = np.where(d < 1, 0.5 * d * d, d - 0.5).astype(np.float32)
    return SimpleNamespace(td_errors=td, losses=losses, loss=loss, q_mean=q_mean)


def _updates(memory, n: int, batch: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    for k in range(n):
        b = memory.sample(batch)
        b.obs[: k % 3] = b.obs[0].ravel()[0]  # some constant states
        b.obs[k % 3 : k % 3 + 4] = b.obs[k % 3] // 2 + 1 if b.obs.dtype == np.uint8 else b.obs[k % 3] * 2 + 1
        losses = rng.exponential(size=batch).astype(np.float32)
        yield b, _result(rng.standard_normal(batch).astype(np.float32) * 2, float(k), 0.5 * k, losses)


def _expected_row(b, r, ref_var: np.ndarray, held: int) -> dict[str, float]:
    """One update's scalars computed on their own, by the definitions."""
    td = np.abs(r.td_errors.astype(np.float64))
    return {
        "td_error/mean": td.mean(),
        "td_error/median": np.median(td),
        "td_error/max": td.max(),
        "td_error/std": td.std(),
        "losses/td_loss": r.loss,
        "losses/td_loss_unweighted": r.losses.astype(np.float64).mean(),  # (the engine's losses, not recomputed)
        "losses/q_values": r.q_mean,
        "replay/sample_age": float(np.mean(b.ages)),
        "replay/is_weight_mean": float(np.mean(b.weights)),
        "replay/correlation_count": correlation_count(b.obs, 0.8),
        "iid/episode_diversity": len(set(b.episodes.tolist())) / min(len(b.episodes), held),
        "iid/state_diversity": numpy_state_diversity(state_view(b.obs[None], b.obs.ndim - 1), ref_var)[0],
    }


@pytest.mark.parametrize("obs_shape", [(4,), (2, 9, 9)])
def test_window_values_equal_a_per_update_loop(obs_shape):
    memory = _memory(obs_shape)
    window = UpdateWindow(correlation_threshold=0.8, seed=7)
    updates = list(_updates(memory, 23, 16))
    for b, r in updates:
        add(window, b, r, memory)
    values = window.pop(memory)

    # the window's reference: REFERENCE_SIZE draws with its own generator, seeded by (seed, 0x11D), their states
    # viewed, numpy's variance
    rng = np.random.default_rng(np.random.SeedSequence([7, 0x11D]))
    states = memory.storage.observations(reference_slots(memory.storage, rng, REFERENCE_SIZE))
    ref_var = numpy_variance(state_view(states, len(obs_shape)))
    expected: dict[str, list[float]] = {}
    for b, r in updates:
        for key, value in _expected_row(b, r, ref_var, memory.episodes_held()).items():
            expected.setdefault(key, []).append(value)
    assert set(values) == set(expected)
    for key in expected:
        assert len(values[key]) == len(updates), key
        np.testing.assert_allclose(values[key], expected[key], rtol=1e-6, err_msg=key)
    assert sum(expected["replay/correlation_count"]) > 0  # the data did exercise the count
    assert memory.episodes_held() == 16  # 400 transitions in episodes of 25


def test_td_error_statistics_by_hand():
    memory = _memory((4,))
    window = UpdateWindow(correlation_threshold=None, iid=False)
    b = memory.sample(4)
    add(window, b, _result(np.array([0.5, -1.0, 2.0, -4.5], np.float32)))  # (Huber's losses: 0.125, 0.5, 1.5, 4)
    values = window.pop()
    expected = {"td_error/mean": 2.0, "td_error/median": 1.5, "td_error/max": 4.5, "td_error/std": np.sqrt(2.375)}
    for key, value in expected.items():
        assert values[key][0] == pytest.approx(value), key
    assert values["losses/td_loss_unweighted"][0] == pytest.approx((0.125 + 0.5 + 1.5 + 4.0) / 4)


def test_one_episode_memory_and_none_batches_are_not_diverse():
    """Consecutive batches (``none``) from a memory of many episodes score low on both measures; a memory
    holding a single episode gives episode diversity 1 (nothing better was possible)."""
    memory = _memory((4,), kind="none", episode_length=100)
    window = UpdateWindow(correlation_threshold=None, seed=1)
    for _ in range(5):
        add(window, memory.sample(16), _result(np.zeros(16, np.float32)), memory)
    values = window.pop(memory)
    assert memory.episodes_held() == 4
    # 16 newest transitions: one episode of the 4 held, so 1/min(16, 4)
    np.testing.assert_allclose(values["iid/episode_diversity"], 1 / 4)
    single = _memory((4,), kind="uniform", episode_length=1000, n=100)
    add(window, single.sample(16), _result(np.zeros(16, np.float32)), single)
    assert window.pop(single)["iid/episode_diversity"][0] == 1.0


def test_reference_is_refreshed_once_per_log_window(monkeypatch):
    memory = _memory((4,))
    refreshes = []
    drawn = update_window.drawn_reference_variance
    counted = lambda m, rng: refreshes.append(1) or drawn(m, rng)  # noqa: E731
    monkeypatch.setattr(update_window, "drawn_reference_variance", counted)
    window = UpdateWindow(correlation_threshold=None, refresh_every=10)
    for pops in ([4], [4], [2], [5], [9], [1]):  # updates added before each pop
        for b, r in _updates(memory, pops[0], 16):
            add(window, b, r, memory)
        window.pop(memory)
    # first pop; then when 10 updates have accumulated since: after 4+4+2, after 5+9, not after 1
    assert refreshes == [1] * 3


def test_window_pops_once_skips_what_is_off_and_needs_the_memory_for_iid():
    memory = _memory((4,))
    window = UpdateWindow(correlation_threshold=None, iid=False)
    assert window.pop() == {}
    for b, r in _updates(memory, 3, 8):
        add(window, b, r)
    values = window.pop()
    assert "replay/correlation_count" not in values and "iid/state_diversity" not in values
    assert len(values["td_error/mean"]) == 3
    assert window.pop() == {}  # the window starts over
    with pytest.raises(ValueError, match="episodes held"):
        add(UpdateWindow(correlation_threshold=None), b, r)


@pytest.mark.parametrize("loss", ["huber", "mse", TDLoss("lap", 1.0, 0.6), TDLoss("pal", 1.0, 0.6)], ids=str)
@pytest.mark.parametrize("engine", ["torch", "numba"])
def test_unweighted_loss_is_the_agents_loss_without_weights(loss, engine):
    """On the live path: for a batch with IS weights of 1 the agent's own loss equals the window's unweighted
    loss, the mean of the agent's per-sample losses (for PAL both over the batch's λ); with weights it is their
    weighted mean, and the unweighted one does not move. (κ 1: TD errors on both sides of it.)"""
    memory = _memory((4,))
    td_loss = TDLoss.of(loss)
    plain = "huber" if td_loss.name in ("lap", "pal") else td_loss.name
    agent_cfg = dataclasses.replace(Config().agent, loss=plain, hidden_sizes=(16,), engine=engine)
    batch = memory.sample(16)
    batch.rewards = batch.rewards * 3  # TD errors on both sides of the Huber kink
    values = {}
    for name, weights in (("ones", np.ones(16, np.float32)), ("weighted", np.linspace(0.01, 1, 16, dtype=np.float32))):
        torch.manual_seed(0)
        agent = make_agent(agent_cfg, (4,), 2, torch.device("cpu"), td_loss)
        result = agent.learn(dataclasses.replace(batch, weights=weights)).member(0)
        window = UpdateWindow(correlation_threshold=None, iid=False)
        add(window, dataclasses.replace(batch, weights=weights), result)
        values[name] = (result.loss, window.pop()["losses/td_loss_unweighted"][0])
    assert values["ones"][1] == pytest.approx(values["ones"][0], rel=1e-5)
    assert values["weighted"][1] == pytest.approx(values["ones"][1], rel=1e-6)
    assert values["weighted"][0] < 0.9 * values["weighted"][1]


def test_uniform_batches_read_one_when_rare_far_states_carry_the_variance():
    """A memory whose spread comes mostly from rare far states (0.4% of them 30σ away in every feature, as
    zero-padded frame stacks are from Pong's play): uniform batches must still read about 1. A reference that
    often misses those states (256 draws: 10 of them on average) underestimates σ² for a whole window, and
    since E[1/σ̂²] ≫ 1/σ² the measure read 2.43 here; with 4,096 draws it reads 1.04 (these seeds)."""
    cfg = Config(replay=ReplayConfig(kind="uniform", capacity=20_000, batch_size=32))
    memory = make_replay(cfg, (4,), np.dtype(np.float32), 0)
    rng = np.random.default_rng(5)
    states = rng.standard_normal((20_000, 4)).astype(np.float32)
    states[rng.random(20_000) < 0.004] += 30.0
    for t, obs in enumerate(states):
        memory.add(obs, 0, 0.0, obs, (t + 1) % 200 == 0, False)
    window = UpdateWindow(correlation_threshold=None, refresh_every=50, seed=3)
    values = []
    for _ in range(40):  # 40 log windows of 50 uniform batches, each with its own reference
        for _ in range(50):
            add(window, memory.sample(32), _result(np.zeros(32, np.float32)), memory)
        values.append(window.pop(memory)["iid/state_diversity"])
    # 2,000 batches; each one's value has sd ≈ 1.4 (a far state in 12% of batches), so the mean's is ≈ 0.03
    assert abs(np.concatenate(values).mean() - 1) < 0.12


# ------------------------------------------------------------------------------------------------------------
# state_dict: what checkpoints hold


def _add_both_ways(windows, memory, updates) -> None:
    """Each update to every window, one in three measured for each window alone (``add``), the others once for
    all of them (its row and variances, ``add_measured``)."""
    for k, (b, r) in enumerate(updates):
        if k % 3 == 0:
            for window in windows:
                add(window, b, r, memory)
            continue
        row, variances = _measured(windows[0], b, r, memory)
        for window in windows:
            window.add_measured(row, variances)


@pytest.mark.parametrize("obs_shape", [(4,), (2, 9, 9)])
def test_a_window_rebuilt_from_its_state_dict_pops_as_the_original(obs_shape, tmp_path):
    """A window holding updates and a reference, saved and rebuilt through a file as a checkpoint holds it, pops
    the original's values bit for bit, now and in later windows whose reference is redrawn with its restored
    generator."""
    memory = _memory(obs_shape, episode_length=7)
    window = UpdateWindow(0.8, refresh_every=6, seed=4)
    for n, seed in ((5, 1), (2, 7)):
        _add_both_ways([window], memory, _updates(memory, n, 16, seed=seed))
        window.pop(memory)  # the reference drawn at the first pop: 2 updates since
    _add_both_ways([window], memory, _updates(memory, 2, 16, seed=2))
    state = window.state_dict()
    assert state["ref_var"] is not None and state["since_refresh"] == 2 and len(state["rows"]) == 2
    assert all(row is not None for row in state["rows"]) and "td" not in state  # every update kept measured
    assert len(state["variances"]) == 2 and "obs" not in state  # (each update's variances, not its states)
    save_plain(state, tmp_path / "window.pt")  # as a checkpoint holds it: read back with a weights-only load
    rebuilt = UpdateWindow.from_state_dict(load_plain(tmp_path / "window.pt"))
    # the same window with another generator: its redrawn references differ (what the generator's state is for)
    other = UpdateWindow.from_state_dict({**state, "rng": np.random.default_rng(99).bit_generator.state})
    differs = []
    for n, seed in ((0, 3), (3, 4), (5, 5), (2, 6)):  # the saved reference, then redrawn after 2 + 2 + 3 updates
        _add_both_ways([window, rebuilt, other], memory, list(_updates(memory, n, 16, seed=seed)))
        want, got, elsewise = window.pop(memory), rebuilt.pop(memory), other.pop(memory)
        assert list(got) == list(want) and len(want["td_error/mean"]) == (n or 2)  # (first: the 2 held)
        for key in want:
            assert got[key].dtype == want[key].dtype and got[key].tobytes() == want[key].tobytes(), key
            if elsewise[key].tobytes() != want[key].tobytes():
                differs.append((n, key))
    assert differs == [(3, "iid/state_diversity"), (5, "iid/state_diversity"), (2, "iid/state_diversity")]
    assert len(state["rows"]) == 2  # the state's lists are copies: popping the windows left them


def test_a_window_saved_with_its_states_instead_of_their_variances_pops_the_same(tmp_path):
    """A checkpoint (format 5) written before every update's feature variances were measured holds, for image
    states, the states instead (variances None, ``obs``, ``obs_ndim``): the window rebuilt from it pops what the
    window that kept the variances pops, bit for bit."""
    memory = _memory((2, 9, 9), episode_length=7)
    window = UpdateWindow(0.8, refresh_every=6, seed=4)
    updates = list(_updates(memory, 3, 16, seed=1))
    _add_both_ways([window], memory, updates)
    state = window.state_dict()
    older = {**state, "variances": [None] * 3, "obs": [b.obs for b, _ in updates], "obs_ndim": 3}
    save_plain(older, tmp_path / "window.pt")
    rebuilt = UpdateWindow.from_state_dict(load_plain(tmp_path / "window.pt"))
    want, got = window.pop(memory), rebuilt.pop(memory)
    assert list(got) == list(want) and "iid/state_diversity" in want
    assert all(got[key].tobytes() == want[key].tobytes() for key in want)


def test_a_window_state_dict_is_plain_data():
    window = UpdateWindow(None, iid=False, refresh_every=3, seed=1)
    memory = _memory((4,))
    for b, r in _updates(memory, 2, 8):
        add(window, b, r)
    state = window.state_dict()
    assert {type(v) for v in state.values()} <= {bool, int, str, dict, list, type(None)}
    assert type(state["rng"]) is dict and state["rng"]["bit_generator"] == "PCG64"
    rebuilt = UpdateWindow.from_state_dict(state)
    assert (rebuilt.threshold, rebuilt.iid, rebuilt.refresh_every) == (None, False, 3)
    assert len(rebuilt.pop()["td_error/mean"]) == 2
