"""The numba engine's agent: :class:`~per_cli.rl.agent.DQNAgent` over one
:class:`~per_cli.rl.engines.mlp.MLPEngine`, a ReLU MLP's whole update in one compiled call on the CPU."""

from __future__ import annotations

import numpy as np

from per_cli.replay import Batch
from per_cli.rl.agent import DQNAgent
from per_cli.rl.engines.mlp import MLPEngine
from per_cli.rl.networks import MLPQNetwork, MLPSpec
from per_cli.rl.results import Scores, UpdateResults


class NumbaAgent(DQNAgent):
    """Both networks and the kernel come from one :class:`~per_cli.rl.networks.MLPSpec`; the networks' parameters
    are views of the flat buffers the compiled update writes in place, so acting through torch, evaluation and
    checkpoints see every update. ``numba_engine``: the member's engine, which a cohort batches
    (:class:`~per_cli.rl.engines.cohort.CohortEngine`)."""

    engine = "numba"

    def _build(self, obs_shape: tuple[int, ...]) -> None:
        cfg, td_loss = self.cfg, self.td_loss
        spec = MLPSpec.from_config(cfg, obs_shape, self.n_actions)
        self.q_net, self.target_net = MLPQNetwork(spec), MLPQNetwork(spec)
        self._init_target()
        self.numba_engine = MLPEngine(
            spec,
            self.q_net,
            self.target_net,
            gamma=cfg.gamma,
            loss=td_loss,
            double_dqn=cfg.double_dqn,
            max_grad_norm=cfg.max_grad_norm,
            lr=cfg.lr,
            adam_eps=cfg.adam_eps,
        )
        self.optimizer = self.numba_engine.optimizer  # FlatAdam: torch.optim.Adam's state_dict format

    def greedy_action(self, obs: np.ndarray) -> int:
        return self.numba_engine.greedy_action(obs)

    def td_errors(self, batch: Batch) -> np.ndarray:
        return self.numba_engine.td_errors(batch.obs, batch.actions, batch.rewards, batch.next_obs, batch.terminated)

    def score(self, batch: Batch) -> Scores:
        return self.numba_engine.score(batch.obs, batch.actions, batch.rewards, batch.next_obs, batch.terminated)

    def learn(self, batch: Batch, wait: bool = True) -> UpdateResults:
        """The results are on the host at once (``wait`` has nothing to defer)."""
        b = batch
        result = self.numba_engine.update(b.obs, b.actions, b.rewards, b.next_obs, b.terminated, b.weights)
        self.updates += 1
        return result

    def sync_target(self) -> None:
        self.numba_engine.sync_target(self.cfg.tau)

    def _loaded(self) -> None:
        self.numba_engine.loaded()
