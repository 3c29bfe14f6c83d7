"""The run's TD loss (per_cli/rl/losses.py): which one a config trains with, LAP's and PAL's values and gradients
against their definitions (Fujimoto, Meger & Precup 2020), the numba engine's hand-written gradient against torch
autograd, and the paper's equivalence between LAP under its sampling and PAL under uniform sampling."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch.func import vmap

from per_cli.config import AgentConfig, Config, ConfigError, ReplayConfig
from per_cli.rl.engines.td import LOSS_CODES, loss_and_dq
from per_cli.rl.losses import (
    LOSS_NAMES,
    TDLoss,
    batch_losses,
    loss_name,
    loss_params,
    pal_lambda,
    per_sample_loss,
)

KAPPA, ALPHA = 0.01, 0.6


def reference(d: np.ndarray, w: np.ndarray, loss: TDLoss) -> tuple[float, np.ndarray]:
    """The loss of a batch with d = Q − target and its gradient with respect to each Q, in float64, written out
    from the definitions (λ a constant: no gradient flows through it)."""
    k, a = loss.kappa, loss.alpha
    size, sign = np.abs(d), np.sign(d)
    lam = 1.0
    if loss.name == "huber":
        inside = size < 1.0
        value, slope = np.where(inside, 0.5 * d * d, size - 0.5), np.where(inside, d, sign)
    elif loss.name == "mse":
        value, slope = d * d, 2 * d
    elif loss.name == "lap":
        inside = size < k
        value, slope = np.where(inside, 0.5 * d * d, k * size), np.where(inside, d, k * sign)
    else:
        inside = size < k
        value = np.where(inside, k**a * 0.5 * d * d, k * size ** (1 + a) / (1 + a))
        slope = np.where(inside, k**a * d, k * size**a * sign)
        lam = np.mean(np.maximum(size, k) ** a)
    return float(np.mean(w * value) / lam), w * slope / (len(d) * lam)


def edge_cases(kappa: float, dtype=np.float64) -> np.ndarray:
    """d on both sides of κ and of 0, at ±κ exactly (in ``dtype``), and 0."""
    k = dtype(kappa)
    below, above = np.nextafter(k, dtype(0)), np.nextafter(k, dtype(np.inf))
    values = [0.0, k, -k, below, -below, above, -above, k / 2, -k / 3, 3 * k, -7 * k, 100.0, -0.37, 1e-7]
    return np.array(values, dtype=dtype)


LOSSES = [
    TDLoss("huber"),
    TDLoss("mse"),
    TDLoss("lap", KAPPA, ALPHA),
    TDLoss("lap", 1.0, ALPHA),
    TDLoss("pal", KAPPA, ALPHA),
    TDLoss("pal", 1.0, 0.3),
    TDLoss("pal", 0.5, 0.0),
    TDLoss("pal", 0.2, 1.0),
]


@pytest.mark.parametrize("loss", LOSSES, ids=str)
def test_each_loss_and_its_gradient_are_the_definition(loss):
    """torch's value and autograd gradient (float64) against the written-out definition, on both sides of κ, at
    ±κ (the outside branch: |d| < κ is strict), at 0, with IS weights; PAL's λ detached (a gradient through it
    would add −L/λ · ∂λ/∂Q, which the reference leaves out)."""
    d = edge_cases(loss.kappa)
    w = np.random.default_rng(0).uniform(0.1, 1.0, size=len(d))
    q = torch.tensor(d, requires_grad=True)
    value = batch_losses(q, torch.zeros_like(q), torch.tensor(w), loss).value
    value.backward()
    want_value, want_grad = reference(d, w, loss)
    assert value.item() == pytest.approx(want_value, rel=1e-12)
    np.testing.assert_allclose(q.grad.numpy(), want_grad, rtol=1e-12, atol=1e-300)
    assert np.all(q.grad.numpy()[d == 0.0] == 0.0)


def test_the_branches_are_the_authors():
    """At d = ±κ the value is the outside branch's (LAP: κ|d| = κ², not κ²/2; PAL: κ^(2+α)/(1+α)); PAL's λ is the
    mean of max(|d|, κ)^α."""
    k, a = 0.5, 0.6
    q = torch.tensor([k, -k, k / 2], dtype=torch.float64)
    zero = torch.zeros(3, dtype=torch.float64)
    np.testing.assert_allclose(per_sample_loss(q, zero, TDLoss("lap", k, a)).numpy(), [k * k, k * k, k * k / 8])
    pal = per_sample_loss(q, zero, TDLoss("pal", k, a)).numpy()
    np.testing.assert_allclose(pal, [k ** (2 + a) / (1 + a)] * 2 + [k**a * k * k / 8])
    assert float(pal_lambda(q, zero, TDLoss("pal", k, a))) == pytest.approx((2 * k**a + k**a) / 3)
    assert float(pal_lambda(torch.tensor([2.0, 0.0]), torch.zeros(2), TDLoss("pal", k, a))) == pytest.approx(
        (2.0**a + k**a) / 2
    )


@pytest.mark.parametrize("loss", LOSSES, ids=str)
def test_the_numba_losses_gradients_are_torch_autograds(loss):
    """The numba engine's loss and dL/dQ (float32, by hand) against torch autograd of the same batch loss in
    float32, on the edge cases at the taken actions of a (B, A) array of Q values."""
    rng = np.random.default_rng(1)
    d = edge_cases(loss.kappa, np.float32)
    batch, n_actions = len(d), 3
    actions = rng.integers(n_actions, size=batch)
    q_all = rng.normal(size=(batch, n_actions)).astype(np.float32)
    q_all[np.arange(batch), actions] = d
    target = np.zeros(batch, np.float32)
    weights = rng.uniform(0.1, 1.0, size=batch).astype(np.float32)
    td, dz = np.empty(batch, np.float32), np.zeros((batch, n_actions), np.float32)
    samples = np.empty(batch, np.float32)
    code = LOSS_CODES[loss.name]
    got_loss, q_sum, lam = loss_and_dq(q_all, target, actions, weights, code, loss.kappa, loss.alpha, td, samples, dz)

    q = torch.tensor(q_all, requires_grad=True)
    taken = q.gather(1, torch.tensor(actions)[:, None]).squeeze(1)
    want = batch_losses(taken, torch.tensor(target), torch.tensor(weights), loss)
    value = want.value
    value.backward()
    assert lam == 1.0 or loss.name == "pal"  # (each sample's loss without its weight, before PAL's 1/λ)
    np.testing.assert_allclose(samples / lam, want.samples.detach().numpy(), rtol=1e-6, atol=1e-12)
    assert got_loss / batch == pytest.approx(value.item(), rel=1e-6)
    np.testing.assert_allclose(dz, q.grad.numpy(), rtol=1e-6, atol=1e-12)
    np.testing.assert_array_equal(td, -d)
    assert q_sum == pytest.approx(float(d.astype(np.float64).sum()), rel=1e-6)
    _, want_grad = reference(d.astype(np.float64), weights.astype(np.float64), loss)
    np.testing.assert_allclose(dz[np.arange(batch), actions], want_grad, rtol=2e-6, atol=1e-12)


def test_the_loss_codes_are_the_loss_names():
    assert set(LOSS_CODES) == set(LOSS_NAMES) and sorted(LOSS_CODES.values()) == list(range(len(LOSS_NAMES)))


def test_the_replay_kind_decides_lap_and_pal_else_agent_loss():
    mse = AgentConfig(loss="mse")
    assert loss_name(Config(agent=mse)) == "mse"
    assert loss_name(Config(agent=mse, replay=ReplayConfig(kind="prioritized"))) == "mse"
    assert loss_name(Config(agent=mse, replay=ReplayConfig(kind="lap"))) == "lap"
    assert loss_name(Config(replay=ReplayConfig(kind="pal"))) == "pal"
    pal = Config(replay=ReplayConfig(kind="pal", alpha=0.4))
    assert loss_params(pal) == (getattr(pal.replay, "min_priority", 0.01), 0.4)
    assert TDLoss.from_config(pal) == TDLoss("pal", loss_params(pal)[0], 0.4)
    # replay.min_priority is κ where the config has it
    cfg = SimpleNamespace(replay=SimpleNamespace(kind="lap", min_priority=0.05, alpha=0.7), agent=mse)
    assert TDLoss.from_config(cfg) == TDLoss("lap", 0.05, 0.7)
    with pytest.raises(ConfigError, match="replay.min_priority"):
        TDLoss("pal", 0.0, 0.6)
    with pytest.raises(ValueError, match="unknown loss"):
        TDLoss("l1")
    assert TDLoss("huber", 0.0, 0.6).name == "huber"  # κ and α unused: not checked


def test_an_agent_refuses_a_plain_loss_other_than_agent_loss():
    from per_cli.rl.engines import make_agent

    cfg = AgentConfig(hidden_sizes=[8], loss="huber")
    with pytest.raises(ValueError, match="not agent.loss"):
        make_agent(cfg, (3,), 2, torch.device("cpu"), TDLoss("mse"))
    for engine in ("torch", "numba"):
        agent = make_agent(AgentConfig(hidden_sizes=[8], engine=engine), (3,), 2, torch.device("cpu"), TDLoss("pal"))
        assert agent.td_loss == TDLoss("pal")
    assert make_agent(cfg, (3,), 2, torch.device("cpu")).td_loss == TDLoss("huber")


# ---------------------------------------------------------------------------------------------------------------
# The paper's equivalence (Fujimoto et al. 2020, Theorem 1 and PAL): on a fixed memory of TD errors, the expected
# gradient of LAP's loss under sampling ∝ max(|δ|, κ)^α equals PAL's under uniform sampling, λ the memory's mean.

N, DRAWS, BATCH = 2_000, 200_000, 64


def _memory(rng: np.random.Generator) -> np.ndarray:
    """N TD errors: heavy-tailed (Student t, 3 degrees of freedom), 10% of them inside κ, ±κ and 0."""
    d = 0.5 * rng.standard_t(3, size=N)
    d[:200] = rng.uniform(-KAPPA, KAPPA, size=200)
    d[200:203] = KAPPA, -KAPPA, 0.0
    return d


def _slopes(d: np.ndarray, loss: TDLoss) -> np.ndarray:
    """dℓ/dQ of each sample's loss (no weight, no λ), by autograd of the loss under test."""
    q = torch.tensor(d, requires_grad=True)
    per_sample_loss(q, torch.zeros_like(q), loss).sum().backward()
    return q.grad.numpy()


