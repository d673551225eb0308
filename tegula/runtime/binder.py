"""The launch hot path of a @jit function, generated once per function.

`build_runner(jitfn)` writes and `exec`s a Python function whose parameter list is the
kernel's own, so CPython binds positional, keyword and default arguments in C (no
`inspect.signature(...).bind` per launch). `kernel[grid]` is `functools.partial(runner,
grid)`, which adds almost nothing to a direct call. The runner:

1. checks that every required parameter got a value (parameters without a default are
   given a sentinel default, and surplus positional arguments land in `*_tg_extra`, so
   a wrong argument count becomes a KernelArgumentError naming the kernel's file:line,
   not a bare TypeError);
2. builds the cache key from the arguments, inline for the common types: a torch
   tensor contributes (dtype, 16-byte alignment, device), an int a short string naming
   its spec (`== 1`, its power-of-two divisor up to 16, 32-bit; strings because their
   hash is cached, where a spec tuple would be hashed anew on every launch), a constexpr its value and
   type; anything else goes through `specialization.spec_value`. Each parameter's
   `do_not_specialize` / `do_not_specialize_on_alignment` is folded in when the code is
   written. The device address a tensor's alignment was read from is kept;
3. looks the key (plus the knob flags and launch options) up in the in-memory cache —
   one dict lookup — and compiles on a miss (`jitfn._compile_miss`, which recomputes
   the full specs with `compute_specs`);
4. normalizes the grid (a 3-tuple passes through untouched) and, unless a launch hook
   of `tegula.knobs.runtime` is set (then `CompiledKernel._launch_hooked` calls the
   hooks around the launch), calls the compiled
   kernel's launcher with every parameter's value and those addresses
   (`launch(grid, values, *pointers)`, `pointers[i]` the `data_ptr()` of a torch tensor
   `values[i]`, else None), so a GPU launcher does not ask each tensor a second time.

Keys are flat tuples; a tensor's atoms start with a torch dtype, an int's or float's
with a string and any other argument's with a spec tuple, so two different argument
lists never share a key.
"""
from __future__ import annotations

import functools
import keyword
import sys
from typing import Any, Callable, Sequence

from .. import config
from .. import knobs as knobs_module
from ..config import knobs
from ..errors import KernelArgumentError, KernelArgumentOverflow
from . import launch_hooks, tracebacks
from . import specialization as S
from .kernel import current_stream, normalize_grid


def launch_flags() -> tuple:
    """The knobs that change what a launch compiles to: (interpret, debug, checked,
    cpu_backend, default_fp_fusion, override_arch, f32_default) — cpu_backend picks the
    host backend, so toggling it never reuses a kernel compiled for the other one;
    default_fp_fusion and override_arch are option defaults Triton reads at launch
    (`knobs.language.default_fp_fusion`, `knobs.runtime.override_arch`); f32_default
    (`knobs.language.fp32_default`) is the precision of f32 dots that name none."""
    return tuple(getattr(knobs, name) for name in config.LAUNCH_KNOBS)


def _flags_reader() -> Callable[[], tuple[bool, ...]]:
    # Reading two knobs through `knobs` costs microseconds per launch (each environment
    # lookup of an unset variable raises and catches KeyError inside os.environ). When
    # config offers a cheaper reader of the same two values, the launch path uses it.
    return getattr(config, "launch_flags", None) or launch_flags


def options_key(opts: dict) -> tuple:
    key = tuple(opts.items())
    try:
        hash(key)
        return key
    except TypeError:  # e.g. extern_libs given as a dict
        return tuple((k, repr(v)) for k, v in opts.items())


_PLAIN = frozenset((int, bool, float, str, type(None)))


