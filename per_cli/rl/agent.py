"""DQN agents: the interface the loop acts and learns through (:class:`DQNAgent`) and its torch engine
(:class:`TorchAgent`, any network on any device: the reference). The numba engine
(:class:`~per_cli.rl.engines.numba_agent.NumbaAgent`) implements the same interface for ReLU MLPs on the CPU, to
float32 rounding; :func:`per_cli.rl.engines.make_agent` picks one per run."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, NamedTuple

import numpy as np
import torch
from torch import nn

from per_cli.config import AgentConfig
from per_cli.replay import Batch
from per_cli.rl.acting import GreedyAction
from per_cli.rl.cuda_graph import GraphedCall, match_capturable
from per_cli.rl.explore import OneMember
from per_cli.rl.losses import TDLoss, batch_losses, next_values, per_sample_loss, td_targets
from per_cli.rl.networks import make_q_network
from per_cli.rl.results import Scores, UpdateResults

# The MinAtar paper's RMSProp (Young & Tian 2019; their code's torch.optim.RMSprop call): squared-gradient
# momentum 0.95, "min squared gradient" 0.01 added to the denominator, centered.
RMSPROP_ALPHA, RMSPROP_EPS = 0.95, 0.01


def _copied(obj):
    """``obj`` with every tensor in it cloned (dicts and lists walked; a module state dict keeps its metadata)."""
    if isinstance(obj, torch.Tensor):
        return obj.clone()
    if isinstance(obj, dict):
        out = type(obj)((key, _copied(value)) for key, value in obj.items())
        if hasattr(obj, "_metadata"):
            out._metadata = obj._metadata
        return out
    if isinstance(obj, list):
        return [_copied(value) for value in obj]
    return obj


class DQNAgent(ABC):
    """An online/target pair of Q-networks and their optimizer, updated by one engine (``engine``); one member
    (S = 1). Built by :func:`per_cli.rl.engines.make_agent`. What is shared lives here: ε-greedy's draw and the
    checkpoint format (the same keys under both engines, so a checkpoint loads into either)."""

    engine: ClassVar[str]  # "torch" or "numba"
    q_net: nn.Module
    target_net: nn.Module
    optimizer: Any  # a torch optimizer, or one with torch.optim.Adam's state_dict format

    def __init__(
        self,
        cfg: AgentConfig,
        obs_shape: tuple[int, ...],
        n_actions: int,
        device: torch.device,
        td_loss: TDLoss,
        engine_note: str | None = None,
    ):
        self.cfg = cfg
        self.td_loss = td_loss
        self.device = device
        self.n_actions = n_actions
        self.engine_note = engine_note
        self.updates = 0
        # explore's compiled draw on the generator it was last called with (an evaluation's, for its whole run)
        self._draw: OneMember | None = None
        self._build(obs_shape)

    @abstractmethod
    def _build(self, obs_shape: tuple[int, ...]) -> None:
        """The engine's networks (the target a copy of the online one), optimizer and whatever it updates with."""

    def _init_target(self) -> None:
        self.target_net.load_state_dict(self.q_net.state_dict())
        self.target_net.requires_grad_(False)

    def act(self, obs: np.ndarray, epsilon: float, rng: np.random.Generator) -> int:
        action = self.explore(epsilon, rng)
        return self.greedy_action(obs) if action is None else action

    def explore(self, epsilon: float, rng: np.random.Generator) -> int | None:
        """ε-greedy's draw on ``rng``: a random action with probability ε, else None (act greedily). The draw is
        :func:`per_cli.rl.explore.explore_kernel`'s, the kernel a cohort draws all its members with, so a solo run
        and a cohort member draw alike (kept per generator: built once)."""
        draw = self._draw
        if draw is None or draw.rng is not rng:
            draw = self._draw = OneMember(rng)
        action = draw(epsilon, self.n_actions)
        return None if action < 0 else action

    @abstractmethod
    def greedy_action(self, obs: np.ndarray) -> int: ...

    @abstractmethod
    def td_errors(self, batch: Batch) -> np.ndarray:
        """δ for a batch without learning (insertion-time priorities)."""

    @abstractmethod
    def score(self, batch: Batch) -> Scores:
        """The batch's :class:`~per_cli.rl.results.Scores` (S = 1) under the current networks, nothing learnt."""

    @abstractmethod
    def learn(self, batch: Batch, wait: bool = True) -> UpdateResults | DeferredResult:
        """One gradient step on the importance-weighted loss (:func:`~per_cli.rl.losses.batch_losses`); returns its
        results (S = 1). ``wait=False``: the engine may return them still on their way from the device
        (:class:`DeferredResult`: ``train.priority_lag``)."""

    @abstractmethod
    def sync_target(self) -> None:
        """Hard copy when tau == 1, else Polyak averaging θ' ← τθ + (1 − τ)θ'."""

    @abstractmethod
    def _loaded(self) -> None:
        """Called after :meth:`load_state_dict` replaced the networks' and optimizer's tensors."""

    def state_dict(self) -> dict:
        """The agent's state, its tensors copied: a cohort's stacked engine makes them views of storage shared by
        all members (:mod:`per_cli.rl.engines.stacked`), which torch.save would write whole."""
        state = {
            "q_net": self.q_net.state_dict(),
            "target_net": self.target_net.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "updates": self.updates,
        }
        return _copied(state)

    def load_state_dict(self, state: dict) -> None:
        self.q_net.load_state_dict(state["q_net"])
        self.target_net.load_state_dict(state["target_net"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates = state["updates"]
        self._loaded()


class DeferredResult:
    """An update's :class:`~per_cli.rl.results.UpdateResults` (S = 1) still on its way from the device
    (``learn(batch, wait=False)``): copied to pinned host memory behind the update without blocking, waited for when
    first read (on a CPU: views of the outputs, no copy). A graphed update's outputs are overwritten by the next
    replay, so the copy is queued before it."""

    def __init__(self, td: torch.Tensor, losses: torch.Tensor, loss: torch.Tensor, q_mean: torch.Tensor):
        self._event: torch.cuda.Event | None = None
        self._host: torch.Tensor | None = None
        self._result: UpdateResults | None = None
        if td.device.type != "cuda":
            scalars = np.array([float(loss), float(q_mean)])  # (float32 to float64: exact)
            self._result = UpdateResults(td.detach().numpy()[None], losses.detach().numpy()[None], *scalars[:, None])
            return
        values = torch.cat([td.detach(), losses.detach(), loss.detach()[None], q_mean.detach()[None]])
        self._host = values.to("cpu", non_blocking=True)
        self._event = torch.cuda.Event()
        # on the stream the copy was queued on, named by the device's index: Event.record() with no stream asks
        # torch.cuda.current_stream(), which looks the device up through torch.cuda.is_available() every time
        self._event.record(torch.cuda.current_stream(values.device.index))

    def wait(self) -> UpdateResults:
        """The update's values on the host (blocks until the copy is done, once)."""
        if self._result is None:
            self._event.synchronize()
            host = self._host.numpy()
            size = (len(host) - 2) // 2
            scalars = host[2 * size :].astype(np.float64)
            self._result = UpdateResults(host[None, :size], host[None, size : 2 * size], *scalars[:, None])
        return self._result


def make_optimizer(
    cfg: AgentConfig, params, device: torch.device | None = None, capturable: bool = False
) -> torch.optim.Optimizer:
    """Adam or the MinAtar paper's RMSProp. On CUDA, Adam is torch's fused kernel (the small Atari update is
    launch-bound on a GPU); the state dict is the same.
    ``capturable``: its step can be captured in a CUDA graph (:mod:`per_cli.rl.cuda_graph`)."""
    if cfg.optimizer == "rmsprop":
        return torch.optim.RMSprop(
            params, lr=cfg.lr, alpha=RMSPROP_ALPHA, eps=RMSPROP_EPS, centered=True, capturable=capturable
        )
    fused = device is not None and device.type == "cuda"
    return torch.optim.Adam(params, lr=cfg.lr, eps=cfg.adam_eps, fused=fused or None, capturable=capturable)


class UpdateInputs(NamedTuple):
    """A batch's arrays in ``TorchAgent._update``'s argument order (host arrays or device tensors)."""

    obs: np.ndarray | torch.Tensor
    actions: np.ndarray | torch.Tensor
    rewards: np.ndarray | torch.Tensor
    next_obs: np.ndarray | torch.Tensor
    terminated: np.ndarray | torch.Tensor
    weights: np.ndarray | torch.Tensor


class TorchAgent(DQNAgent):
    """The torch engine: autograd, torch's optimizer and ``clip_grad_norm_``; any network, any device. On CUDA with
    ``agent.cuda_graph`` the update and the greedy action are each replayed as a captured CUDA graph
    (:mod:`per_cli.rl.cuda_graph`)."""

    engine = "torch"

    def _build(self, obs_shape: tuple[int, ...]) -> None:
        cfg, device = self.cfg, self.device
        build = (cfg.network, obs_shape, self.n_actions, cfg.hidden_sizes, cfg.activation)
        self.q_net = make_q_network(*build).to(device)
        self.target_net = make_q_network(*build).to(device)
        self._init_target()
        graphed = device.type == "cuda" and cfg.cuda_graph
        self.optimizer = make_optimizer(cfg, self.q_net.parameters(), device, capturable=graphed)
        self._graph = GraphedCall(self._update, device) if graphed else None
        self._greedy = GreedyAction(self.q_net, device, graphed)
        if device.type == "cuda":
            torch.backends.cudnn.benchmark = True  # fixed batch shapes: pick the fastest conv kernels once

    def greedy_action(self, obs: np.ndarray) -> int:
        """argmax_a Q(s, a) under the online network as it is now (:class:`~per_cli.rl.acting.GreedyAction`)."""
        return self._greedy(obs)

    @torch.no_grad()
    def _targets(self, rewards: torch.Tensor, next_obs: torch.Tensor, terminated: torch.Tensor) -> torch.Tensor:
        online = self.q_net(next_obs) if self.cfg.double_dqn else None
        return td_targets(rewards, terminated, next_values(self.target_net(next_obs), online), self.cfg.gamma)

    def _inputs(self, batch: Batch) -> UpdateInputs:
        """The batch's arrays in ``_update``'s argument order (host arrays or device tensors); its stacks gathered on
        the device already where the memory keeps its frames there (``batch.device_stacks``)."""
        obs, next_obs = batch.obs, batch.next_obs
        stacks = batch.device_stacks
        if stacks is not None and stacks.obs.device.type == self.device.type:
            obs, next_obs = stacks.obs, stacks.next_obs
        return UpdateInputs(obs, batch.actions, batch.rewards, next_obs, batch.terminated, batch.weights)

    def _on_device(self, batch: Batch) -> UpdateInputs:
        return UpdateInputs(*(torch.as_tensor(a, device=self.device) for a in self._inputs(batch)))

    @torch.no_grad()
    def td_errors(self, batch: Batch) -> np.ndarray:
        obs, actions, rewards, next_obs, terminated, _ = self._on_device(batch)
        q = self.q_net(obs).gather(1, actions[:, None]).squeeze(1)
        return (self._targets(rewards, next_obs, terminated) - q).cpu().numpy()

    @torch.no_grad()
    def score(self, batch: Batch) -> Scores:
        obs, actions, rewards, next_obs, terminated, _ = self._on_device(batch)
        target = self._targets(rewards, next_obs, terminated)
        q, q_target = (net(obs).gather(1, actions[:, None]).squeeze(1) for net in (self.q_net, self.target_net))
        loss, target_loss = (per_sample_loss(values, target, self.td_loss) for values in (q, q_target))
        td, loss, target_loss = torch.stack([target - q, loss, target_loss])[:, None].cpu().numpy()
        return Scores(td, loss, target_loss)

    def learn(self, batch: Batch, wait: bool = True) -> UpdateResults | DeferredResult:
        """Each sample's loss is weighted before the mean (and the mean divided by PAL's λ)."""
        graphed = self._graph is not None
        outputs = self._graph(self._inputs(batch)) if graphed else self._update(*self._on_device(batch))
        self.updates += 1
        deferred = DeferredResult(*outputs)
        return deferred if not wait else deferred.wait()

    def _update(self, obs, actions, rewards, next_obs, terminated, weights) -> tuple[torch.Tensor, ...]:
        """The torch update on device tensors: (δ, each sample's loss without its IS weight as the loss counts it:
        ``batch_losses``' samples, loss, mean Q), all on the device (no host synchronisation, so a CUDA graph can
        capture it)."""
        q = self.q_net(obs).gather(1, actions[:, None]).squeeze(1)
        target = self._targets(rewards, next_obs, terminated)
        losses = batch_losses(q, target, weights, self.td_loss)
        self.optimizer.zero_grad(set_to_none=True)
        losses.value.backward()
        if self.cfg.max_grad_norm is not None:
            nn.utils.clip_grad_norm_(self.q_net.parameters(), self.cfg.max_grad_norm)
        self.optimizer.step()
        q = q.detach()
        return target - q, losses.samples.detach(), losses.value.detach(), q.mean()

    def sync_target(self) -> None:
        if self.cfg.tau >= 1.0:
            self.target_net.load_state_dict(self.q_net.state_dict())
            return
        with torch.no_grad():
            for target, online in zip(self.target_net.parameters(), self.q_net.parameters(), strict=True):
                target.lerp_(online, self.cfg.tau)

    def _loaded(self) -> None:
        match_capturable(self.optimizer, self._graph is not None)
        if self._graph is not None:
            self._graph.reset()  # the optimizer's state tensors are new
        self._greedy.reset()  # (the network's are loaded in place: captured again all the same)
