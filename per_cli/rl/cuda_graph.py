"""The torch engine's update replayed as one captured CUDA graph: on a GPU the Atari update is launch-bound
(docs/engines.md), and torch's whole-network capture avoids ``torch.compile``'s long compile.

Contract: ``GraphedUpdate(step, device)(arrays)`` equals ``step(*tensors)`` on the arrays moved to the device, to
float rounding. The first ``WARMUP_UPDATES`` calls run eagerly (real updates), the next captures, later calls copy
into the captured buffers and replay. ``step`` must not synchronise with the host and its optimizer must be
``capturable``. Read the outputs before the next call; after the captured tensors are replaced (a checkpoint
load), call :meth:`reset`."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

WARMUP_UPDATES = 3  # eager calls before the capture: cuDNN's autotuning and the optimizer's lazy state


class GraphedUpdate:
    def __init__(self, step: Callable[..., tuple[torch.Tensor, ...]], device: torch.device):
        self._step = step
        self._device = device
        self._inputs: list[torch.Tensor] | None = None
        self._graph: torch.cuda.CUDAGraph | None = None
        self._outputs: tuple[torch.Tensor, ...] = ()
        self._eager_left = WARMUP_UPDATES

    @property
    def captured(self) -> bool:
        return self._graph is not None

    def reset(self) -> None:
        """Forget the graph (its captured tensors were replaced): warm up and capture again."""
        self._graph, self._outputs, self._eager_left = None, (), WARMUP_UPDATES

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
                outputs = self._step(*self._inputs)
            main.wait_stream(side)
            return outputs
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self._outputs = self._step(*self._inputs)
        self._graph = graph
        graph.replay()  # capturing ran nothing: this is the update
        return self._outputs

    def _load(self, arrays: Sequence[np.ndarray | torch.Tensor]) -> None:
        """Copy the batch into the static device buffers (made on the first call, from its shapes and dtypes);
        an array may be a tensor on the device already (frames gathered there: a device-to-device copy)."""
        hosts = [a if isinstance(a, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(a)) for a in arrays]
        if self._inputs is None:
            self._inputs = [torch.empty(h.shape, dtype=h.dtype, device=self._device) for h in hosts]
        for static, host in zip(self._inputs, hosts, strict=True):
            if static.shape != host.shape or static.dtype != host.dtype:
                raise ValueError(
                    f"a CUDA-graphed update takes batches of one shape: got {tuple(host.shape)} {host.dtype}, "
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