def _mc_gradient(d: np.ndarray, draws: np.ndarray, loss_of_batch) -> np.ndarray:
    """The Monte-Carlo mean over the batches (rows of ``draws``) of d(batch loss)/dQ for the N memory Q's (target
    0, so Q = d), by autograd through the batches' gather and the batch loss under vmap, as the stacked engine
    computes its members' losses."""
    q = torch.tensor(d, requires_grad=True)
    batches = q[torch.as_tensor(draws)]
    losses = vmap(loss_of_batch)(batches)
    (losses.sum() / len(draws)).backward()
    return q.grad.numpy()


def _within(estimate: np.ndarray, exact: np.ndarray, se: np.ndarray, z: float = 5.0) -> bool:
    return bool(np.all(np.abs(estimate - exact) <= z * se))


def test_lap_under_its_sampling_equals_pal_under_uniform_sampling_in_expectation():
    """Exact sums: LAP's expected gradient w.r.t. Q_i, p_i ℓ'_LAP(δ_i) with p_i = max(|δ_i|, κ)^α / Σ_j ..., equals
    PAL's under uniform draws, ℓ'_PAL(δ_i) / (N λ) with λ the memory's mean of max(|δ|, κ)^α, to rounding. Monte
    Carlo (200,000 draws with replacement each, in batches of 64, fixed seed): each estimate is within 5 standard
    errors of its exact value in every coordinate (multinomial counts: SE_i = |slope_i| √(p_i (1 − p_i) / draws)),
    and LAP's loss under uniform draws is not (the check has the power to fail).

    With λ the batch's mean (what PAL runs with) the estimate is a ratio estimator of the memory's: to first order
    in 1/B, E[λ/λ_b | i in the batch] = 1 + (CV² − (m_i/λ − 1))/B, m_i = max(|δ_i|, κ)^α and CV m's coefficient of
    variation (a sample's own m enters its batch's λ_b, and E[1/λ_b] > 1/λ). Checked on the same uniform draws as
    the memory-λ estimate, by deciles of m: each decile's gradient mass is within 3% of the memory-λ one and within
    0.5% of that prediction (measured on this memory, CV 0.71: from +2.1% for the smallest |δ| to −1.8% for the
    largest, predicted +2.2% and −1.5%); the whole gradient's mass within 0.5% of the exact one (measured −0.01%).
    """
    rng = np.random.default_rng(34)
    d = _memory(rng)
    lap, pal = TDLoss("lap", KAPPA, ALPHA), TDLoss("pal", KAPPA, ALPHA)
    m = np.maximum(np.abs(d), KAPPA) ** ALPHA
    p, lam = m / m.sum(), m.mean()
    slope_lap, slope_pal = _slopes(d, lap), _slopes(d, pal)
    exact_lap = p * slope_lap
    exact_pal = slope_pal / (N * lam)
    np.testing.assert_allclose(exact_pal, exact_lap, rtol=1e-12, atol=1e-300)
    assert not np.allclose(slope_lap / N, exact_lap, rtol=0.05)  # sampling matters: uniform LAP is another thing

    ones, zeros = torch.ones(BATCH, dtype=torch.float64), torch.zeros(BATCH, dtype=torch.float64)
    lap_draws = rng.choice(N, size=DRAWS, p=p).reshape(-1, BATCH)
    uniform_draws = rng.integers(N, size=DRAWS).reshape(-1, BATCH)
    mc_lap = _mc_gradient(d, lap_draws, lambda q: batch_losses(q, zeros, ones, lap).value)
    memory_lambda = _mc_gradient(d, uniform_draws, lambda q: per_sample_loss(q, zeros, pal).mean() / lam)
    batch_lambda = _mc_gradient(d, uniform_draws, lambda q: batch_losses(q, zeros, ones, pal).value)
    uniform_lap = _mc_gradient(d, uniform_draws, lambda q: batch_losses(q, zeros, ones, lap).value)

    se_lap = np.abs(slope_lap) * np.sqrt(p * (1 - p) / DRAWS)
    se_uniform = np.sqrt((1 / N) * (1 - 1 / N) / DRAWS)
    assert _within(mc_lap, exact_lap, se_lap)
    assert _within(memory_lambda, exact_pal, np.abs(slope_pal) / lam * se_uniform)
    assert not _within(uniform_lap, exact_lap, np.abs(slope_lap) * se_uniform)

    mass = np.sign(slope_pal)  # the gradient's L1 mass: Σ_i sign(ℓ'_i) g_i
    assert abs(float(mass @ batch_lambda / (mass @ exact_pal)) - 1) < 0.005
    cv2 = m.var() / lam**2
    for decile in np.array_split(np.argsort(m), 10):
        ratio = float(mass[decile] @ batch_lambda[decile] / (mass[decile] @ memory_lambda[decile]))
        predicted = 1 + (cv2 - (m[decile].mean() / lam - 1)) / BATCH
        assert abs(ratio - 1) < 0.03 and abs(ratio - predicted) < 0.005, (m[decile].mean() / lam, ratio, predicted)


