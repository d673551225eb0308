"""One torch custom op per kernel launch specialization.

A launch `kernel[grid](*args, **kwargs)` on torch tensors is described by a *launch
description*: for each kernel parameter, in order, what was passed —

    ("t", dtype)     a tensor (its elements' torch dtype)
    ("w", dtype)     a tensor seen as another dtype (`tegula.reinterpret(x, dtype)`)
    ("i",) ("f",) ("b",)   a runtime int / float / bool scalar
    ("c", value)     a constexpr parameter (or a None argument) and its value
    ("m",)           not passed: the kernel's own default (one that is not a plain
                     Python value), or an autotuner's configs, supply it

— plus the launch options (`num_warps`, `num_stages`, ...), as sorted `(name, value)`
pairs. For each (kernel, description, options) `op_for` registers, once, an operator

    tegula::axpy_kernel_0e0547fbc263(SymInt[] grid, Tensor x_ptr, Tensor y_ptr,
                                     Tensor(a2!) out_ptr, SymInt n, float alpha) -> ()

whose arguments are the grid (x, y, z; for an autotuned kernel, one grid per config, as
the grid may depend on the config) and the runtime parameters, and whose mutable tensors are
exactly the pointer arguments tegula's written-args analysis
(`tegula.passes.written_args`) says the kernel may store to or update atomically. Its
real implementation launches the kernel (`kernel.run`, any device); its fake
implementation does nothing (a launch returns nothing and never changes a shape). So
Dynamo, AOTAutograd (which functionalizes the mutation) and Inductor treat the launch
like any other mutating operator, and the graph does not break.

The op name hashes the kernel's source key, so a name means the same kernel in every
process (Inductor's FX graph cache keys on it).
"""
from __future__ import annotations

import hashlib
import re
import threading
from typing import Any, Callable

import torch

from ..runtime.args import TensorWrapper

_NAMESPACE = "tegula"
_lib: Any = None
_ops: dict[tuple, Any] = {}
_lock = threading.Lock()

# stand-in values for runtime scalars when the written-args analysis compiles the kernel:
# an int that is neither 1 nor a multiple of 16 gets no specialization, so the analysed
# kernel is the most general one (its written set contains every specialization's)
_GENERIC = {"i": 3, "f": 0.5, "b": True}
_SCHEMA_TYPES = {"t": "Tensor", "w": "Tensor", "i": "SymInt", "f": "float", "b": "bool"}
# parameter names renamed (with a trailing "_") in schemas: the grid's own name, and the
# names torch gives a meaning to (`self` of methods, `out` of out= variants)
_RESERVED = {"grid", "self", "out"}


def _library() -> Any:
    global _lib
    if _lib is None:
        _lib = torch.library.Library(_NAMESPACE, "FRAGMENT")
    return _lib


def base_jit_function(kernel: Any) -> Any:
    """The JITFunction under any stack of `autotune` / `heuristics` wrappers."""
    seen = 0
    while not getattr(kernel, "_tegula_jit", False) and hasattr(kernel, "fn") and seen < 16:
        kernel, seen = kernel.fn, seen + 1
    return kernel


def written_tensor_params(kernel: Any, names: list[str], desc: tuple, options: tuple,
                          configs: tuple = ()) -> set[str]:
    """Names of the tensor parameters the launch may write: the written-args analysis of
    the kernel compiled for these dtypes and constexprs (for an autotuner, the union over
    its configs, plus its `reset_to_zero` arguments). Where some constexpr is unknown
    (a heuristic computes it, say), every tensor counts as written."""
    tensors = {n for n, d in zip(names, desc) if d[0] in ("t", "w")}
    base = base_jit_function(kernel)
    if base is kernel:
        settings = [()]
    elif getattr(kernel, "fn", None) is base and hasattr(kernel, "configs"):
        settings = list(configs) or [()]
    else:
        return tensors
    written = set(getattr(kernel, "reset_to_zero", ()))
    for setting in settings:
        given = dict(setting)
        kwargs = {}
        for n, d in zip(names, desc):
            if d[0] in ("t", "w", "c"):
                kwargs[n] = d[1]  # a dtype stands for a tensor in warmup()
            elif d[0] == "m":
                if n in given:
                    kwargs[n] = given.pop(n)
            else:
                kwargs[n] = _GENERIC[d[0]]
        opts = {k: v for k, v in (*options, *given.items()) if k in ("num_warps", "num_stages", "num_ctas", "maxnreg")}
        try:
            compiled = base.warmup(grid=(1,), **kwargs, **opts)
        except TypeError:  # a parameter no one supplied: the launch itself will say so
            return tensors
        found = getattr(getattr(compiled, "metadata", None), "written_args", None)
        if found is None:
            return tensors
        written |= set(found)
    return tensors & written


def _array_like(value: Any) -> bool:
    return any(hasattr(value, a) for a in ("data_ptr", "__cuda_array_interface__", "__array_interface__"))


