"""The frontend's entry point: `build_kernel`, from a @jit function and its
specialization to an `ir.Kernel`.

Parameters found in `constexprs` (constexpr parameters, integers specialized because
they equal 1, None arguments) are bound as compile-time values; every other parameter
becomes a kernel argument, in parameter order, typed from `signature` and carrying its
`arg_attrs`. The kernel is named after the Python function, or as `@jit(repr=...)` says.
"""
from __future__ import annotations

import inspect
from typing import Any, Mapping, Optional

from .. import config
from ..errors import CompilationError
from ..ir.builder import Builder, new_kernel
from ..ir.core import ArgAttrs, Kernel
from ..ir.ops import Op
from .codegen import CompileContext, FunctionGenerator
from .diagnostics import FrontendError
from .scope import RETURN_SLOT
from .signature import is_constexpr_type, parse_arg_type
from .source import FunctionSource, SourceUnavailableError, get_source
from .values import constexpr, language, to_value, unwrap


def build_kernel(fn: Any, signature: Mapping[str, str], constexprs: Mapping[str, Any],
                 arg_attrs: Mapping[str, ArgAttrs], options: Any,
                 arg_trees: Optional[Mapping[str, Any]] = None, name: Optional[str] = None) -> Kernel:
    """Generate the tile IR of the @jit function `fn` (`fn.fn` is the Python function)
    specialized by `signature` / `constexprs` / `arg_attrs`, compiled with `options`
    (`.debug` turns `assert` into device assertions), named `name` (default: the
    function's). Raises `CompilationError`, located in the user's source, for anything
    the kernel does wrong."""
    pyfn = getattr(fn, "fn", fn)
    try:
        src = get_source(pyfn, getattr(fn, "_src_override", None))
    except SourceUnavailableError as e:
        raise CompilationError(str(e)) from None
    try:
        kernel = _build(src, pyfn, signature, constexprs, arg_attrs, options, dict(arg_trees or {}))
    except CompilationError as e:
        if config.knobs.debug_frontend:
            raise
        # The traceback through the generator's frames says nothing to a kernel author;
        # the language's own error stays the cause, as in Triton (without frames).
        raise e.with_traceback(None) from e.__cause__
    if name is not None:
        kernel.name = name
    return kernel


def _build(src: FunctionSource, pyfn: Any, signature: Mapping[str, str], constexprs: Mapping[str, Any],
           arg_attrs: Mapping[str, ArgAttrs], options: Any, trees: dict[str, Any]) -> Kernel:
    def_loc = src.def_loc
    try:
        params = _parameters(pyfn, src)
        # the leaves of tuple / descriptor parameters are parameters of their own here
        flat = [(leaf, inspect.Parameter.empty) if name in trees else (name, default)
                for name, default in params for leaf in (_leaves(trees[name]) if name in trees else [name])]
        arg_names, arg_types = [], []
        for name, default in flat:
            if name in constexprs:
                continue
            if name not in signature:
                if default is not inspect.Parameter.empty:
                    continue  # left to its default, a compile-time value
                raise FrontendError(f"no type is given for parameter '{name}' of kernel '{src.name}'")
            text = signature[name]
            if is_constexpr_type(text):
                if default is inspect.Parameter.empty:
                    raise FrontendError(f"constexpr parameter '{name}' of kernel '{src.name}' has no value")
                continue
            try:
                arg_types.append(parse_arg_type(text))
            except ValueError as e:
                raise FrontendError(f"parameter '{name}' of kernel '{src.name}': {e}") from None
            arg_names.append(name)
    except FrontendError as e:
        raise CompilationError(e.message, def_loc) from None

    kernel = new_kernel(src.name, arg_types, arg_names, def_loc)
    kernel.arg_attrs = [arg_attrs.get(n) or ArgAttrs() for n in arg_names]
    builder = Builder(kernel.body)
    builder.loc = def_loc
    ctx = CompileContext(src.name, builder, options)
    ctx.sem = language().Semantic(builder, options, ctx.call_function)

    arguments: dict[str, Any] = {}
    kernel_args = dict(zip(arg_names, kernel.args))

    def leaf_value(name: str) -> Any:
        if name in constexprs:
            return constexpr(constexprs[name])
        return ctx.sem.wrap(kernel_args[name])

    for name, default in params:
        if name in trees:
            try:
                arguments[name] = _rebuild(trees[name], leaf_value, ctx.sem)
            except (ValueError, TypeError) as e:
                raise CompilationError(f"parameter '{name}' of kernel '{src.name}': {e}", def_loc) from None
        elif name in constexprs:
            arguments[name] = constexpr(constexprs[name])
        elif name in kernel_args:
            arguments[name] = ctx.sem.wrap(kernel_args[name])
        else:  # a constexpr parameter left to its default
            arguments[name] = to_value(default)

    gen = FunctionGenerator(ctx, src, ())
    ret = gen.run(arguments)
    if unwrap(ret) is not None:
        loc = gen.scope.def_locs.get(RETURN_SLOT, def_loc)
        raise CompilationError(f"kernel '{src.name}' returns a value; kernels cannot return values "
                               "(store results through a pointer)", loc)
    builder.loc = def_loc
    builder.create(Op.RETURN, [], result_types=[])
    return kernel


def _leaves(tree: Any) -> list[str]:
    return [tree] if isinstance(tree, str) else [leaf for c in tree[2] for leaf in _leaves(c)]


def _rebuild(tree: Any, leaf_value: Any, sem: Any) -> Any:
    """The kernel's value of a tuple / descriptor parameter, from its leaves."""
    if isinstance(tree, str):
        return leaf_value(tree)
    kind, info, children = tree
    if kind == "tensordesc":
        block, padding = info
        return language().host_descriptor(sem, [leaf_value(c) for c in children], block, padding)
    values = [_rebuild(c, leaf_value, sem) for c in children]
    return info(*values) if info is not None else language().tuple(values)


def _parameters(pyfn: Any, src: FunctionSource) -> list[tuple[str, Any]]:
    """(name, default) of each parameter, in order."""
    params = []
    for p in inspect.signature(pyfn).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise FrontendError(f"kernel '{src.name}' has a variadic parameter "
                                f"({'*' if p.kind is p.VAR_POSITIONAL else '**'}{p.name}); variadic "
                                "parameters are not supported in @jit functions")
        params.append((p.name, p.default))
    return params
