"""The launch surface every kernel-like object shares: `kernel[grid](*args, **kwargs)`.

`JITFunction`, `Autotuner` and `Heuristics` all inherit `KernelInterface`, so a kernel
wrapped in any stack of decorators is launched, warmed up and introspected the same way
(Triton's `KernelInterface` contract). A subclass implements `run(*args, grid, warmup,
**kwargs)`; `warmup` defaults to `run(..., warmup=True)` (compile, do not launch).
"""
from __future__ import annotations

from functools import partial
from typing import Any, Callable


class KernelInterface:
    """Mixin: `self[grid]` is a launcher that calls `self.run(..., grid=grid, warmup=False)`."""

    def run(self, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement run()")

    def warmup(self, *args: Any, grid: Any, **kwargs: Any) -> Any:
        """Compile for these arguments without launching; returns the compiled kernel(s)."""
        return self.run(*args, grid=grid, warmup=True, **kwargs)

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        # Through the located entry of the kernel (see `tracebacks`): a failing launch
        # shows the user's frames only. A C-level partial adds no frame of its own.
        from .tracebacks import located_entry

        return partial(located_entry(self, getattr(self, "__name__", "launch")), self.run,
                       grid=grid, warmup=False)