def _schema_name(name: str) -> str:
    return name + "_" if name in _RESERVED else name


def _op_name(kernel: Any, desc: tuple, options: tuple) -> str:
    base = base_jit_function(kernel)
    try:
        source_key = base.cache_key
    except Exception:  # no source: the launch itself reports it
        source_key = ""
    text = repr((type(kernel).__name__, base.module, base.__qualname__, source_key, desc, options))
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    stem = re.sub(r"\W", "_", base.__name__)[:40]
    return f"{stem}_{digest}"


def op_for(kernel: Any, desc: tuple, options: tuple, configs: tuple = ()) -> Any:
    """The registered op (an OpOverload) for this launch description; registers it on
    first use. Called at trace time with constants only. `configs` are an autotuner's
    configs (each as sorted `(name, value)` pairs of `Config.all_kwargs()`), whose grids
    the op receives one after the other."""
    key = (kernel, desc, options, configs)
    op = _ops.get(key)
    if op is not None:
        return op
    with _lock:
        op = _ops.get(key)
        if op is None:
            op = _ops[key] = _register(kernel, desc, options, configs)
    return op


def _register(kernel: Any, desc: tuple, options: tuple, configs: tuple) -> Any:
    base = base_jit_function(kernel)
    names = list(base.arg_names)
    if len(names) != len(desc):
        raise TypeError(f"launch description of {len(desc)} entries for {len(names)} parameters")
    for p, d in zip(base.params, desc):
        if d[0] == "c" and not p.is_constexpr and _array_like(d[1]):
            raise TypeError(
                f"kernel '{base.__name__}' ({base.definition_site()}): argument '{p.name}' is a "
                f"{type(d[1]).__name__}; inside torch.compile a launch takes torch tensors, Python "
                "scalars and constexprs (launch with a tensor of the wanted dtype, e.g. x.view(dtype))")
    written = written_tensor_params(kernel, names, desc, options, configs)
    runtime = [(n, d[0]) for n, d in zip(names, desc) if d[0] in _SCHEMA_TYPES]
    params = ["SymInt[] grid"]
    for i, (n, kind) in enumerate(runtime):
        typ = _SCHEMA_TYPES[kind]
        if n in written:
            typ = f"Tensor(a{i}!)"
        params.append(f"{typ} {_schema_name(n)}")
    name = _op_name(kernel, (desc, configs), options)
    lib = _library()
    packet = getattr(torch.ops, _NAMESPACE)
    if not hasattr(packet, name):
        lib.define(f"{name}({', '.join(params)}) -> ()")
        lib.impl(name, _real_impl(kernel, names, desc, options, configs), "CompositeExplicitAutograd")
        torch.library.register_fake(f"{_NAMESPACE}::{name}", _fake_impl, lib=lib)
    return getattr(packet, name).default


def _real_impl(kernel: Any, names: list[str], desc: tuple, options: tuple,
               configs: tuple) -> Callable[..., None]:
    """Launch the kernel: runtime arguments come after the grid, constexprs and options
    from the description. Parameters before the first one an autotuner supplies are
    passed positionally (the launch path's fast case), the rest by name."""
    given = next((i for i, d in enumerate(desc) if d[0] == "m"), len(desc))
    template = [d[1] if d[0] == "c" else None for d in desc[:given]]
    slots = [i for i, d in enumerate(desc[:given]) if d[0] in _SCHEMA_TYPES]
    named_slots = [names[i] for i, d in enumerate(desc) if i >= given and d[0] in _SCHEMA_TYPES]
    named = {names[i]: d[1] for i, d in enumerate(desc) if i >= given and d[0] == "c"}
    named.update(options)
    run = kernel.run
    wrapped = {i: d[1] for i, d in enumerate(desc) if d[0] == "w"}  # index -> dtype
    order = slots + [names.index(n) for n in named_slots]  # parameter index of each runtime value

    def launch(grid: list, *runtime: Any) -> None:
        if wrapped:
            runtime = tuple(TensorWrapper(v, wrapped[i]) if i in wrapped else v for i, v in zip(order, runtime))
        args = list(template)
        for i, v in zip(slots, runtime):
            args[i] = v
        kwargs = dict(named)
        for name, v in zip(named_slots, runtime[len(slots):]):
            kwargs[name] = v
        if len(grid) == 3:
            g: Any = (grid[0], grid[1], grid[2])
        else:
            g = _config_grid(configs, [tuple(grid[i:i + 3]) for i in range(0, len(grid), 3)])
        run(*args, grid=g, warmup=False, **kwargs)

    return launch


def _config_grid(configs: tuple, grids: list) -> Callable[[dict], tuple]:
    """The grid function of an autotuned launch: the grid traced for the config the
    autotuner is running (recognised by its values)."""

    def grid(meta: dict) -> tuple:
        for config, g in zip(configs, grids):
            if all(meta.get(k, v) == v for k, v in config):
                return g
        return grids[0]

    return grid


def _fake_impl(*args: Any) -> None:
    return None