def annotated_spec(value: Any, sig: str, specialize: bool, align: bool) -> tuple:
    """A parameter whose annotation fixes its type (`n: tl.int64`, `p: "*fp16"`): the
    signature is the annotation; ints keep divisibility but never become `== 1`
    constexprs, and floats and bools are not specialized (Triton's rule)."""
    if sig.startswith("*"):
        spec = S.spec_value(value, specialize, align)
        if not spec[0].startswith("*"):
            raise S.UnsupportedArgument(value, f"the parameter is annotated as a pointer ({sig})")
        return (sig, spec[1], spec[2])
    if sig[0] in "iu" and sig != "i1":
        try:
            div = S.pow2_divisor(value.__index__()) if specialize and align and not isinstance(value, bool) else 1
        except (AttributeError, TypeError):
            div = 1
        return (sig, div, None)
    return (sig, 1, None)


def param_spec(p: Any, value: Any) -> tuple:
    """The full spec of one parameter's value (the slow path's view of the key)."""
    if p.is_constexpr:
        return S.constexpr_spec(value)
    specialize, align = not p.do_not_specialize, not p.do_not_specialize_on_alignment
    if p.annotation_type:
        return annotated_spec(value, p.annotation_type, specialize, align)
    spec = S.spec_value(value, specialize, align)
    if p.is_const and isinstance(spec[0], str) and spec[0].startswith("*") and not spec[0].startswith("*k"):
        # a `tl.const` parameter: Triton's `*k` type, a pointer to read-only memory (the
        # launch key need not say so: constness is the parameter's, not the value's)
        spec = ("*k" + spec[0][1:], *spec[1:])
    return spec


def compute_specs(params: Sequence[Any], values: Sequence[Any]) -> list[tuple]:
    return [param_spec(p, v) for p, v in zip(params, values)]


# Key atoms of the inline int/float specs (see the module docstring).
KEY_ONE, KEY_I32, KEY_FP32 = "int==1", "i32", "fp32"
# an int32's key atom by its low four bits: its power-of-two divisor up to 16
KEY_I32_BY_LOW_BITS = tuple(KEY_I32 if d == 1 else f"i32%{d}" for d in (S.pow2_divisor(i) for i in range(16)))


def _int_expr(a: str, slow: str, specialize: bool, align: bool) -> str:
    """An expression giving int `a`'s spec; `slow` handles ints outside int32."""
    in32 = f"-2147483648 <= {a} <= 2147483647"
    if not specialize:
        return f"(_tg_I32 if {in32} else {slow})"
    i32 = f"_tg_I32_DIV[{a} & 15]" if align else "_tg_I32"
    return f"(_tg_ONE if {a} == 1 else ({i32} if {in32} else {slow}))"


def _key_lines(i: int, p: Any, with_torch: bool) -> tuple[list[str], list[str]]:
    """Code computing parameter i's key atoms, and the names of those atoms."""
    a, k0, k1, k2, ptr = p.name, f"_tg_a{i}", f"_tg_b{i}", f"_tg_c{i}", f"_tg_p{i}"
    if p.is_constexpr:
        return ([f"    if {a}.__class__ in _tg_PLAIN:",
                 f"        {k0} = {a}; {k1} = {a}.__class__",
                 "    else:",
                 f"        {k0}, {k1} = _tg_cx({a})"], [k0, k1])
    specialize, align = not p.do_not_specialize, not p.do_not_specialize_on_alignment
    if p.annotation_type:
        return ([f"    {k0} = _tg_slow{i}({a}); {ptr} = None"], [k0])
    lines = [f"    _tg_cls = {a}.__class__"]
    branch = "if"
    if with_torch:
        div = f"not {ptr} & 15" if specialize and align else "False"
        lines += ["    if _tg_cls is _tg_Tensor:",
                  f"        {ptr} = {a}.data_ptr(); {k0} = {a}.dtype; {k1} = {div}; {k2} = {a}.get_device()"]
        branch = "elif"
    lines += [f"    {branch} _tg_cls is _tg_int:",
              f"        {k0} = {_int_expr(a, f'_tg_slow{i}({a})', specialize, align)}; {k1} = {k2} = {ptr} = None",
              "    elif _tg_cls is _tg_float:",
              f"        {k0} = _tg_FP32; {k1} = {k2} = {ptr} = None",
              "    else:",
              f"        {k0} = _tg_slow{i}({a}); {k1} = {k2} = {ptr} = None"]
    return lines, [k0, k1, k2]


