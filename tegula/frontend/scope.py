"""Name resolution: the local variables of a function being generated, and the rules
for what a kernel may reach outside of them (closure variables, module globals and
the few Python builtins @jit functions support).

Local scopes are plain dicts copied at every structured region (if branches, loop
bodies), so a region's bindings never leak: what is visible after an `if` or a loop
is decided by the merge code in `control_flow`. A scope also remembers why a name
stopped being visible (defined in one branch only, or only inside a loop) so that a
later use gets a helpful message instead of a bare "not defined".
"""
from __future__ import annotations

import builtins
from types import ModuleType
from typing import Any, Optional

from ..ir.core import Loc
from .diagnostics import FrontendError
from .source import FunctionSource
from .values import describe, is_builtin, is_constexpr, is_dtype, is_jit, is_language_object

RETURN_SLOT = "$return"  # not an identifier, so it can never clash with a user name

# The Python builtins a @jit function may call (each has a rule in `calls`).
SUPPORTED_BUILTINS = {
    name: getattr(builtins, name)
    for name in ("min", "max", "len", "int", "float", "bool", "range", "print", "isinstance",
                 "getattr", "hasattr", "list", "tuple")
}

_BUILTIN_HINTS = {
    "abs": "tl.abs(x) or x.abs()",
    "sum": "tl.sum(x, axis)",
    "pow": "** on constexprs, tl.exp2 / tl.log2 on tensors",
    "any": "tl.reduce_or",
    "zip": "tl.static_range over indices",
    "enumerate": "tl.static_range over indices",
}


class Scope:
    """The local variables of one function at one point of code generation."""

    def __init__(self) -> None:
        self.vars: dict[str, Any] = {}
        self.def_locs: dict[str, Loc] = {}
        self.dropped: dict[str, str] = {}

    def __contains__(self, name: str) -> bool:
        return name in self.vars

    def get(self, name: str, default: Any = None) -> Any:
        return self.vars.get(name, default)

    def set(self, name: str, value: Any, loc: Optional[Loc] = None) -> None:
        self.vars[name] = value
        self.dropped.pop(name, None)
        if loc is not None:
            self.def_locs[name] = loc

    def remove(self, name: str, why: Optional[str] = None) -> None:
        self.vars.pop(name, None)
        self.def_locs.pop(name, None)
        if why:
            self.dropped[name] = why

    def copy(self) -> "Scope":
        other = Scope()
        other.vars = dict(self.vars)
        other.def_locs = dict(self.def_locs)
        other.dropped = dict(self.dropped)
        return other


def _allowed_outer_value(value: Any) -> bool:
    return (value is None or is_constexpr(value) or is_dtype(value) or isinstance(value, ModuleType)
            or is_jit(value) or is_builtin(value) or is_language_object(value) or _is_namedtuple_class(value)
            or getattr(value, "_tegula_constexpr_function", False)  # @constexpr_function
            or getattr(value, "__triton_builtin__", False))  # builtins defined outside tegula


def _is_namedtuple_class(value: Any) -> bool:
    # Triton lets a kernel build namedtuples (aggregates of tensors) from global classes
    return isinstance(value, type) and issubclass(value, tuple) and hasattr(value, "_fields")


class Namespace:
    """The non-local names of one @jit function: its closure, its module globals and
    the supported Python builtins, with the rules of what a kernel may use."""

    def __init__(self, src: FunctionSource):
        self.src = src

    def lookup(self, name: str, scope: Scope) -> Any:
        if name in self.src.closure:
            value = self.src.closure[name]
            if not _allowed_outer_value(value):
                raise FrontendError(
                    f"Cannot access variable '{name}' (a {describe(value)}) of the enclosing function "
                    "from within @jit'ed function. Only constexprs (`x = triton.language.constexpr(42)`), "
                    "dtypes, modules, @jit functions and builtins can be captured.")
            return value
        if name in self.src.globals:
            value = self.src.globals[name]
            if not _allowed_outer_value(value):
                raise FrontendError(
                    f"Cannot access global variable {name} from within @jit'ed function. Triton kernels "
                    "can only access global variables that are instantiated as constexpr "
                    f"(`{name} = triton.language.constexpr(...)`), or that are dtypes, modules, @jit "
                    f"functions or builtins; '{name}' is a {describe(value)}. Note that annotating a global "
                    f"(`{name}: triton.language.constexpr = ...`) does not make it a constexpr.")
            return value
        if name in SUPPORTED_BUILTINS:
            return SUPPORTED_BUILTINS[name]
        if hasattr(builtins, name):
            hint = _BUILTIN_HINTS.get(name)
            raise FrontendError(f"the Python builtin '{name}' is not supported in @jit functions"
                                + (f"; use {hint}" if hint else ""))
        why = scope.dropped.get(name)
        if why:
            raise FrontendError(f"'{name}' is not defined ({why})")
        raise FrontendError(f"'{name}' is not defined")
