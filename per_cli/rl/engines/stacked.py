"""The torch engine with a seed dimension: the DQN updates of S members' Q-networks in one batched torch call.

For what the numba engine does not run (CNNs, RMSProp, CUDA, ``agent.engine: torch``), :class:`StackedEngine`
stacks the members' parameters and runs loss (:func:`per_cli.rl.losses.batch_losses` under ``vmap``), gradient,
clipping and torch's optimizer step in one call; actions, TD errors and scores are one forward each. The members'
tensors become views of their rows, so their own acting, syncs and checkpoints see it. Equal to each member's own
calls to float32 rounding (tests/rl/test_stacked.py). :func:`stacked_misfit` names what it cannot handle;
:func:`stacked_refusal` also refuses where it does not pay (docs/cohorts.md); the cohort then updates one by one."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch.func import functional_call, grad, vmap

from per_cli.replay import Batch
from per_cli.replay.cohort import stacked_rows
from per_cli.rl.losses import batch_losses, next_values, per_sample_loss, td_targets
from per_cli.rl.results import Scores, UpdateResults

SUPPORTED_OPTIMIZERS: tuple[type[torch.optim.Optimizer], ...] = (torch.optim.Adam, torch.optim.RMSprop)
# optimizer flags whose state or arithmetic the stacked path does not reproduce (a fused Adam's it does: its step
# counts live on the parameters' device, where the stacked step keeps them)
_REFUSED_FLAGS = ("capturable", "differentiable")


def _group(optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """The optimizer's one parameter group (a member's optimizer with several is refused: :func:`_member_misfit`)."""
    (group,) = optimizer.param_groups
    return group


def _hyper(optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    return {k: v for k, v in _group(optimizer).items() if k != "params"}


def _shapes(module: torch.nn.Module) -> list[tuple[str, tuple[int, ...]]]:
    return [(name, tuple(p.shape)) for name, p in module.named_parameters()]


def _member_misfit(agent: Any, first: Any) -> str | None:
    """Why ``agent`` cannot be stacked with ``first`` (the cohort's member 0), or None."""
    if agent.engine != "torch":
        return f"the stacked path runs the torch engine, and a member's engine is {agent.engine}"
    same = agent.cfg == first.cfg and agent.td_loss == first.td_loss and agent.device == first.device
    if not same or type(agent.q_net) is not type(first.q_net):
        return "the members' agent settings, losses, devices or networks differ"
    if _shapes(agent.q_net) != _shapes(first.q_net) or _shapes(agent.target_net) != _shapes(first.q_net):
        return "the members' parameter shapes differ"
    optimizer = agent.optimizer
    if type(optimizer) not in SUPPORTED_OPTIMIZERS:
        return f"the stacked path steps Adam and RMSprop, not {type(optimizer).__name__}"
    if len(optimizer.param_groups) != 1 or _hyper(optimizer) != _hyper(first.optimizer):
        return "the members' optimizers differ in their parameter groups or hyperparameters"
    if any(_group(optimizer).get(flag) for flag in _REFUSED_FLAGS):
        return f"the stacked path does not reproduce a {'/'.join(_REFUSED_FLAGS)} optimizer"
    owned = [id(p) for p in agent.q_net.parameters()]
    if [id(p) for p in _group(optimizer)["params"]] != owned:
        return "a member's optimizer does not step exactly its Q-network's parameters"
    if any(True for _ in agent.q_net.buffers()):
        return "the network has buffers, which functional_call would share across members"
    return None


def stacked_misfit(agents: Sequence[Any]) -> str | None:
    """None when :class:`StackedEngine` computes for ``agents`` (torch-engine DQN agents, one or more) what their own
    ``learn`` would, else the reason why not (one human sentence)."""
    return next(filter(None, (_member_misfit(agent, agents[0]) for agent in agents)), None)


# On the CPU a stacked update pays for small networks only (larger ones run out of cache: docs/cohorts.md,
# benchmarks/stacked_update.py --crossover), and from a few members on (fewer act and update faster one by one);
# on CUDA it is always taken.
CPU_MAX_PARAMS = 100_000
CPU_MIN_MEMBERS = 4


def stacked_refusal(agents: Sequence[Any]) -> str | None:
    """None when a cohort of ``agents`` should update through :class:`StackedEngine`: it computes their own
    updates (:func:`stacked_misfit`), there are at least two, and on the CPU at least :data:`CPU_MIN_MEMBERS`
    whose networks have at most :data:`CPU_MAX_PARAMS` parameters; else why not."""
    why = stacked_misfit(agents)
    if why is not None:
        return why
    if len(agents) < 2:
        return "a single member updates on its own (a stacked update of one is slower)"
    first, *_ = agents
    if first.device.type == "cpu" and len(agents) < CPU_MIN_MEMBERS:
        return (
            f"on the CPU stacked calls over {len(agents)} members are slower than one per member (they pay from "
            f"{CPU_MIN_MEMBERS}; benchmarks/stacked_update.py)"
        )
    n_params = sum(p.numel() for p in first.q_net.parameters())
    if first.device.type == "cpu" and n_params > CPU_MAX_PARAMS:
        return (
            f"on the CPU a stacked update of {n_params:,} parameters per member is slower than one update per member "
            f"(it pays up to {CPU_MAX_PARAMS:,}; benchmarks/stacked_update.py)"
        )
    return None


_INPUTS = ("obs", "actions", "rewards", "next_obs", "terminated")  # (what δ and the scores read; an update: weights)


def _on_device(arrays: Any, device: torch.device, weighted: bool = False) -> dict[str, torch.Tensor]:
    """Batches stacked over the members (``arrays``: each field (k, B, ...)) as tensors on ``device`` (on the CPU,
    the arrays' own memory): the fields δ reads, and the IS weights where ``weighted``."""
    fields = (*_INPUTS, "weights") if weighted else _INPUTS
    return {f: torch.as_tensor(np.asarray(getattr(arrays, f)), device=device) for f in fields}


def _taken(q: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """Q(s, a) of each member's batch: ``q`` (k, B, A) at ``actions`` (k, B)."""
    return q.gather(2, actions[..., None]).squeeze(2)


def _clip_per_member(grads: list[torch.Tensor], max_norm: float) -> None:
    """``clip_grad_norm_`` for each member (row) on its own: total 2-norm over its slices of every tensor, scaled
    by ``max_norm / (norm + 1e-6)`` clamped at 1."""
    norms = torch.stack([torch.linalg.vector_norm(g.flatten(1), 2, dim=1) for g in grads], dim=1)
    coef = (max_norm / (torch.linalg.vector_norm(norms, 2, dim=1) + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(coef.view(-1, *([1] * (g.dim() - 1))))


class StackedEngine:
    """One batched torch update over a cohort's agents, which must pass :func:`stacked_misfit`. Building it moves each
    member's parameters, target and optimizer state into stacked storage, the member's tensors becoming views: build it
    after any checkpoint load."""

    def __init__(self, agents: Sequence[Any]):
        why = stacked_misfit(agents)
        if why is not None:
            raise ValueError(f"a stacked update cannot run these members: {why}")
        self.agents = list(agents)
        self._everyone = list(range(len(self.agents)))  # (``which`` naming every member in order)
        first, *_ = self.agents
        self.cfg, self.device, self.td_loss = first.cfg, first.device, first.td_loss
        self._template = copy.deepcopy(first.q_net).to("meta")  # the forward only: each call supplies the parameters
        self._names = [name for name, _ in first.q_net.named_parameters()]
        self._optimizer = type(first.optimizer)([torch.zeros(1, device=self.device)], **_hyper(first.optimizer))
        for agent in self.agents:
            _ensure_state(agent.optimizer, self._optimizer)
        member_params = [list(a.q_net.parameters()) for a in self.agents]
        member_states = [[a.optimizer.state[p] for p in ps] for a, ps in zip(self.agents, member_params, strict=True)]
        self.params = _share_all(member_params)
        self.target_params = _share_all([list(a.target_net.parameters()) for a in self.agents])
        # one dict per parameter: its state entries (step included), each stacked over the members
        self.state = [_share_entries(states) for states in zip(*member_states, strict=True)]
        self._batched_q = vmap(self._q_values)
        self._batched_grad = vmap(grad(self._member_loss, has_aux=True))  # ({name: gradient}, (loss, Q(s, a)))

    def _q_values(self, params: dict[str, torch.Tensor], obs: torch.Tensor) -> torch.Tensor:
        return functional_call(self._template, params, (obs,))

    def _member_loss(self, params, obs, actions, target, weights) -> tuple[torch.Tensor, tuple]:
        """One member's loss as :meth:`~per_cli.rl.agent.DQNAgent.learn` computes it; (loss, (loss, Q(s, a), each
        sample's loss as the loss counts it: ``batch_losses``' samples))."""
        q = self._q_values(params, obs).gather(1, actions[:, None]).squeeze(1)
        losses = batch_losses(q, target, weights, self.td_loss)
        return losses.value, (losses.value, q, losses.samples)

    def _member_rows(self, which: Sequence[int]) -> torch.Tensor | None:
        """The stacked rows of members ``which`` (None: every member, in order: the stacked tensors themselves)."""
        return None if list(which) == self._everyone else torch.tensor(which, device=self.device)

    def _named(self, stacked: list[torch.Tensor], rows: torch.Tensor | None) -> dict[str, torch.Tensor]:
        return dict(zip(self._names, (_rows(p, rows) for p in stacked), strict=True))

    @torch.inference_mode()
    def greedy(self, which: Sequence[int], obs: np.ndarray) -> list[int]:
        """Members ``which`` each's argmax_a Q(s, a) of its row of ``obs`` under its online network (the first of
        tied maxima, as its own ``greedy_action``), in one batched forward."""
        rows = self._member_rows(which)
        x = torch.as_tensor(np.asarray(obs), device=self.device)[:, None]
        return self._batched_q(self._named(self.params, rows), x)[:, 0].argmax(dim=1).tolist()

    @torch.no_grad()
    def td_errors(self, which: Sequence[int], arrays: Any) -> np.ndarray:
        """δ of members ``which``'s batches (``arrays``: Batch's fields stacked over them, row k member
        ``which[k]``'s) without learning, as each member's own ``td_errors``: (k, B)."""
        b, params, _, target = self._inputs(which, arrays)
        return (target - _taken(self._batched_q(params, b["obs"]), b["actions"])).cpu().numpy()

    @torch.no_grad()
    def score(self, which: Sequence[int], arrays: Any) -> Scores:
        """The networks' :class:`~per_cli.rl.results.Scores` of members ``which``'s batches, nothing learnt, as each
        member's own ``score``."""
        b, params, targets, target = self._inputs(which, arrays)
        q, q_target = (_taken(self._batched_q(p, b["obs"]), b["actions"]) for p in (params, targets))
        loss, target_loss = (per_sample_loss(values, target, self.td_loss) for values in (q, q_target))
        return Scores(*torch.stack([target - q, loss, target_loss]).cpu().numpy())

    def learn(self, which: Sequence[int], batches: Sequence[Batch]) -> UpdateResults:
        """Members ``which`` (distinct indices into the agents) each learn from their batch (in the order of
        ``which``), as their own ``learn`` would; returns their results in that order."""
        b, params, _, target = self._inputs(which, stacked_rows(batches), weighted=True)  # (a draw's rows: no copy)
        grads, (loss, q, samples) = self._batched_grad(params, b["obs"], b["actions"], target, b["weights"])
        grads = list(grads.values())
        if self.cfg.max_grad_norm is not None:
            _clip_per_member(grads, self.cfg.max_grad_norm)
        self._step(which, grads)
        td, losses = torch.stack([target - q, samples.detach()]).cpu().numpy()
        loss, q_mean = torch.stack([loss.detach(), q.detach().mean(dim=1)]).double().cpu().numpy()
        for i in which:
            self.agents[i].updates += 1
        return UpdateResults(td, losses, loss, q_mean)

    def _inputs(self, which: Sequence[int], arrays: Any, weighted: bool = False) -> tuple[dict, dict, dict, Any]:
        """Members ``which``'s batches on the device (``arrays``: Batch's fields stacked over them; the IS weights
        where ``weighted``), their online and target parameters, and their TD targets (no gradient flows into them)."""
        rows = self._member_rows(which)
        b = _on_device(arrays, self.device, weighted)
        params, targets = self._named(self.params, rows), self._named(self.target_params, rows)
        with torch.no_grad():
            online = self._batched_q(params, b["next_obs"]) if self.cfg.double_dqn else None
            next_q = next_values(self._batched_q(targets, b["next_obs"]), online)
            return b, params, targets, td_targets(b["rewards"], b["terminated"], next_q, self.cfg.gamma)

    @torch.no_grad()
    def _step(self, which: Sequence[int], grads: list[torch.Tensor]) -> None:
        """The optimizer step, one group of members with equal step counts at a time (the count is one scalar
        per stacked tensor in torch's optimizers): in place on the shared storage when the group is every
        member in order, else on the group's rows, copied back."""
        first, *_ = self.state  # (every parameter's step counts are the same)
        steps = first["step"].tolist()
        groups: dict[float, list[int]] = {}
        for k, i in enumerate(which):
            groups.setdefault(steps[i], []).append(k)
        for step, ks in groups.items():
            members = [which[k] for k in ks]
            if members == self._everyone:
                self._step_rows(None, step, grads)
            else:
                picked = grads if len(ks) == len(which) else [g[ks] for g in grads]
                self._step_rows(members, step, picked)

    def _step_rows(self, members: list[int] | None, step: float, grads: list[torch.Tensor]) -> None:
        """Step ``members`` (None: all, in place), whose step count is ``step``, with their ``grads`` rows."""
        optimizer = self._optimizer
        rows = None if members is None else torch.tensor(members, device=self.device)
        params = [_rows(p, rows) for p in self.params]
        states = [{k: _rows(v, rows) for k, v in s.items() if k != "step"} for s in self.state]
        _group(optimizer)["params"] = params
        for p, g, state, shared in zip(params, grads, states, self.state, strict=True):
            p.grad = g
            optimizer.state[p] = {"step": shared["step"].new_tensor(step), **state}
        optimizer.step()
        optimizer.state.clear()
        _group(optimizer)["params"] = []
        for p in params:
            p.grad = None
        for shared_p, p, shared, state in zip(self.params, params, self.state, states, strict=True):
            if rows is None:
                shared["step"].add_(1.0)
                continue
            shared_p.index_copy_(0, rows, p)
            for key, v in state.items():
                shared[key].index_copy_(0, rows, v)
            steps = shared["step"]  # (on the CPU, or a fused optimizer's on the parameters' device)
            steps.index_fill_(0, torch.tensor(members, device=steps.device), step + 1.0)


def _rows(stacked: torch.Tensor, rows: torch.Tensor | None) -> torch.Tensor:
    return stacked if rows is None else stacked.index_select(0, rows)


@torch.no_grad()
def _share(tensors: list[torch.Tensor]) -> torch.Tensor:
    """Stack ``tensors`` (one per member) and rebind each as a view of its row, keeping its identity (a module's
    parameter, an optimizer's state entry), so the member and the stacked update work on the same numbers."""
    stacked = torch.stack([t.detach() for t in tensors])
    for i, t in enumerate(tensors):
        t.data = stacked[i]
    return stacked


def _share_all(member_tensors: list[list[torch.Tensor]]) -> list[torch.Tensor]:
    """Each tensor position's members' tensors, shared (:func:`_share`): ``member_tensors[i]`` is member i's list."""
    return [_share(list(tensors)) for tensors in zip(*member_tensors, strict=True)]


def _share_entries(states: tuple[dict[str, torch.Tensor], ...]) -> dict[str, torch.Tensor]:
    """One parameter's optimizer state over the members (one dict each, the same keys): each entry shared."""
    first, *_ = states
    return {key: _share([state[key] for state in states]) for key in first}


def _ensure_state(optimizer: torch.optim.Optimizer, template: torch.optim.Optimizer) -> None:
    """Give every parameter of ``optimizer`` the state its own first step would create (zero moments, step 0)
    when it has none yet: found by stepping a throwaway optimizer of the same class and settings (``template``)
    on a zero gradient. A zero state at step 0 is what the optimizer starts from, so the numbers do not change."""
    params = _group(optimizer)["params"]
    if all(optimizer.state.get(p) for p in params):
        return
    device = params[0].device
    probe = torch.zeros(1, requires_grad=True, device=device)
    probe.grad = torch.zeros(1, device=device)
    fresh = type(template)([probe], **_hyper(template))
    fresh.step()
    entries = fresh.state[probe]
    for p in params:
        if not optimizer.state.get(p):
            optimizer.state[p] = {
                key: torch.zeros((), dtype=v.dtype, device=v.device) if key == "step" else torch.zeros_like(p)
                for key, v in entries.items()
            }