def _slow_spec(jitfn: Any, p: Any) -> Callable[[Any], tuple]:
    """The generic spec of parameter `p`, turning an unsupported value into an error
    that names the parameter."""

    def slow(value: Any) -> tuple:
        try:
            return param_spec(p, value)
        except S.UnsupportedArgument as e:
            why = f": {e.why}" if e.why else ""
            error = KernelArgumentOverflow if isinstance(e, S.ArgumentOverflow) else KernelArgumentError
            raise error(
                f"argument '{p.name}' of kernel '{jitfn.__name__}' ({jitfn.definition_site()}) is a "
                f"{S.describe_value(value)}, which a kernel cannot take{why}. Kernel arguments are "
                "arrays or tensors (for pointers), ints, floats, bools, None, constexpr values, tuples of "
                "these and TensorDescriptors") from None

    return slow


def build_runner(jitfn: Any) -> Callable[..., Any]:
    """Generate the launch function of `jitfn` (see the module docstring). It is called
    as `runner(grid, *args, _tg_warmup=False, **kwargs)`."""
    params = jitfn.params
    for p in params:
        if p.kind != "positional":
            raise KernelArgumentError(
                f"kernel '{jitfn.__name__}' ({jitfn.definition_site()}) cannot be launched: parameter "
                f"'{p.name}' is {p.kind}; kernel parameters must be plain positional parameters")
    torch = sys.modules.get("torch")
    no_arg = object()
    ns: dict[str, Any] = {
        "_tg_PLAIN": _PLAIN, "_tg_cx": S.constexpr_atoms,
        "_tg_ONE": KEY_ONE, "_tg_I32": KEY_I32, "_tg_I32_DIV": KEY_I32_BY_LOW_BITS, "_tg_FP32": KEY_FP32,
        "_tg_flags": _flags_reader(), "_tg_okey": options_key,
        "_tg_rt": knobs_module.runtime, "_tg_stream": current_stream,
        "_tg_get": jitfn._kernel_cache.get, "_tg_miss": jitfn._compile_miss,
        "_tg_MISSING": object(), "_tg_globals_changed": jitfn._globals_changed, "_tg_NA": no_arg,
        # builtins under private names: a kernel parameter may be called `len` or `tuple`
        "_tg_len": len, "_tg_tuple": tuple, "_tg_int": int, "_tg_float": float,
    }
    if torch is not None:
        ns["_tg_Tensor"] = torch.Tensor
    names = [p.name for p in params]
    vals = "(" + "".join(f"{n}, " for n in names) + ")"
    # one trailing positional argument per parameter (no tuple to build per launch)
    ptrs = "".join(", None" if p.is_constexpr else f", _tg_p{i}" for i, p in enumerate(params))
    ns["_tg_grid"] = lambda grid, values: _grid(grid, names, values, jitfn.__name__)
    ns["_tg_bind_error"] = lambda values, extra, opts: jitfn._binding_error(values, extra, opts, no_arg)

    arglist = ["_tg_grid_arg"]
    for i, p in enumerate(params):
        ns[f"_tg_slow{i}"] = _slow_spec(jitfn, p)
        if p.has_default:
            ns[f"_tg_d{i}"] = p.default
            arglist.append(f"{p.name}=_tg_d{i}")
        else:
            arglist.append(f"{p.name}=_tg_NA")
    arglist += ["*_tg_extra", "_tg_warmup=False", "**_tg_opts"]
    # Named after the kernel so that Python's own messages ("got multiple values for
    # argument") name it too.
    fname = jitfn.__name__ if jitfn.__name__.isidentifier() and not keyword.iskeyword(jitfn.__name__) \
        else "launch"
    body = [f"def {fname}({', '.join(arglist)}):"]
    required = [p.name for p in params if not p.has_default]
    checks = " or ".join([f"{n} is _tg_NA" for n in required] + ["_tg_extra"])
    body += [f"    if {checks}:", f"        _tg_bind_error({vals}, _tg_extra, _tg_opts)"]
    for i, hook in enumerate(jitfn.pre_run_hooks):
        ns[f"_tg_hook{i}"] = hook
        body.append(f"    _tg_hook{i}({''.join(f'{n}, ' for n in names)}**_tg_opts)")
    for i, g in enumerate(jitfn.used_globals):
        ns[f"_tg_gns{i}"], ns[f"_tg_gval{i}"] = g.namespace, g.value
        body.append(f"    if _tg_gns{i}.get({g.name.split('.')[0]!r}, _tg_MISSING) is not _tg_gval{i}: "
                    "_tg_globals_changed()")
    atoms: list[str] = []
    for i, p in enumerate(params):
        lines, names_i = _key_lines(i, p, torch is not None)
        body += lines
        atoms += names_i
    body += [
        f"    _tg_key = ({''.join(a + ', ' for a in atoms)}_tg_flags(), "
        "_tg_okey(_tg_opts) if _tg_opts else ())",
        "    _tg_kernel = _tg_get(_tg_key)",
        f"    _tg_vals = {vals}",
        "    if _tg_kernel is None:",
        "        _tg_kernel = _tg_miss(_tg_key, _tg_vals, _tg_opts, _tg_warmup)",
        "    if _tg_warmup:",
        "        return _tg_kernel",
        "    if _tg_grid_arg.__class__ is _tg_tuple and _tg_len(_tg_grid_arg) == 1:",
        "        _tg_grid_arg = (_tg_grid_arg[0], 1, 1)",
        "    elif _tg_grid_arg.__class__ is not _tg_tuple or _tg_len(_tg_grid_arg) != 3:",
        "        _tg_grid_arg = _tg_grid(_tg_grid_arg, _tg_vals)",
        # launch hooks (`knobs.runtime`): one attribute read when none is set
        "    if _tg_rt.launch_hooked:",
        f"        _tg_kernel._launch_hooked(_tg_grid_arg, _tg_vals, _tg_stream(_tg_kernel){ptrs})",
        "        return _tg_kernel",
        f"    _tg_kernel._launch(_tg_grid_arg, _tg_vals{ptrs})",
        "    return _tg_kernel",
    ]
    hook = launch_hooks.current()
    if hook is not None:
        # a tool watches launches (see `launch_hooks`): only then are the calls written
        ns["_tg_lenter"], ns["_tg_lexit"], ns["_tg_jitfn"] = hook[0], hook[1], jitfn
        at = body.index(f"    _tg_kernel._launch(_tg_grid_arg, _tg_vals{ptrs})")
        body[at:at + 1] = ["    _tg_tok = _tg_lenter(_tg_kernel, _tg_grid_arg, _tg_vals, _tg_jitfn)",
                           f"    _tg_kernel._launch(_tg_grid_arg, _tg_vals{ptrs})",
                           "    _tg_lexit(_tg_tok)"]
    launch_hooks.built(jitfn)
    # The whole body re-raises errors trimmed of tegula's frames, and the function is
    # located at the kernel's `def` line (see `tracebacks`): a failing launch shows the
    # user's call line, their `def`, and the located message. try costs nothing in 3.11+.
    body = [body[0], "    try:", *("    " + line for line in body[1:]),
            "    except BaseException as _tg_e:", "        raise _tg_strip(_tg_e)"]
    ns["_tg_strip"] = tracebacks.strip_internal_frames
    code = "\n".join(body) + "\n"
    tracebacks.located_code(code, tracebacks.def_site(jitfn), ns)
    run = ns[fname]
    run.__tegula_source__ = code
    return run


def bind(runner: Callable[..., Any], grid: Any) -> Callable[..., Any]:
    """`kernel[grid]`: the runner with the grid bound (C-level partial: cheap to call)."""
    return functools.partial(runner, grid)


def _grid(grid: Any, names: list[str], vals: tuple, kernel: str) -> tuple:
    if grid is None:
        raise KernelArgumentError(f"launching kernel '{kernel}' needs a grid: {kernel}[grid](...)")
    return normalize_grid(grid, lambda: dict(zip(names, vals)), kernel)
