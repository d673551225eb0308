"""`triton_op` and `wrap_triton`: tegula's counterparts of `torch.library.triton_op` /
`torch.library.wrap_triton`.

`triton_op(name, mutates_args=...)` turns a Python function that allocates with torch
and launches tegula kernels into a torch operator (`torch.library.custom_op`, schema
inferred from its type hints). Its fake implementation is the function itself, run with
every launch routed through its launch op (`dynamo.routing`), whose fake does nothing:
so shapes come from the function's own torch code and no fake implementation is written
by hand. The operator takes `register_autograd`, `register_kernel`, ... like any custom
op. Unlike torch's `triton_op`, the operator stays opaque to Inductor (it is not
decomposed into its kernels); a bare launch inside a compiled function needs no wrapper
at all (`dynamo.py`).

`wrap_triton(kernel)[grid](...)` launches through the launch op whenever a launch is
traced — under torch.compile, `routing()`, or with fake / functional tensors (a
`make_fx` trace) — and directly otherwise.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Optional, Union

import torch

from . import dynamo


def triton_op(name: str, fn: Optional[Callable[..., Any]] = None, /, *,
              mutates_args: Union[str, Iterable[str]], schema: Optional[str] = None) -> Any:
    """Make `fn` (or the decorated function) the operator `name` ("namespace::op");
    returns its `torch.library.CustomOpDef`."""

    def decorate(f: Callable[..., Any]) -> Any:
        op = torch.library.custom_op(name, f, mutates_args=mutates_args, schema=schema)

        def fake(*args: Any, **kwargs: Any) -> Any:
            with dynamo.routing():
                return f(*args, **kwargs)

        op.register_fake(fake)
        return op

    return decorate(fn) if fn is not None else decorate


def _traced_tensor(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and type(value) not in (torch.Tensor, torch.nn.Parameter)


class _Wrapped:
    """What `wrap_triton` returns: `self[grid]` launches `kernel` through its op while
    the launch is being traced."""

    def __init__(self, kernel: Any):
        self.kernel = kernel

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        kernel = self.kernel

        def launcher(*args: Any, **kwargs: Any) -> Any:
            if any(_traced_tensor(a) for a in args) or any(_traced_tensor(v) for v in kwargs.values()):
                with dynamo.routing():
                    return kernel[grid](*args, **kwargs)
            return kernel[grid](*args, **kwargs)

        return launcher

    def run(self, *args: Any, **kwargs: Any) -> Any:
        return self.kernel.run(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.kernel, name)

    def __repr__(self) -> str:
        return f"wrap_triton({self.kernel!r})"


def wrap_triton(kernel: Any, /) -> Any:
    """`kernel` for launching inside traced code (see the module docstring)."""
    if not hasattr(kernel, "__getitem__"):
        raise TypeError(f"wrap_triton expects a tegula kernel, got {type(kernel).__name__}")
    return kernel if isinstance(kernel, _Wrapped) else _Wrapped(kernel)
