"""The numba update engine for an online/target pair of MLP Q-networks built from one :class:`MLPSpec`.

The torch update (forwards, TD targets, :class:`~per_cli.rl.losses.TDLoss`, backward, ``clip_grad_norm_``, Adam) in
one compiled call, because on a CPU torch spends more time dispatching a small update than computing it
(docs/engines.md). It is the cohort kernel at S = 1 (:attr:`MLPEngine.alone`), so it computes alone what it computes
as a member. The modules' ``weight``/``bias`` view the flat buffers (:mod:`.dense`), so acting and ``state_dict``
see every update in place. It refuses a network that is not the spec's Linear/ReLU stack; one thread at a time."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from per_cli.rl.engines.cohort import Blocks, CohortEngine
from per_cli.rl.engines.dense import offsets
from per_cli.rl.engines.kernels import UpdateSettings
from per_cli.rl.engines.optim import FlatAdam, lerp_kernel
from per_cli.rl.engines.td import LOSS_CODES
from per_cli.rl.losses import TDLoss
from per_cli.rl.networks import MLPSpec
from per_cli.rl.results import Scores, UpdateResults

_ALONE = np.zeros(1, dtype=np.int64)  # ``which`` of the engine's own cohort of one (built once)


def structure_mismatch(net: nn.Module, spec: MLPSpec) -> str | None:
    """Why ``net`` is not exactly the spec's stack (Linear, ReLU, ..., Linear on the CPU), or None."""
    if spec.activation != "relu":
        return f"the numba engine implements ReLU MLPs, not {spec.activation}"
    expected: list[tuple] = []
    for d_in, d_out in zip(spec.dims[:-1], spec.dims[1:], strict=True):
        expected += [(nn.Linear, d_in, d_out), (nn.ReLU,)]
    expected.pop()
    leaves = [m for m in net.modules() if not list(m.children())]
    found = [(type(m), m.in_features, m.out_features) if isinstance(m, nn.Linear) else (type(m),) for m in leaves]
    if found != expected:
        return f"the network is not the spec's Linear/ReLU stack {spec.dims}: {[t[0].__name__ for t in found]}"
    if any(p.device.type != "cpu" or p.dtype != torch.float32 for p in net.parameters()):
        return "the numba engine needs float32 parameters on the CPU"
    return None


def share_flat_parameters(net: nn.Module, flat: np.ndarray) -> np.ndarray:
    """Move ``net``'s parameters (values kept) into the flat float32 buffer ``flat``, returned, and re-point the
    module at views of it: writing into the buffer changes the module's parameters."""
    layers = [m for m in net.modules() if isinstance(m, nn.Linear)]
    pos = 0
    for lin in layers:
        for name in ("weight", "bias"):
            old = getattr(lin, name)
            view = flat[pos : pos + old.numel()].reshape(tuple(old.shape))
            view[...] = old.detach().cpu().numpy()
            setattr(lin, name, nn.Parameter(torch.from_numpy(view), requires_grad=old.requires_grad))
            pos += old.numel()
    return flat


def shares_memory(net: nn.Module, flat: np.ndarray) -> bool:
    """True while every parameter of ``net`` is still a view of ``flat`` (a ``.to()`` or assign-load breaks it)."""
    return all(np.shares_memory(p.detach().numpy(), flat) for p in net.parameters())


