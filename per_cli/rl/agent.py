"""DQN: ε-greedy acting, TD errors, the per-sample weighted loss, and target-network sync.

Two update engines give the same results (to float32 rounding): ``torch`` (autograd + ``torch.optim.Adam``
+ ``clip_grad_norm_``; any network, any device) and ``numba`` (:mod:`per_cli.rl.engines.numba_mlp`: the whole update
of an MLP in one compiled call, several times faster on a CPU). ``agent.engine: auto`` picks numba for an
MLP on the CPU.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from per_cli.config import AgentConfig, ConfigError
from per_cli.replay import Batch
from per_cli.rl.engines.numba_mlp import MLPEngine
from per_cli.rl.networks import MLPQNetwork, make_q_network


@dataclass
class UpdateResult:
    td_errors: np.ndarray  # δ = target − Q(s, a) per sample, the same δ that updates priorities
    loss: float
    q_mean: float


def td_targets(rewards: torch.Tensor, terminated: torch.Tensor, next_q: torch.Tensor, gamma: float) -> torch.Tensor:
    """r + γ (1 − terminated) max_a' Q'(s', a').

    Only termination stops the bootstrap: a transition cut by a time limit (truncated) still bootstraps
    from its real next observation.
    """
    return rewards + gamma * (1.0 - terminated) * next_q


def resolve_engine(name: str, q_net: nn.Module, device: torch.device) -> str:
    """``auto`` -> ``numba`` for an MLP on the CPU, else ``torch``; an impossible ``numba`` is a config error."""
    fits = isinstance(q_net, MLPQNetwork) and device.type == "cpu"
    if name == "auto":
        return "numba" if fits else "torch"
    if name == "numba" and not fits:
        what = "a CUDA device" if device.type != "cpu" else f"a {type(q_net).__name__}"
        raise ConfigError(
            f"agent.engine: numba updates an MLP Q-network on the CPU, but this run has {what}; "
            "use agent.engine=auto or torch"
        )
    return name


class DQNAgent:
    def __init__(self, cfg: AgentConfig, obs_shape: tuple[int, ...], n_actions: int, device: torch.device):
        self.cfg = cfg
        self.device = device
        self.n_actions = n_actions
        self.q_net = make_q_network(cfg.network, obs_shape, n_actions, cfg.hidden_sizes).to(device)
        self.target_net = make_q_network(cfg.network, obs_shape, n_actions, cfg.hidden_sizes).to(device)
        self.target_net.load_state_dict(self.q_net.state_dict())
        self.target_net.requires_grad_(False)
        self.engine = resolve_engine(cfg.engine, self.q_net, device)
        self._fast: MLPEngine | None = None
        if self.engine == "numba":
            # the networks' parameters become views of flat buffers that the compiled update writes in place
            self._fast = MLPEngine(
                self.q_net,
                self.target_net,
                gamma=cfg.gamma,
                loss=cfg.loss,
                double_dqn=cfg.double_dqn,
                max_grad_norm=cfg.max_grad_norm,
                lr=cfg.lr,
                adam_eps=cfg.adam_eps,
            )
            self.optimizer = self._fast.optimizer  # FlatAdam: torch.optim.Adam's state_dict format
        else:
            self.optimizer = torch.optim.Adam(self.q_net.parameters(), lr=cfg.lr, eps=cfg.adam_eps)
        self.updates = 0

    def act(self, obs: np.ndarray, epsilon: float, rng: np.random.Generator) -> int:
        if rng.random() < epsilon:
            return int(rng.integers(self.n_actions))
        return self.greedy_action(obs)

    def greedy_action(self, obs: np.ndarray) -> int:
        if self._fast is not None:  # ~2 µs instead of a ~60 µs torch forward
            return self._fast.greedy_action(obs)
        return self._torch_greedy_action(obs)

    @torch.inference_mode()
    def _torch_greedy_action(self, obs: np.ndarray) -> int:
        q = self.q_net(torch.as_tensor(obs, device=self.device).unsqueeze(0))
        return int(q.argmax(dim=1).item())

    def _to_device(self, array: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(array, device=self.device)

    @torch.no_grad()
    def _targets(self, batch: Batch) -> torch.Tensor:
        next_obs = self._to_device(batch.next_obs)
        next_q_all = self.target_net(next_obs)
        if self.cfg.double_dqn:
            best = self.q_net(next_obs).argmax(dim=1, keepdim=True)
            next_q = next_q_all.gather(1, best).squeeze(1)
        else:
            next_q = next_q_all.max(dim=1).values
        return td_targets(self._to_device(batch.rewards), self._to_device(batch.terminated), next_q, self.cfg.gamma)

    def td_errors(self, batch: Batch) -> np.ndarray:
        """δ for a batch without learning (used for insertion-time priorities)."""
        if self._fast is not None:
            b = batch
            return self._fast.td_errors(b.obs, b.actions, b.rewards, b.next_obs, b.terminated)
        with torch.no_grad():
            q = self.q_net(self._to_device(batch.obs)).gather(1, self._to_device(batch.actions)[:, None]).squeeze(1)
            return (self._targets(batch) - q).cpu().numpy()

    def learn(self, batch: Batch) -> UpdateResult:
        """One gradient step on the importance-weighted loss; each sample's loss is weighted before the mean."""
        if self._fast is not None:
            b = batch
            td, loss, q_mean = self._fast.update(b.obs, b.actions, b.rewards, b.next_obs, b.terminated, b.weights)
            self.updates += 1
            return UpdateResult(td_errors=td, loss=loss, q_mean=q_mean)
        actions = self._to_device(batch.actions)
        q = self.q_net(self._to_device(batch.obs)).gather(1, actions[:, None]).squeeze(1)
        target = self._targets(batch)
        if self.cfg.loss == "huber":
            per_sample = F.smooth_l1_loss(q, target, reduction="none")
        else:
            per_sample = F.mse_loss(q, target, reduction="none")
        loss = (self._to_device(batch.weights) * per_sample).mean()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.cfg.max_grad_norm is not None:
            nn.utils.clip_grad_norm_(self.q_net.parameters(), self.cfg.max_grad_norm)
        self.optimizer.step()
        self.updates += 1
        td = (target - q.detach()).cpu().numpy()
        return UpdateResult(td_errors=td, loss=float(loss.detach()), q_mean=float(q.detach().mean()))

    def sync_target(self) -> None:
        """Hard copy when tau == 1, else Polyak averaging θ' ← τθ + (1 − τ)θ'."""
        if self._fast is not None:
            self._fast.sync_target(self.cfg.tau)
            return
        if self.cfg.tau >= 1.0:
            self.target_net.load_state_dict(self.q_net.state_dict())
            return
        with torch.no_grad():
            for target, online in zip(self.target_net.parameters(), self.q_net.parameters(), strict=True):
                target.lerp_(online, self.cfg.tau)

    def state_dict(self) -> dict:
        return {
            "q_net": self.q_net.state_dict(),
            "target_net": self.target_net.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "updates": self.updates,
        }

    def load_state_dict(self, state: dict) -> None:
        self.q_net.load_state_dict(state["q_net"])
        self.target_net.load_state_dict(state["target_net"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates = state["updates"]
        if self._fast is not None:
            self._fast.check_shared()
