"""DQN: ε-greedy acting, TD errors, the per-sample weighted loss, and target-network sync."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from per_cli.config import AgentConfig
from per_cli.networks import make_q_network
from per_cli.replay import Batch


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


class DQNAgent:
    def __init__(self, cfg: AgentConfig, obs_shape: tuple[int, ...], n_actions: int, device: torch.device):
        self.cfg = cfg
        self.device = device
        self.n_actions = n_actions
        self.q_net = make_q_network(cfg.network, obs_shape, n_actions, cfg.hidden_sizes).to(device)
        self.target_net = make_q_network(cfg.network, obs_shape, n_actions, cfg.hidden_sizes).to(device)
        self.target_net.load_state_dict(self.q_net.state_dict())
        self.target_net.requires_grad_(False)
        self.optimizer = torch.optim.Adam(self.q_net.parameters(), lr=cfg.lr, eps=cfg.adam_eps)
        self.updates = 0

    def act(self, obs: np.ndarray, epsilon: float, rng: np.random.Generator) -> int:
        if rng.random() < epsilon:
            return int(rng.integers(self.n_actions))
        return self.greedy_action(obs)

    @torch.inference_mode()
    def greedy_action(self, obs: np.ndarray) -> int:
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
        with torch.no_grad():
            q = self.q_net(self._to_device(batch.obs)).gather(1, self._to_device(batch.actions)[:, None]).squeeze(1)
            return (self._targets(batch) - q).cpu().numpy()

    def learn(self, batch: Batch) -> UpdateResult:
        """One gradient step on the importance-weighted loss; each sample's loss is weighted before the mean."""
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