class MLPEngine:
    """The numba DQN update for an online/target pair of networks built from ``spec`` (see the module docstring)."""

    def __init__(
        self,
        spec: MLPSpec,
        q_net: nn.Module,
        target_net: nn.Module,
        *,
        gamma: float,
        loss: TDLoss | str,
        double_dqn: bool,
        max_grad_norm: float | None,
        lr: float,
        adam_eps: float = 1e-8,
    ):
        for name, net in (("q_net", q_net), ("target_net", target_net)):
            why = structure_mismatch(net, spec)
            if why is not None:
                raise ValueError(f"{name}: {why}")
        loss = TDLoss.of(loss)  # (a name: that loss, with the default κ and α)
        if loss.name not in LOSS_CODES:
            raise ValueError(f"the numba engine implements the losses {sorted(LOSS_CODES)}, not {loss.name!r}")
        self.q_net, self.target_net = q_net, target_net
        self.dims = np.array(spec.dims, dtype=np.int64)
        self.optimizer = FlatAdam([tuple(p.shape) for p in q_net.parameters()], lr, eps=adam_eps)
        self.loss = loss
        clip = -1.0 if max_grad_norm is None else float(max_grad_norm)
        self.hyper = self._settings(UpdateSettings(
            gamma=float(gamma), double_dqn=bool(double_dqn), loss_code=LOSS_CODES[loss.name], max_grad_norm=clip,
            lr=0.0, beta1=0.0, beta2=0.0, eps=0.0, kappa=float(loss.kappa), alpha=float(loss.alpha),
        ))  # fmt: skip
        self.adopt(Blocks.allocate(1, int(offsets(self.dims)[-1])), 0)

    def adopt(self, blocks: Blocks, s: int) -> None:
        """Move the engine's buffers (values kept) into row ``s`` of ``blocks`` (a cohort's): from then on the
        networks' parameters, the optimizer's moments and step count, and the engine's own calls
        (:attr:`alone`, this engine as a cohort of one) are views of that row."""
        n = int(offsets(self.dims)[-1])
        self.params = share_flat_parameters(self.q_net, blocks.params[s, :n])
        self.target_params = share_flat_parameters(self.target_net, blocks.target_params[s, :n])
        self.optimizer.move_to(blocks.m[s, :n], blocks.v[s, :n], blocks.steps[s : s + 1])
        self.rows = blocks.rows(s)
        self.alone = CohortEngine([self])

    def _settings(self, hyper: UpdateSettings) -> UpdateSettings:
        """The update kernel's settings ``hyper`` with its optimizer's (which a checkpoint load sets)."""
        opt = self.optimizer
        beta1, beta2 = opt.betas
        return hyper._replace(lr=float(opt.lr), beta1=float(beta1), beta2=float(beta2), eps=float(opt.eps))

    def update(self, obs, actions, rewards, next_obs, terminated, weights) -> UpdateResults:
        """One gradient step; returns its results (S = 1: δ and the weighted loss per sample, the loss, the mean
        Q(s, a)), all from the pre-update weights."""
        return self.alone.update(_ALONE, obs, actions, rewards, next_obs, terminated, weights)

    def td_errors(self, obs, actions, rewards, next_obs, terminated) -> np.ndarray:
        """δ (batch,) under the current networks, nothing learnt."""
        return self.alone.td_errors(_ALONE, obs, actions, rewards, next_obs, terminated)[0]

    def score(self, obs, actions, rewards, next_obs, terminated) -> Scores:
        """The batch's :class:`~per_cli.rl.results.Scores` (S = 1) under the current networks, nothing learnt."""
        return self.alone.score(_ALONE, obs, actions, rewards, next_obs, terminated)

    def greedy_action(self, obs) -> int:
        return self.alone.greedy_action(0, obs)

    def sync_target(self, tau: float) -> None:
        if tau >= 1.0:
            np.copyto(self.target_params, self.params)
        else:
            lerp_kernel(self.target_params, self.params, tau)

    def loaded(self) -> None:
        """After a checkpoint was loaded into the networks and the optimizer: take the optimizer's settings, and
        raise if a network's parameters no longer live in the engine's buffers (a load writes into them)."""
        self.hyper = self._settings(self.hyper)
        self.alone = CohortEngine([self])
        for name, net, flat in (
            ("q_net", self.q_net, self.params),
            ("target_net", self.target_net, self.target_params),
        ):
            if not shares_memory(net, flat):
                raise RuntimeError(f"{name}'s parameters were replaced; the numba engine no longer sees them")
