"""What the frontend knows about the language layer's values, in one place.

The code generator handles Python values of a few kinds: `tensor`s (IR values with a
type, made and operated on by `tegula.language`), `constexpr`s (compile-time Python
values), Python tuples of values, and plain objects reachable from a kernel (dtypes,
modules, @jit functions, builtins). This module classifies them, wraps and unwraps
constexprs, converts tuples of tensors to and from flat lists of IR values (for the
results and block arguments of structured control flow), and describes values in
error messages. Everything else about their meaning belongs to `tegula.language`.
"""
from __future__ import annotations

from types import ModuleType
from typing import Any, Iterator

from ..ir.types import Type

# The submodules themselves: the package re-exports classes under their names.
from ..language.aggregate import Aggregate
from ..language.constexpr import constexpr as constexpr_class
from ..language.core import Builtin, condition, static_range
from ..language.core import range as tl_range
from ..language.dtypes import dtype as dtype_class
from ..language.semantic import Semantic
from ..language.tensor import tensor as tensor_class
from ..language.tensor_descriptors import host_descriptor
from ..language.tuples import tuple as tuple_class

_PY_SCALARS = (bool, int, float)


class _Language:
    """The language layer's classes the frontend needs, under short names."""

    constexpr = constexpr_class
    tensor = tensor_class
    dtype = dtype_class
    Builtin = Builtin
    range = tl_range
    static_range = static_range
    condition = condition
    Semantic = Semantic
    tuple = tuple_class
    host_descriptor = staticmethod(host_descriptor)


_LANGUAGE = _Language()


def language() -> _Language:
    return _LANGUAGE


# ---------------------------------------------------------------- classification

def is_tensor(x: Any) -> bool:
    return isinstance(x, language().tensor)


def is_constexpr(x: Any) -> bool:
    return isinstance(x, language().constexpr)


def is_dtype(x: Any) -> bool:
    return isinstance(x, language().dtype)


def is_jit(x: Any) -> bool:
    return not is_constexpr(x) and bool(getattr(x, "_tegula_jit", False)) and callable(getattr(x, "fn", None))


def is_builtin(x: Any) -> bool:
    return isinstance(x, language().Builtin)


def is_language_object(x: Any) -> bool:
    """Classes, enums and functions defined by `tegula.language` (tl.constexpr, tl.range...)."""
    module = getattr(x, "__module__", None) or ""
    if not isinstance(module, str):
        return False
    return module == "tegula.language" or module.startswith("tegula.language.")


# ---------------------------------------------------------------- constexpr wrapping

def is_value_tuple(x: Any) -> bool:
    """A tuple of frontend values: a Python tuple, a `tl.tuple` or a namedtuple (a
    constexpr holding a tuple is not one)."""
    return isinstance(x, tuple)


def remake(template: tuple, items: Any) -> tuple:
    """A tuple of the same kind as `template` (plain, tl.tuple or namedtuple) of `items`."""
    cls = type(template)
    if cls is tuple:
        return tuple(items)
    if hasattr(cls, "_fields"):
        return cls(*items)
    return cls(items)


def unwrap(x: Any) -> Any:
    """The Python value of a constexpr (recursively for tuples); anything else as is."""
    if is_constexpr(x):
        return x.value
    if is_value_tuple(x):
        return remake(x, [unwrap(v) for v in x])
    return x


def constexpr(value: Any) -> Any:
    return language().constexpr(unwrap(value))


def to_value(x: Any) -> Any:
    """A Python result (of a constexpr computation, an attribute...) as a frontend value:
    scalars, strings and None become constexprs; tuples are converted element-wise."""
    if x is None or isinstance(x, (*_PY_SCALARS, str)):
        return constexpr(x)
    if is_value_tuple(x):
        return remake(x, [to_value(v) for v in x])
    return x


def is_number(x: Any) -> bool:
    """A compile-time Python number (bool, int or float), wrapped or not."""
    v = unwrap(x)
    return isinstance(v, _PY_SCALARS) and not is_tensor(v)


def is_aggregate(x: Any) -> bool:
    """A value carried through regions as its tensors (a block pointer, a tensor
    descriptor): see `language.aggregate`."""
    return isinstance(x, Aggregate)


def contains_tensor(x: Any) -> bool:
    if is_tensor(x) or is_aggregate(x):
        return True
    return is_value_tuple(x) and any(contains_tensor(v) for v in x)


# ---------------------------------------------------------------- tensors and IR values

def ir_type(t: Any) -> Type:
    return t.handle.type


def flatten(x: Any) -> list[Any]:
    """The tensors of a tensor or (nested) tuple of tensors, in order."""
    if is_value_tuple(x):
        return [leaf for v in x for leaf in flatten(v)]
    if is_aggregate(x):
        return list(x.leaves())
    return [x]


def unflatten(template: Any, leaves: Iterator[Any]) -> Any:
    """Rebuild the structure of `template` from `leaves` (the inverse of `flatten`)."""
    if is_value_tuple(template):
        return remake(template, [unflatten(v, leaves) for v in template])
    if is_aggregate(template):
        return template.rebuild(leaves)
    return next(leaves)


def same_structure(a: Any, b: Any) -> bool:
    if is_aggregate(a) or is_aggregate(b):
        return type(a) is type(b) and a.static_key() == b.static_key()
    if is_value_tuple(a) or is_value_tuple(b):
        return (is_value_tuple(a) and is_value_tuple(b) and len(a) == len(b) and _same_kind(a, b)
                and all(same_structure(x, y) for x, y in zip(a, b)))
    return True


def _same_kind(a: tuple, b: tuple) -> bool:
    # a plain tuple and a tl.tuple merge; a namedtuple only with its own class
    na, nb = hasattr(type(a), "_fields"), hasattr(type(b), "_fields")
    return type(a) is type(b) if na or nb else True


def static_equal(a: Any, b: Any) -> bool:
    """Two non-tensor values that are certainly the same compile-time value."""
    if a is b:
        return True
    if contains_tensor(a) or contains_tensor(b):
        return False
    ua, ub = unwrap(a), unwrap(b)
    if ua is ub:
        return True
    try:
        return type(ua) is type(ub) and bool(ua == ub)
    except Exception:
        return False


def describe(x: Any) -> str:
    """A short description of a value's type for error messages."""
    if is_tensor(x):
        return str(ir_type(x))
    if is_value_tuple(x):
        return "(" + ", ".join(describe(v) for v in x) + ("," if len(x) == 1 else "") + ")"
    v = unwrap(x)
    if v is None:
        return "None"
    if isinstance(v, _PY_SCALARS) or isinstance(v, str):
        kind = "constexpr " if is_constexpr(x) else ""
        return f"{kind}{type(v).__name__} ({v!r})"
    if is_dtype(v):
        return f"dtype {v}"
    if is_builtin(v):
        return f"builtin tl.{v.__name__}"
    if is_jit(v):
        return f"@jit function '{getattr(v, '__name__', v.fn.__name__)}'"
    if isinstance(v, ModuleType):
        return f"module '{v.__name__}'"
    return type(v).__name__

