"""`kernel[grid](...)` inside `torch.compile`: the launch becomes a registered custom op.

`install()` puts `traced_launcher` into `tegula.runtime.kernel_interface`, which the
`__getitem__` of every kernel (JITFunction, autotuned, heuristic) reads. `kernel[grid]` asks it first: while
Dynamo traces (`torch.compiler.is_compiling()`), or while `routing()` is on (fake
tensors: `triton_op`'s fake implementation, `make_fx`, export), it answers a launcher
that calls the launch's op from `launch_ops.op_for`; otherwise None, and the ordinary
launch path runs.

Dynamo inlines `launch_as_op` (plain Python: binding the arguments, evaluating a grid
callable on the bound arguments, classifying each value), but not the two functions
that need real Python objects — `_plan` (the kernel's parameters) and `op_for` (which
compiles the kernel for its written arguments and registers the op): both are marked
`assume_constant_result`, so Dynamo runs them at trace time on constants; the op is then
looked up by name in `torch.ops.tegula` and called, which Dynamo puts into the graph.
No graph break, and no Dynamo-internal API.
"""
from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Iterator, Optional

import torch

from . import launch_ops

_routing = 0
_is_compiling = torch.compiler.is_compiling


@contextlib.contextmanager
def routing() -> Iterator[None]:
    """Route every `kernel[grid](...)` launch through its custom op (for tracing with
    fake or functional tensors outside Dynamo)."""
    global _routing
    _routing += 1
    try:
        yield
    finally:
        _routing -= 1


def traced_launcher(kernel: Any, grid: Any) -> Optional[Callable[..., Any]]:
    """The launcher `kernel[grid]` returns while tracing, or None for an ordinary launch."""
    if _is_compiling() or _routing:
        return functools.partial(launch_as_op, kernel, grid)
    return None


@torch._dynamo.assume_constant_result
def _plan(kernel: Any, nargs: int, kwnames: tuple) -> tuple:
    """For each parameter (name, is_constexpr, positional index or -1, whether it is
    given or has a default, default), and the keyword arguments that are launch options
    rather than parameters."""
    base = launch_ops.base_jit_function(kernel)
    params = base.params
    if nargs > len(params):
        raise TypeError(f"kernel '{base.__name__}' takes {len(params)} arguments, got {nargs}")
    names = {p.name for p in params}
    plan = tuple((p.name, p.is_constexpr, p.num if p.num < nargs else -1,
                  p.has_default or p.name in kwnames, p.default if p.has_default else None) for p in params)
    missing = [p.name for p in params if p.num >= nargs and p.name not in kwnames and not p.has_default]
    if missing and not hasattr(kernel, "configs"):  # an autotuner supplies its configs' values
        raise TypeError(f"kernel '{base.__name__}': missing arguments {', '.join(missing)}")
    return plan, tuple(k for k in kwnames if k not in names)


@torch._dynamo.assume_constant_result
def _op_name(kernel: Any, desc: tuple, options: tuple) -> str:
    """The name of the launch's op in `torch.ops.tegula` (registered on first use). A
    string, because Dynamo guards a constant result by value: the op itself is then
    looked up by name in traced code, where Dynamo knows `torch.ops`."""
    return launch_ops.op_for(kernel, desc, options).__name__.split(".")[0]


def launch_as_op(kernel: Any, grid: Any, *args: Any, **kwargs: Any) -> None:
    """Launch through the kernel's op (traced by Dynamo; see the module docstring)."""
    plan, option_names = _plan(kernel, len(args), tuple(kwargs))
    meta = {}
    desc = []
    runtime = []
    for name, constexpr, pos, present, default in plan:
        if pos >= 0:
            v = args[pos]
        elif name in kwargs:
            v = kwargs[name]
        elif present:
            v = default
        else:  # left to an autotuner's configs
            desc.append(("m",))
            continue
        meta[name] = v
        if isinstance(v, torch.Tensor):
            desc.append(("t", v.dtype))
            runtime.append(v)
        elif constexpr or v is None:
            if isinstance(v, torch.SymInt):
                v = int(v)  # a constexpr is a compile-time value: specialize on it
            desc.append(("c", v))
        elif isinstance(v, bool):
            desc.append(("b",))
            runtime.append(v)
        elif isinstance(v, (int, torch.SymInt)):
            desc.append(("i",))
            runtime.append(v)
        elif isinstance(v, (float, torch.SymFloat)):
            desc.append(("f",))
            runtime.append(v)
        else:
            desc.append(("c", v))
    options = []
    for k in option_names:
        meta[k] = kwargs[k]
        options.append((k, kwargs[k]))
    op = getattr(torch.ops.tegula, _op_name(kernel, tuple(desc), tuple(sorted(options)))).default
    if callable(grid):
        grid = grid(meta)
    if not isinstance(grid, (tuple, list)):
        grid = (grid,)
    gx = grid[0] if len(grid) > 0 else 1
    gy = grid[1] if len(grid) > 1 else 1
    gz = grid[2] if len(grid) > 2 else 1
    op(gx, gy, gz, *runtime)


def install() -> None:
    """Make `kernel[grid]` consult `traced_launcher` (idempotent)."""
    from ..runtime import kernel_interface

    kernel_interface._torch_launcher = traced_launcher
