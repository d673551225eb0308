"""The launch surface every kernel-like object shares: `kernel[grid](*args, **kwargs)`.

`JITFunction`, `Autotuner` and `Heuristics` all inherit `KernelInterface`, so a kernel
wrapped in any stack of decorators is launched, warmed up and introspected the same way
(Triton's `KernelInterface` contract). A subclass implements `run(*args, grid, warmup,
**kwargs)`; `warmup` defaults to `run(..., warmup=True)` (compile, do not launch).
"""
from __future__ import annotations

import itertools
import sys
import weakref
from functools import partial
from typing import Any, Callable, Optional

from .tracebacks import located_entry

# torch.compile support (`tegula/torch/dynamo.py` sets these once torch is loaded):
# `_torch_tracing()` says whether a launch is being traced (by Dynamo, or with fake
# tensors), and then `_torch_launcher(kernel, grid)` is the launcher that calls the
# launch's registered custom op. Read by `__getitem__` here and in `JITFunction`.
_torch_tracing: Optional[Callable[[], bool]] = None
_torch_launcher: Optional[Callable[[Any, Any], Callable[..., Any]]] = None
_torch_tracing_now: Optional[Callable[[], bool]] = None
_MODULES = sys.modules


def _probe_torch() -> bool:
    """Install `tegula.torch`'s hooks if torch was imported after tegula; returns whether
    a launch is being traced now. Dynamo runs this at trace time, as a constant (the
    attribute below is what `torch._dynamo.assume_constant_result` sets)."""
    if _torch_tracing is None and sys.modules.get("torch") is not None:
        from tegula.torch import dynamo

        dynamo.install()
    return _torch_tracing_now is not None and _torch_tracing_now()


_probe_torch._dynamo_marked_constant = True  # type: ignore[attr-defined]

# Kernels by a plain-int identity (`_tegula_key`): what torch.compile's tracing hands to
# the functions it runs at trace time, which take only constants on some torch versions
_BY_KEY: "weakref.WeakValueDictionary[int, Any]" = weakref.WeakValueDictionary()
_NEXT_KEY = itertools.count(1)


def register_kernel(kernel: Any) -> None:
    """Give `kernel` its `_tegula_key` (a new one in every process)."""
    key = next(_NEXT_KEY)
    kernel._tegula_key = key
    _BY_KEY[key] = kernel


def kernel_by_key(key: int) -> Any:
    """The kernel registered under `key` (see `register_kernel`)."""
    return _BY_KEY[key]


class KernelInterface:
    """Mixin: `self[grid]` is a launcher that calls `self.run(..., grid=grid, warmup=False)`."""

    def run(self, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement run()")

    def warmup(self, *args: Any, grid: Any, **kwargs: Any) -> Any:
        """Compile for these arguments without launching; returns the compiled kernel(s)."""
        return self.run(*args, grid=grid, warmup=True, **kwargs)

    def __setstate__(self, state: dict) -> None:
        # an unpickled kernel gets this process's identity (see `register_kernel`)
        self.__dict__.update(state)
        register_kernel(self)

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        tracing = _torch_tracing
        if tracing is None:
            if "torch" in _MODULES and _probe_torch():
                return _torch_launcher(self, grid)  # type: ignore[misc]
        elif tracing():
            return _torch_launcher(self, grid)  # type: ignore[misc]
        # Through the located entry of the kernel (see `tracebacks`): a failing launch
        # shows the user's frames only. A C-level partial adds no frame of its own.

        return partial(located_entry(self, getattr(self, "__name__", "launch")), self.run,
                       grid=grid, warmup=False)
