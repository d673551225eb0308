"""The launch surface every kernel-like object shares: `kernel[grid](*args, **kwargs)`.

`JITFunction`, `Autotuner` and `Heuristics` all inherit `KernelInterface`, so a kernel
wrapped in any stack of decorators is launched, warmed up and introspected the same way
(Triton's `KernelInterface` contract). A subclass implements `run(*args, grid, warmup,
**kwargs)`; `warmup` defaults to `run(..., warmup=True)` (compile, do not launch).
"""
from __future__ import annotations

from typing import Any, Callable


class KernelInterface:
    """Mixin: `self[grid]` is a launcher that calls `self.run(..., grid=grid, warmup=False)`."""

    def run(self, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement run()")

    def warmup(self, *args: Any, grid: Any, **kwargs: Any) -> Any:
        """Compile for these arguments without launching; returns the compiled kernel(s)."""
        return self.run(*args, grid=grid, warmup=True, **kwargs)

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        # A closure rather than functools.partial: the launch path is hot, and a plain
        # closure with keyword splatting is the cheapest callable CPython offers here.
        def launcher(*args: Any, **kwargs: Any) -> Any:
            return self.run(*args, grid=grid, warmup=False, **kwargs)

        return launcher
