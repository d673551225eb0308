"""`kernel[grid](...)` inside `torch.compile`: the launch becomes a registered custom op.

`install()` puts `tracing` and `traced_launcher` into `tegula.runtime.kernel_interface`,
which the `__getitem__` of every kernel (JITFunction, autotuned, heuristic) reads: while
torch compiles or exports (`torch.compiler.is_compiling()`), or while `routing()` is on
(fake tensors: `triton_op`'s fake implementation, `make_fx`), `kernel[grid]` is a
launcher that calls the launch's op from `launch_ops.op_for`; otherwise the ordinary
launch path runs.

Dynamo inlines `launch_as_op` (plain Python: binding the arguments, evaluating a grid
callable on the bound arguments, classifying each value), but not the two functions
that need real Python objects — `_plan` (the kernel's parameters) and `op_for` (which
compiles the kernel for its written arguments and registers the op): both are marked
`assume_constant_result`, so Dynamo runs them at trace time on constants; the op is then
looked up by name in `torch.ops.tegula` and called, which Dynamo puts into the graph:
no graph break. (Besides public APIs, `tracing` reads `torch.compiler._is_compiling_flag`
where torch holds it through compilation, to keep the eager launch path cheap.)
"""
from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Iterator

import torch

from ..language.dtypes import dtype as _tl_dtype
from ..language.dtypes import str_to_ty
from ..runtime.args import TensorWrapper
from ..runtime.kernel_interface import kernel_by_key
from . import launch_ops

_routing = 0
_compiler = torch.compiler


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


def tracing() -> bool:
    """Whether launches now go through their ops: under `routing()`, or while torch
    compiles or exports (the flag behind `torch.compiler.is_compiling()`, which torch
    holds for a whole compile session). Marked like `assume_constant_result`: Dynamo
    calls it for real at trace time (True) instead of tracing it, so it never guards on
    the flag; in eager mode it is one cheap call on every launch."""
    return bool(_routing) or _compiler._is_compiling_flag


tracing._dynamo_marked_constant = True  # type: ignore[attr-defined]


def traced_launcher(kernel: Any, grid: Any) -> Callable[..., Any]:
    """The launcher `kernel[grid]` returns while `tracing()`."""
    return functools.partial(launch_as_op, kernel, grid)


def _plain(value: Any) -> bool:
    return value is None or type(value) in (bool, int, float, str)


# a tl dtype handed to `_op_name` as a constant: (this mark, its name)
_DTYPE_MARK = "\x00tegula.dtype"


def _constant_form(v: Any) -> Any:
    """A constexpr object as the trace-time functions take it: some torch versions pass
    them constants only, so a tl dtype goes by its name (see `_decode`)."""
    if type(v) is _tl_dtype:
        return (_DTYPE_MARK, v.name)
    return v


def _decode(v: Any) -> Any:
    if isinstance(v, tuple) and len(v) == 2 and v[0] == _DTYPE_MARK:
        return str_to_ty(v[1])
    return v


def _plan(key: int, nargs: int, kwnames: tuple) -> tuple:
    """What a launch of the kernel registered under `key` (`_tegula_key`) with `nargs`
    positional arguments and these keywords
    needs: (what, parameters, option names, configs). `what` is "heuristics" for a
    `@heuristics` kernel (its values are computed in traced code, then its `fn`
    launched), else "launch". Each parameter is (name, is_constexpr, positional index or
    -1, whether it is given or has a default, default); the options are the keywords that
    are not parameters; configs are an autotuner's `Config.all_kwargs()` as sorted pairs."""
    kernel = kernel_by_key(key)
    if hasattr(kernel, "values") and hasattr(kernel, "fn") and not hasattr(kernel, "configs"):
        return "heuristics", (), (), ()
    base = launch_ops.base_jit_function(kernel)
    params = base.params
    if nargs > len(params):
        raise TypeError(f"kernel '{base.__name__}' takes {len(params)} arguments, got {nargs}")
    names = {p.name for p in params}
    # a default that is not a plain value (a tl dtype, say) is left to the kernel itself
    plan = tuple((p.name, p.is_constexpr, p.num if p.num < nargs else -1,
                  (p.has_default and _plain(p.default)) or p.name in kwnames,
                  p.default if p.has_default and _plain(p.default) else None) for p in params)
    configs = tuple(tuple(sorted(c.all_kwargs().items())) for c in getattr(kernel, "configs", ()))
    missing = [p.name for p in params if p.num >= nargs and p.name not in kwnames and not p.has_default]
    if missing and not configs:
        raise TypeError(f"kernel '{base.__name__}': missing arguments {', '.join(missing)}")
    return "launch", plan, tuple(k for k in kwnames if k not in names), configs


