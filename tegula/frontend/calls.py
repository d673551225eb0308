"""Calls: language builtins, the supported Python builtins, tensor methods, plain
Python callables on compile-time values, and @jit functions, which are inlined.

Inlining a @jit function binds its parameters exactly as Python would (positional,
keyword, defaults; a wrong call is reported at the call site with Python's wording),
then generates its body with a fresh `FunctionGenerator` whose errors carry the call
chain. Compile-time arguments stay compile-time inside the callee, so constexpr
arguments and @jit functions passed as arguments (a `combine_fn`) propagate.
"""
from __future__ import annotations

import ast
import builtins
import functools
import inspect
from typing import Any, Callable

from ..errors import CallSite
from ..language.core_builtins import builtin_max, builtin_min
from .diagnostics import FrontendError
from .source import SourceUnavailableError, get_source
from .values import (
    constexpr,
    contains_tensor,
    describe,
    is_builtin,
    is_jit,
    is_tensor,
    is_value_tuple,
    language,
    to_value,
    unwrap,
)

# Guard against runaway (mutual) recursion that the identity check cannot see.
_MAX_INLINE_DEPTH = 64


class CallsMixin:
    """visit_Call and inlining (mixed into FunctionGenerator)."""

    def visit_Call(self, node: ast.Call) -> Any:
        fn = unwrap(self.visit(node.func))
        args: list[Any] = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                args.extend(self.visit_starred_items(a))
            else:
                args.append(self.visit(a))
        kwargs: dict[str, Any] = {}
        for kw in node.keywords:
            if kw.arg is None:
                self.visit_with(kw, self._unsupported_node)
            kwargs[kw.arg] = self.visit(kw.value)
        return self.call(fn, args, kwargs)

    def call(self, fn: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if is_jit(fn):
            return self.inline(fn, args, kwargs)
        if is_builtin(fn):
            return fn.impl(self.sem, *args, **kwargs)
        if getattr(fn, "__triton_builtin__", False):
            return self.call_user_builtin(fn, args, kwargs)
        rule = _PY_BUILTIN_RULES.get(fn) if _hashable(fn) else None
        if rule is not None:
            return rule(self, args, kwargs)
        tl = language()
        if fn is tl.constexpr:
            return constexpr(*unwrap(tuple(args)), **{k: unwrap(v) for k, v in kwargs.items()})
        if fn is tl.range or fn is tl.static_range:
            raise FrontendError(f"tl.{fn.__name__}(...) can only be used as the iterator of a for loop")
        if not callable(fn):
            raise FrontendError(f"a {describe(fn)} is not callable")
        if contains_tensor(getattr(fn, "__self__", None)) or contains_tensor((tuple(args), tuple(kwargs.values()))):
            # Methods of tensors and aggregates (block pointers, tensor descriptors), and
            # helpers taking tensors, work on the values themselves.
            return fn(*args, **kwargs)
        # Any other Python callable runs at compile time on the unwrapped values.
        return to_value(fn(*unwrap(tuple(args)), **{k: unwrap(v) for k, v in kwargs.items()}))

    def call_user_builtin(self, fn: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """A function marked `__triton_builtin__` (Triton's convention for builtins defined
        outside Triton, as PyTorch's `triton_helpers` does): called with the frontend's
        values themselves (constexprs stay wrapped) and the semantic object as
        `_semantic` or `_builder`, whichever it takes."""
        try:
            params = _signature(fn).parameters
        except (TypeError, ValueError):
            params = {}
        if "_builder" in params and "_semantic" not in params:
            extra = {"_builder": self.sem}
        elif "_semantic" in params or any(p.kind is p.VAR_KEYWORD for p in params.values()):
            extra = {"_semantic": self.sem}
        else:
            extra = {}
        return to_value(fn(*args, **kwargs, **extra))

    # ------------------------------------------------------------------ inlining
    def inline(self, jit_fn: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """Inline a call of @jit function `jit_fn` at the builder's insertion point and
        return what it returns (None, a value, or a tuple)."""
        from .codegen import FunctionGenerator  # codegen is assembled from this module


        pyfn = jit_fn.fn
        name = getattr(jit_fn, "__name__", None) or pyfn.__name__
        stack = self.ctx.inline_stack
        if pyfn in stack or len(stack) >= _MAX_INLINE_DEPTH:
            names = " -> ".join([self.ctx.kernel_name, *(f.__name__ for f in stack), name])
            raise FrontendError(f"recursive call of @jit function '{name}' ({names}); @jit functions are "
                                "inlined, so they cannot be recursive")
        try:
            src = get_source(pyfn)
        except SourceUnavailableError as e:
            raise FrontendError(str(e)) from None
        arguments = _bind_arguments(pyfn, name, args, kwargs)
        callee = FunctionGenerator(self.ctx, src, self.chain + (CallSite(self.loc, name),))
        stack.append(pyfn)
        try:
            return callee.run(arguments)
        finally:
            stack.pop()


@functools.lru_cache(maxsize=256)
def _signature(pyfn: Callable) -> inspect.Signature:
    return inspect.signature(pyfn)


def _bind_arguments(pyfn: Callable, name: str, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    sig = _signature(pyfn)
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise FrontendError(f"@jit function '{name}' has a variadic parameter "
                                f"({'*' if p.kind is p.VAR_POSITIONAL else '**'}{p.name}); variadic "
                                "parameters are not supported in @jit functions")
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as e:
        raise FrontendError(f"wrong arguments in the call to @jit function '{name}': {e}") from None
    bound.apply_defaults()
    # A callee's `tl.constexpr` annotations are not checked: Triton ignores them (its
    # fused-attention tutorial passes tensors to `offs_m: tl.constexpr`).
    return {pname: to_value(value) for pname, value in bound.arguments.items()}


def _hashable(x: Any) -> bool:
    try:
        hash(x)
    except TypeError:
        return False
    return True


# ---------------------------------------------------------------- Python builtins

def _min_max(which: str) -> Callable[..., Any]:
    py = builtins.min if which == "min" else builtins.max

    def rule(gen: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if set(kwargs) - {"propagate_nan"}:
            raise FrontendError(f"{which}() got an unexpected keyword argument")
        values = list(args)
        if len(values) == 1 and is_value_tuple(values[0]):
            values = list(values[0])
        if not values:
            raise FrontendError(f"{which}() expects at least one argument")
        if not contains_tensor(tuple(values)):
            return to_value(py(*(unwrap(v) for v in values)))
        # With a tensor operand, Triton's min/max are tl.minimum/tl.maximum (the language
        # layer's rule also promotes bf16 as Triton does).
        return (builtin_min if which == "min" else builtin_max).impl(gen.sem, *values, **kwargs)

    return rule


def _static(py_fn: Callable, what: str) -> Callable[..., Any]:
    def rule(gen: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if contains_tensor((tuple(args), tuple(kwargs.values()))):
            raise FrontendError(f"{what}() only works on constexpr values in @jit functions, not on tensors"
                                + (f"; use x.to(tl.{'int32' if what == 'int' else 'float32'})"
                                   if what in ("int", "float") else ""))
        return to_value(py_fn(*unwrap(tuple(args)), **{k: unwrap(v) for k, v in kwargs.items()}))

    return rule


def _len(gen: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    if len(args) != 1 or kwargs:
        raise FrontendError("len() takes exactly one argument")
    value = args[0]
    if is_tensor(value):
        shape = getattr(value, "shape", None)
        if not shape:
            raise FrontendError(f"len() of a scalar tensor ({describe(value)})")
        return constexpr(unwrap(shape[0]))
    return constexpr(len(value if is_value_tuple(value) else unwrap(value)))


def _range(gen: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    raise FrontendError("range() can only be used as the iterator of a for loop in @jit functions")


def _print(gen: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    # Triton's `print` inside a kernel is tl.device_print; a leading string is the prefix.
    values = list(args)
    prefix = ""
    if values and isinstance(unwrap(values[0]), str):
        prefix = unwrap(values.pop(0))
    unknown = set(kwargs) - {"hex"}
    if unknown:
        raise FrontendError(f"print() got an unexpected keyword argument '{sorted(unknown)[0]}'")
    gen.sem.device_print(prefix, [unwrap(v) for v in values], bool(unwrap(kwargs.get("hex", False))))
    return None


def _introspect(py_fn: Callable) -> Callable[..., Any]:
    def rule(gen: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        return to_value(py_fn(*(a if is_tensor(a) else unwrap(a) for a in args),
                              **{k: unwrap(v) for k, v in kwargs.items()}))

    return rule


def _sequence(py_fn: Callable) -> Callable[..., Any]:
    def rule(gen: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if len(args) != 1 or kwargs:
            raise FrontendError(f"{py_fn.__name__}() takes exactly one argument here")
        value = args[0]
        return tuple(to_value(v) for v in (value if is_value_tuple(value) else unwrap(value)))

    return rule


_PY_BUILTIN_RULES: dict[Any, Callable[..., Any]] = {
    builtins.min: _min_max("min"),
    builtins.max: _min_max("max"),
    builtins.len: _len,
    builtins.int: _static(builtins.int, "int"),
    builtins.float: _static(builtins.float, "float"),
    builtins.bool: _static(builtins.bool, "bool"),
    builtins.range: _range,
    builtins.print: _print,
    builtins.isinstance: _introspect(builtins.isinstance),
    builtins.getattr: _introspect(builtins.getattr),
    builtins.hasattr: _introspect(builtins.hasattr),
    builtins.list: _sequence(builtins.list),
    builtins.tuple: _sequence(builtins.tuple),
}