@pytest.mark.parametrize("kind, expected", [("prioritized", "mse"), ("lap", "lap"), ("pal", "pal")])
@pytest.mark.parametrize("engine", ["torch", "numba"])
def test_a_trainer_trains_and_measures_with_its_configs_loss(kind, expected, engine):
    """Where the loss comes from in a run: the member builds it from the whole config and gives it to the agent
    (either engine), whose per-sample losses the update measures read."""
    from per_cli.train.loop.trainer import build_member

    replay = ReplayConfig(kind=kind, capacity=100, batch_size=8)
    cfg = Config(agent=AgentConfig(loss="mse", hidden_sizes=[8], engine=engine), replay=replay)
    member = build_member(cfg, device="cpu")
    assert member.agent.td_loss == TDLoss(expected, *loss_params(cfg))
    if engine == "numba":
        assert member.agent.numba_engine.loss == member.agent.td_loss


UNWEIGHTED_BY_HAND = [  # (loss, δ of one batch, the mean of its per-sample losses as the update counts them)
    # huber (smooth L1, β 1): 0.125, 1.5, 0.5, 0; mse: δ²
    (TDLoss("huber"), [0.5, -2.0, 1.0, 0.0], 2.125 / 4),
    (TDLoss("mse"), [-0.25, 3.0, -1.5, 0.75], (0.0625 + 9 + 2.25 + 0.5625) / 4),
    # LAP: δ²/2 inside |δ| < κ, κ|δ| from κ on (κ 1); PAL (α 0.5): κ^α δ²/2 inside, κ|δ|^1.5/1.5 outside, over λ
    (TDLoss("lap", 1.0, 0.5), [0.5, -4.0, 1.0, 0.0], (0.125 + 4 + 1 + 0) / 4),
    (TDLoss("pal", 1.0, 0.5), [0.5, -4.0, 1.0, 0.0], (0.125 + 8 / 1.5 + 1 / 1.5 + 0) / 4 / ((1 + 2 + 1 + 1) / 4)),
]


