"""The TD loss a run trains with: which one (a rule on the whole config) and, for the torch engines, its value.

:func:`loss_name` is the kind's own loss where its ``KindSpec`` names one, else ``agent.loss``; :func:`loss_params`
gives LAP's and PAL's (κ, α) = (``replay.min_priority``, ``replay.alpha``), so sampler and loss cannot disagree.
:func:`batch_losses` serves both torch paths; the numba engine (:func:`per_cli.rl.engines.td.loss_and_dq`) is tested
against it. Each per-sample loss is multiplied by its IS weight, then averaged. With d = Q(s, a) − target:
``huber`` is ``smooth_l1_loss`` (β 1), ``mse`` ``mse_loss``; ``lap`` (Fujimoto et al. 2020) is ``0.5 d²`` where
|d| < κ, else ``κ |d|``; ``pal`` is ``κ^α 0.5 d²`` where |d| < κ, else ``κ |d|^(1+α) / (1+α)``, its mean divided by
a detached λ = mean of ``max(|d|, κ)^α``: in expectation LAP's gradient under LAP's sampling."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F

from per_cli.errors import ConfigError
from per_cli.replay import KINDS

LOSS_NAMES = ("huber", "mse", "lap", "pal")
# the losses a replay kind brings (its KindSpec's ``loss``), shaped by κ and α; any other kind trains with agent.loss
KAPPA_LOSSES = ("lap", "pal")
# the authors' discrete defaults (LAP_DDQN.py, PAL_DDQN.py): min_priority 1e-2, alpha 0.6
DEFAULT_KAPPA, DEFAULT_ALPHA = 0.01, 0.6


def loss_name(cfg: Any) -> str:
    """The loss a run of the whole config ``cfg`` trains with: its replay kind's own (``lap`` and ``pal``: the
    kind's ``KindSpec.loss``), else ``agent.loss``."""
    spec = KINDS.get(cfg.replay.kind)
    return spec.loss if spec is not None and spec.loss is not None else cfg.agent.loss


def loss_params(cfg: Any) -> tuple[float, float]:
    """(κ, α) of a run of ``cfg``: ``replay.min_priority`` and ``replay.alpha`` (only LAP and PAL use them; α left
    out is the kind's default, as its sampler's)."""
    alpha, spec = cfg.replay.alpha, KINDS.get(cfg.replay.kind)
    if alpha is None:
        alpha = spec.priority_defaults.alpha if spec is not None and spec.priority_defaults else DEFAULT_ALPHA
    return float(cfg.replay.min_priority), float(alpha)


@dataclass(frozen=True)
class TDLoss:
    """A TD loss: its name (:data:`LOSS_NAMES`) and LAP's and PAL's κ (> 0) and α (>= 0), which the other losses
    carry unused (and do not check)."""

    name: str = "huber"
    kappa: float = DEFAULT_KAPPA
    alpha: float = DEFAULT_ALPHA

    def __post_init__(self) -> None:
        if self.name not in LOSS_NAMES:
            raise ValueError(f"unknown loss {self.name!r}: expected one of {', '.join(LOSS_NAMES)}")
        if self.name in KAPPA_LOSSES and not self.kappa > 0.0:  # (NaN too) LAP's gradient outside is ±κ
            raise ConfigError(f"replay.min_priority: the {self.name} loss needs κ > 0, got {self.kappa}")
        if self.name in KAPPA_LOSSES and not self.alpha >= 0.0:
            raise ConfigError(f"replay.alpha: the {self.name} loss needs α >= 0, got {self.alpha}")
        object.__setattr__(self, "kappa", float(self.kappa))
        object.__setattr__(self, "alpha", float(self.alpha))

    @classmethod
    def from_config(cls, cfg: Any) -> TDLoss:
        """The loss a run of the whole config ``cfg`` trains with (:func:`loss_name`, :func:`loss_params`)."""
        return cls(loss_name(cfg), *loss_params(cfg))

    @classmethod
    def of(cls, loss: TDLoss | str) -> TDLoss:
        """``loss`` itself, or the loss of that name with the default κ and α."""
        return loss if isinstance(loss, TDLoss) else cls(loss)


def next_values(target_q: torch.Tensor, online_q: torch.Tensor | None) -> torch.Tensor:
    """The value bootstrapped from s' (Q-values over the last axis, any leading axes): max_a' Q'(s', a') from the
    target network's ``target_q``, or for double DQN (``online_q`` given: the online network's Q(s', ·))
    Q'(s', argmax_a' Q(s', a')), the first maximum on ties."""
    if online_q is None:
        return target_q.max(dim=-1).values
    return target_q.gather(-1, online_q.argmax(dim=-1, keepdim=True)).squeeze(-1)


def td_targets(rewards: torch.Tensor, terminated: torch.Tensor, next_q: torch.Tensor, gamma: float) -> torch.Tensor:
    """r + γ (1 − terminated) next_q. Only termination stops the bootstrap (a truncated transition bootstraps from its
    real next observation); n-step returns arrive with γ^K folded into ``terminated`` by the gather
    (``replay.storage.ring.nstep_members``)."""
    return rewards + gamma * (1.0 - terminated) * next_q


def per_sample_loss(q: torch.Tensor, target: torch.Tensor, loss: TDLoss) -> torch.Tensor:
    """Each sample's loss of d = ``q`` − ``target`` (before IS weights and, for PAL, before the 1/λ)."""
    if loss.name == "huber":
        return F.smooth_l1_loss(q, target, reduction="none")
    if loss.name == "mse":
        return F.mse_loss(q, target, reduction="none")
    diff = q - target
    size = diff.abs()
    inside = size < loss.kappa
    if loss.name == "lap":
        return torch.where(inside, 0.5 * diff * diff, loss.kappa * size)
    kappa, alpha = loss.kappa, loss.alpha
    return torch.where(inside, kappa**alpha * (0.5 * diff * diff), (kappa / (1.0 + alpha)) * size.pow(1.0 + alpha))


def pal_lambda(q: torch.Tensor, target: torch.Tensor, loss: TDLoss) -> torch.Tensor:
    """PAL's λ of a batch (1-d): the mean of max(|q − target|, κ)^α, detached (no gradient flows through it)."""
    size = (q - target).detach().abs()
    return size.clamp(min=loss.kappa).pow(loss.alpha).mean()


class BatchLoss(NamedTuple):
    """One batch's loss: each sample's loss as the value counts it and the value an update minimises."""

    samples: torch.Tensor  # l(q_i − target_i) without IS weight (for PAL divided by the batch's λ)
    value: torch.Tensor  # the mean of w_i l(q_i − target_i), for PAL divided by the batch's λ


def batch_losses(q: torch.Tensor, target: torch.Tensor, weights: torch.Tensor, loss: TDLoss) -> BatchLoss:
    """The loss one update minimises over a batch (1-d ``q``, ``target``, ``weights``; one member's under
    ``vmap``): the mean of IS weight × per-sample loss, for PAL divided by the batch's λ (:func:`pal_lambda`);
    with each sample's loss without its IS weight, as the value counts it (for PAL also divided by λ): the
    unweighted loss the measures log is their mean."""
    samples = per_sample_loss(q, target, loss)
    value = (weights * samples).mean()
    if loss.name == "pal":
        lam = pal_lambda(q, target, loss)
        return BatchLoss(samples / lam, value / lam)
    return BatchLoss(samples, value)
