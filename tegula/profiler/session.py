"""Profiling sessions: the tree of scopes and kernels one `start()` records, its clocks,
and the `.hatchet` file `finalize()` writes.

A session's data is a tree of nodes (ROOT, then user scopes and kernel launches, in the
order first seen). Every node keeps `count` and `time (ns)`, plus whatever numeric
metrics scopes and `launch_metadata` attach (`flops16`, `bytes`, ...), summed over its
occurrences. Times are measured, never made up:

- a kernel launched on the CPU (interpreter, CPU backend) runs synchronously, so its time
  is `perf_counter` around the launch;
- a kernel on a CUDA device gets a pair of CUDA events recorded on the current stream
  around the launch (the active driver's: torch's when torch is present, else
  cuda-bindings'); they are read when the session is deactivated or finalized, so
  timing never synchronizes the device per launch;
- a scope's time is its elapsed time: CUDA events on the current stream when a GPU is
  in use (so kernels of other libraries inside it count too), else `perf_counter`.
  A scope's time is inclusive of what ran inside it; ROOT's is the sum of its
  children's.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any, Optional

from .. import __triton_version__, __version__

TIME = "time (ns)"
COUNT = "count"


class Node:
    """One frame of the tree: a scope, a kernel, or ROOT."""

    __slots__ = ("name", "kind", "children", "metrics")

    def __init__(self, name: str, kind: str):
        self.name = name
        self.kind = kind
        self.children: dict[tuple[str, str], Node] = {}
        self.metrics: dict[str, float] = {}

    def child(self, name: str, kind: str) -> "Node":
        node = self.children.get((name, kind))
        if node is None:
            node = self.children[(name, kind)] = Node(name, kind)
        return node

    def add(self, metric: str, value: float) -> None:
        self.metrics[metric] = self.metrics.get(metric, 0) + value

    def add_metrics(self, metrics: Optional[dict]) -> None:
        for k, v in (metrics or {}).items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                self.add(k, v)

    def to_json(self) -> dict[str, Any]:
        children = [c.to_json() for c in self.children.values()]
        metrics = dict(self.metrics)
        if self.kind == "root":
            metrics[TIME] = sum(c["metrics"].get(TIME, 0) for c in children)
        return {"frame": {"name": self.name, "type": self.kind}, "metrics": metrics, "children": children}


def gpu_event_class() -> Any:
    """The CUDA event class that times the current stream, when a GPU is in use: torch's
    when torch has initialized CUDA, else tegula's cuda-bindings one once the CUDA backend
    has run; None on a host-only run."""
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            return torch.cuda.Event
    except Exception:  # a torch without CUDA
        pass
    cuda = sys.modules.get("tegula.backends.cuda.driver")
    if cuda is not None and cuda.is_usable():
        return cuda.Event
    return None


def kernel_event_class() -> Any:
    """The event class for a kernel launched on the GPU (the active driver's)."""
    from ..runtime import driver

    return driver.active.get_device_interface().Event


class Timer:
    """Elapsed time of one interval: CUDA events on the current stream (`event` the event
    class) or, with None, perf_counter."""

    __slots__ = ("events", "t0", "ns")

    def __init__(self, event: Any = None):
        self.ns: Optional[float] = None
        self.events = None
        if event is not None:
            self.events = (event(enable_timing=True), event(enable_timing=True))
            self.events[0].record()
        self.t0 = time.perf_counter()

    def stop(self) -> None:
        if self.events is not None:
            self.events[1].record()
        else:
            self.ns = (time.perf_counter() - self.t0) * 1e9

    def read(self) -> float:
        if self.ns is None:
            self.events[1].synchronize()  # type: ignore[index]
            self.ns = self.events[0].elapsed_time(self.events[1]) * 1e6  # type: ignore[index]
        return self.ns


class Session:
    """What one `proton.start(...)` records (see the module docstring)."""

    def __init__(self, sid: int, name: str, context: str, hook: Optional[str], backend: Any, mode: Any):
        self.id = sid
        self.name = name
        self.context = context
        self.hook = hook
        self.backend, self.mode = backend, mode
        self.active = True
        self.root = Node("ROOT", "root")
        self._stacks: dict[int, list[Node]] = {}
        self._pending: list[tuple[Node, Timer]] = []
        self._lock = threading.Lock()

    def stack(self) -> list[Node]:
        tid = threading.get_ident()
        stack = self._stacks.get(tid)
        if stack is None:
            stack = self._stacks[tid] = [self.root]
        return stack

    def record(self, node: Node, timer: Timer) -> None:
        """Count one occurrence of `node`, timed by `timer` (read later if on the GPU)."""
        node.add(COUNT, 1)
        if timer.ns is not None:
            node.add(TIME, timer.ns)
        else:
            with self._lock:
                self._pending.append((node, timer))

    def flush(self) -> None:
        """Read every pending CUDA event pair into its node."""
        with self._lock:
            pending, self._pending = self._pending, []
        for node, timer in pending:
            node.add(TIME, timer.read())

    def path(self) -> str:
        name = self.name
        return name if os.path.splitext(name)[1] else name + ".hatchet"

    def write(self) -> str:
        self.flush()
        info = {"tegula": {"version": __version__, "triton_api": __triton_version__,
                           "context": self.context, "hook": self.hook,
                           "clock": "cuda events on the current stream, else perf_counter"}}
        path = self.path()
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump([self.root.to_json(), info], f, indent=1)
        os.replace(tmp, path)
        return path