@pytest.mark.parametrize(("loss", "td", "want"), UNWEIGHTED_BY_HAND, ids=lambda x: str(x)[:20])
def test_each_engines_per_sample_losses_are_the_unweighted_loss_by_hand(loss, td, want):
    """What the measures log as the unweighted loss, the mean of an update's per-sample losses
    (``UpdateResults.losses``: no IS weight, for PAL over the batch's λ), by hand for both engines' one statement
    of the loss (torch's ``batch_losses``, numba's ``loss_and_dq``), whatever the IS weights."""
    d = -np.asarray(td, dtype=np.float32)  # d = q − target with target 0
    weights = np.array([0.1, 0.5, 1.0, 0.7], np.float32)
    torch_losses = batch_losses(torch.tensor(d), torch.zeros(4), torch.tensor(weights), loss).samples.numpy()
    samples, out_td, dz = np.empty(4, np.float32), np.empty(4, np.float32), np.zeros((4, 1), np.float32)
    _, _, lam = loss_and_dq(d[:, None], np.zeros(4, np.float32), np.zeros(4, np.int64), weights,
                            LOSS_CODES[loss.name], loss.kappa, loss.alpha, out_td, samples, dz)  # fmt: skip
    for losses in (torch_losses, samples / lam):
        assert losses.astype(np.float64).mean() == pytest.approx(want, rel=1e-6)