def _op_name(key: int, desc: tuple, options: tuple, configs: tuple, *objects: Any) -> str:
    """The name of the launch's op in `torch.ops.tegula` (registered on first use). A
    string, because Dynamo guards a constant result by value: the op itself is then
    looked up by name in traced code, where Dynamo knows `torch.ops`. Constexpr values
    that are not plain Python values (a tl dtype, a tuple) come as `objects`, referred to
    from `desc` as ("o", index): Dynamo hands over objects only as whole arguments (tl
    dtypes by name, `_constant_form`). The kernel comes as its `_tegula_key`."""
    kernel = kernel_by_key(key)
    objects = tuple(_decode(o) for o in objects)
    desc = tuple(("c", objects[d[1]]) if d[0] == "o" else ("w", objects[d[1]]) if d[0] == "w" else d
                 for d in desc)
    return launch_ops.op_for(kernel, desc, options, configs).__name__.split(".")[0]


# Dynamo runs these two at trace time on constants (`torch._dynamo.assume_constant_result`
# sets this attribute; setting it directly keeps `import torch._dynamo`, seconds, out of
# `import tegula`).
_plan._dynamo_marked_constant = True  # type: ignore[attr-defined]
_op_name._dynamo_marked_constant = True  # type: ignore[attr-defined]


def _grid3(grid: Any, meta: dict) -> list:
    if callable(grid):
        grid = grid(meta)
    if not isinstance(grid, (tuple, list)):
        grid = (grid,)
    return [grid[0] if len(grid) > 0 else 1, grid[1] if len(grid) > 1 else 1, grid[2] if len(grid) > 2 else 1]


def _specialize(v: int) -> int:
    """`v` as a Python int. A constexpr is a compile-time value, but Dynamo may have made
    an int argument symbolic (automatic dynamic shapes); taking the length of a range
    makes it guard on the value and hand back a constant (`int(v)` stays symbolic)."""
    return len(range(v)) if v >= 0 else -len(range(-v))


def launch_as_op(kernel: Any, grid: Any, *args: Any, **kwargs: Any) -> None:
    """Launch through the kernel's op (traced by Dynamo; see the module docstring)."""
    what, plan, option_names, configs = _plan(kernel._tegula_key, len(args), tuple(kwargs))
    if what == "heuristics":
        named = dict(zip(kernel.arg_names, args))
        named.update(kwargs)
        for name, heuristic in kernel.values.items():
            kwargs[name] = heuristic(named)
        return launch_as_op(kernel.fn, grid, *args, **kwargs)
    meta = {}
    desc = []
    runtime = []
    objects = []
    for name, constexpr, pos, present, default in plan:
        if pos >= 0:
            v = args[pos]
        elif name in kwargs:
            v = kwargs[name]
        elif present:
            v = default
        else:  # left to the kernel's own default or an autotuner's configs
            desc.append(("m",))
            continue
        meta[name] = v
        if isinstance(v, torch.Tensor):
            desc.append(("t", v.dtype))
            runtime.append(v)
        elif isinstance(v, TensorWrapper) and isinstance(v.base, torch.Tensor):
            # tegula.reinterpret(x, dtype): the op takes x and re-wraps it
            desc.append(("w", len(objects)))
            objects.append(_constant_form(v.dtype))
            runtime.append(v.base)
        elif constexpr or v is None:
            if isinstance(v, int) and not isinstance(v, bool):
                v = _specialize(v)
            if v is None or isinstance(v, (bool, int, float, str)):
                desc.append(("c", v))
            else:
                desc.append(("o", len(objects)))
                objects.append(_constant_form(v))
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
            desc.append(("o", len(objects)))
            objects.append(_constant_form(v))
    options = []
    for k in option_names:
        meta[k] = kwargs[k]
        options.append((k, kwargs[k]))
    name = _op_name(kernel._tegula_key, tuple(desc), tuple(sorted(options)), configs, *objects)
    op = getattr(torch.ops.tegula, name).default
    if configs and callable(grid):
        grids = []
        for config in configs:
            grids.extend(_grid3(grid, {**meta, **dict(config)}))
    else:
        grids = _grid3(grid, meta)
    op(grids, *runtime)


def install() -> None:
    """Make `kernel[grid]` consult `tracing` and `traced_launcher`. While Dynamo traces
    (this runs from `kernel_interface._probe_torch` when torch was imported after
    tegula), `_torch_tracing` stays None: Dynamo guards the value it read, and a later
    launch outside the trace completes the installation."""
    from ..runtime import kernel_interface

    # torch keeps the flag set through a compile session only since its
    # `_compile_session_context`; before, only the traced `is_compiling()` is reliable
    fast = hasattr(_compiler, "_compile_session_context") and hasattr(_compiler, "_is_compiling_flag")
    kernel_interface._torch_launcher = traced_launcher
    kernel_interface._torch_tracing_now = tracing if fast else _slow_tracing
    if not torch.compiler.is_compiling():
        kernel_interface._torch_tracing = tracing if fast else _slow_tracing


def _slow_tracing() -> bool:
    """`tracing` through the public `is_compiling` (slower: two more calls)."""
    return bool(_routing) or torch.compiler.is_compiling()
