"""The launch surface every kernel-like object shares: `kernel[grid](*args, **kwargs)`.

`JITFunction`, `Autotuner` and `Heuristics` all inherit `KernelInterface`, so a kernel
wrapped in any stack of decorators is launched, warmed up and introspected the same way
(Triton's `KernelInterface` contract). A subclass implements `run(*args, grid, warmup,
**kwargs)`; `warmup` defaults to `run(..., warmup=True)` (compile, do not launch).
"""
from __future__ import annotations

import sys
from typing import Any, Callable, Optional

# torch.compile support (`tegula/torch/dynamo.py`): once torch is loaded, a function
# `(kernel, grid) -> launcher or None` answering, while a launch is being traced, a
# launcher that calls the launch's registered custom op, and None otherwise. Read by
# `__getitem__` here and in `JITFunction`.
_torch_launcher: Optional[Callable[[Any, Any], Any]] = None


def _probe_torch() -> Optional[Callable[[Any, Any], Any]]:
    """Install `tegula.torch`'s launch hook if torch was imported after tegula; returns
    the hook, or None without torch. Dynamo runs this at trace time as a constant (the
    attribute below is what `torch._dynamo.assume_constant_result` sets)."""
    if _torch_launcher is None and "torch" in sys.modules:
        import tegula.torch  # noqa: F401  (installs the hook)
    return _torch_launcher


_probe_torch._dynamo_marked_constant = True  # type: ignore[attr-defined]


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
        hook = _torch_launcher or _probe_torch()
        if hook is not None:
            traced = hook(self, grid)
            if traced is not None:
                return traced

        def launcher(*args: Any, **kwargs: Any) -> Any:
            return self.run(*args, grid=grid, warmup=False, **kwargs)

        return launcher
