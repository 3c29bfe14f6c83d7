"""A call replayed as one captured CUDA graph: the torch engine's update and its greedy action. On a GPU the Atari
update and the batch-of-one forward are launch-bound (docs/engines.md), and torch's whole-call capture avoids
``torch.compile``'s long compile.

Contract: ``GraphedCall(fn, device)(arrays)`` equals ``fn(*tensors)`` on the arrays moved to the device, to float
rounding. The first ``WARMUP_CALLS`` calls run eagerly (real calls), the next captures, later calls copy into the
captured buffers and replay. ``fn`` must not synchronise with the host, and an optimizer it steps must be
``capturable``. Read the outputs before the next call; after the captured tensors are replaced (a checkpoint
load's optimizer state), call :meth:`reset`."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

WARMUP_CALLS = 3  # eager calls before the capture: cuDNN's autotuning and the optimizer's lazy state


class GraphedCall:
    def __init__(self, fn: Callable[..., tuple[torch.Tensor, ...]], device: torch.device):
        self._fn = fn
        self._device = device
        self._inputs: list[torch.Tensor] | None = None
        self._graph: torch.cuda.CUDAGraph | None = None
        self._outputs: tuple[torch.Tensor, ...] = ()
        self._eager_left = WARMUP_CALLS

    @property
    def captured(self) -> bool:
        return self._graph is not None

    def reset(self) -> None:
        """Forget the graph (its captured tensors were replaced): warm up and capture again."""
        self._graph, self._outputs, self._eager_left = None, (), WARMUP_CALLS

    def __call__(self, arrays: Sequence[np.ndarray | torch.Tensor]) -> tuple[torch.Tensor, ...]:
        self._load(arrays)
        if self._graph is not None:
            self._graph.replay()
            return self._outputs
        if self._eager_left > 0:
            self._eager_left -= 1  # (eager warm-up calls on a side stream, as torch's capture wants)
            main = torch.cuda.current_stream(self._device)
            side = torch.cuda.Stream(self._device)
            side.wait_stream(main)
            with torch.cuda.stream(side):
                outputs = self._fn(*self._inputs)
            main.wait_stream(side)
            return outputs
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self._outputs = self._fn(*self._inputs)
        self._graph = graph
        graph.replay()  # capturing ran nothing: this is the call
        return self._outputs

    def _load(self, arrays: Sequence[np.ndarray | torch.Tensor]) -> None:
        """Copy the inputs into the static device buffers (made on the first call, from their shapes and dtypes);
        an input may be a tensor on the device already (frames gathered there: a device-to-device copy) or in
        pinned host memory (an asynchronous copy)."""
        hosts = [a if isinstance(a, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(a)) for a in arrays]
        if self._inputs is None:
            self._inputs = [torch.empty(h.shape, dtype=h.dtype, device=self._device) for h in hosts]
        for static, host in zip(self._inputs, hosts, strict=True):
            if static.shape != host.shape or static.dtype != host.dtype:
                raise ValueError(
                    f"a CUDA-graphed call takes inputs of one shape: got {tuple(host.shape)} {host.dtype}, "
                    f"captured {tuple(static.shape)} {static.dtype} (set agent.cuda_graph: false)"
                )
            static.copy_(host, non_blocking=True)


def match_capturable(optimizer: torch.optim.Optimizer, capturable: bool) -> None:
    """Make a loaded optimizer state fit this agent: a checkpoint saved by a graphed (capturable) update resumes
    eagerly or on a CPU, and one saved eagerly resumes under a graph. torch places each parameter's ``step`` by
    the *saved* group's flags, so the flag and the steps' device are set here."""
    for group in optimizer.param_groups:
        if "capturable" not in group:
            continue
        group["capturable"] = capturable
        on_device = capturable or bool(group.get("fused"))
        for param in group["params"]:
            state = optimizer.state.get(param, {})
            step = state.get("step")
            if isinstance(step, torch.Tensor):
                state["step"] = step.to(param.device if on_device else "cpu", torch.float32)
