"""The builtin mechanism and the small classes kernels name: `Builtin`/`@builtin`,
`extern`/`extern_elementwise` (library functions, as Triton's `core` has them),
`PropagateNan`, and the loop iterators `static_range`, `range` and `condition`.

A builtin is written as `def f(sem, *args, **kwargs)`: `sem` is the `Semantic` that
emits IR for the kernel being compiled. `@builtin` wraps it into a `Builtin` whose public
signature hides `sem`; the frontend calls `b.impl(sem, *args, **kwargs)`. Calling a
Builtin directly (outside a @jit function) raises a `TegulaError`.
"""
from __future__ import annotations

import enum
import functools
import inspect
from typing import Any, Callable, Optional

from ..errors import TegulaError
from .base import base_type, base_value  # noqa: F401  (Triton's core has them)
from .constexpr import constexpr, unwrap_constexpr


class Builtin:
    """A kernel-language function implemented in Python over a `Semantic`."""

    _tegula_builtin = True

    def __init__(self, impl: Callable[..., Any], name: Optional[str] = None):
        self.impl = impl
        self.__name__ = name or impl.__name__
        self.__qualname__ = self.__name__
        self.__doc__ = impl.__doc__
        self.__module__ = impl.__module__
        sig = inspect.signature(impl)
        params = list(sig.parameters.values())
        self.__signature__ = sig.replace(parameters=params[1:])

    def __call__(self, *args, **kwargs):
        raise TegulaError(f"tl.{self.__name__} can only be called inside a @jit function")

    def __repr__(self) -> str:
        return f"<tegula builtin tl.{self.__name__}>"


def builtin(fn: Optional[Callable[..., Any]] = None, *, name: Optional[str] = None):
    """Decorator: `@builtin` or `@builtin(name="max")` over `def f(sem, *args, **kwargs)`,
    or over Triton's form `def f(*args, _semantic=None)` (the semantic by keyword)."""
    if fn is None:
        return functools.partial(builtin, name=name)
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        params = {}
    first = next(iter(params), None)
    if ("_semantic" in params or "_builder" in params) and first not in ("sem", "_semantic", "self"):
        return extern(fn)
    return Builtin(fn, name)


def extern(fn: Callable[..., Any]) -> Builtin:
    """Triton's `@core.extern`: a function written as `def f(arg0, ..., _semantic=None)`
    (or `_builder=None`, Triton 2's name) that calls `extern_elementwise`; inside a kernel
    it is a builtin, and the semantic arrives through that keyword."""
    params = inspect.signature(fn).parameters
    key = "_semantic" if "_semantic" in params else "_builder" if "_builder" in params else None
    if key is None:
        raise TypeError(f"@extern function {fn.__name__} needs a `_semantic=None` parameter")

    def impl(sem, *args, **kwargs):
        kwargs[key] = sem
        return fn(*args, **kwargs)

    impl.__name__ = fn.__name__
    impl.__doc__ = fn.__doc__
    impl.__module__ = fn.__module__
    b = Builtin(impl)
    visible = [p for name, p in params.items() if name not in ("_semantic", "_builder")]
    b.__signature__ = inspect.Signature(visible)
    return b


def extern_elementwise(lib_name: str, lib_path: str, args: Any, arg_type_symbol_dict: Any, is_pure: bool,
                       _semantic: Any = None, _builder: Any = None) -> Any:
    """Apply a library function element by element, choosing the symbol by the arguments'
    dtypes (Triton's `core.extern_elementwise`; see `semantic_extern`)."""
    sem = _semantic if _semantic is not None else _builder
    if sem is None:
        raise TegulaError("extern_elementwise can only be called inside a @jit function")
    return sem.extern_elementwise(lib_name, lib_path, list(args), arg_type_symbol_dict, is_pure)


def is_builtin(obj: Any) -> bool:
    return isinstance(unwrap_constexpr(obj), Builtin)


class PropagateNan(enum.Enum):
    """Whether `maximum`/`minimum`/`clamp` propagate a NaN operand (ALL) or ignore it (NONE)."""

    NONE = 0x0000
    ALL = 0xFFFF


def _int_bound(x: Any, what: str, where: str) -> Any:
    x = unwrap_constexpr(x)
    if hasattr(x, "handle"):
        raise TypeError(f"{where} {what} must be a compile-time constant, got a tensor")
    if not isinstance(x, int) or isinstance(x, bool):
        raise TypeError(f"{where} {what} must be an int, got {x!r}")
    return x


class static_range:
    """`for i in tl.static_range(...)`: a loop the frontend unrolls at compile time.

    Arguments follow Python's `range(stop)` / `range(start, stop[, step])`; they must be
    compile-time ints. `start`, `end` and `step` hold the plain Python ints."""

    def __init__(self, arg1, arg2=None, step=None):
        where = "tl.static_range"
        if arg2 is None:
            self.start, self.end = 0, _int_bound(arg1, "end", where)
        else:
            self.start, self.end = _int_bound(arg1, "start", where), _int_bound(arg2, "end", where)
        self.step = 1 if step is None else _int_bound(step, "step", where)
        if self.step == 0:
            raise ValueError("tl.static_range step must not be zero")

    def values(self) -> list[int]:
        """The unrolled induction values."""
        return list(_py_range(self.start, self.end, self.step))

    def __iter__(self):
        raise RuntimeError("static_range can only be used in @triton.jit'd functions")

    def __repr__(self) -> str:
        return f"static_range({self.start}, {self.end}, {self.step})"


_py_range = range


class range:
    """`for i in tl.range(...)`: a loop that stays a loop, with compiler hints.

    `start`, `end`, `step` keep what the kernel passed (Python ints with constexpr
    unwrapped, or tensors); `step` defaults to 1 and `start` to 0. The hints
    (`num_stages`, `loop_unroll_factor`, `disallow_acc_multi_buffer`, `flatten`,
    `warp_specialize`, `disable_licm`) are stored unwrapped."""

    def __init__(self, arg1, arg2=None, step=None, num_stages=None, loop_unroll_factor=None,
                 disallow_acc_multi_buffer=False, flatten=False, warp_specialize=False, disable_licm=False):
        if arg2 is None:
            self.start, self.end = 0, unwrap_constexpr(arg1)
        else:
            self.start, self.end = unwrap_constexpr(arg1), unwrap_constexpr(arg2)
        self.step = 1 if step is None else unwrap_constexpr(step)
        if isinstance(self.step, int) and self.step == 0:
            raise ValueError("tl.range step must not be zero")
        self.num_stages = unwrap_constexpr(num_stages)
        self.loop_unroll_factor = unwrap_constexpr(loop_unroll_factor)
        self.disallow_acc_multi_buffer = bool(unwrap_constexpr(disallow_acc_multi_buffer))
        self.flatten = bool(unwrap_constexpr(flatten))
        self.warp_specialize = bool(unwrap_constexpr(warp_specialize))
        self.disable_licm = bool(unwrap_constexpr(disable_licm))

    def __iter__(self):
        raise RuntimeError("tl.range can only be used in @triton.jit'd functions")

    def __repr__(self) -> str:
        return f"tl.range({self.start!r}, {self.end!r}, {self.step!r})"


class condition:
    """`while tl.condition(cond, disable_licm=...)`: a while-loop condition with hints."""

    def __init__(self, arg1, disable_licm=False):
        self.condition = arg1
        self.disable_licm = bool(unwrap_constexpr(disable_licm))


class const:
    """Annotation marking a pointer argument read-only (`x_ptr: tl.const`)."""


def __getattr__(name: str) -> Any:
    """Triton's `triton.language.core` holds the whole language (`core.view`,
    `core.dtype`, `core.tensor`, ...), and programs reach the language through it; this
    module holds only the builtin machinery, so other names come from `tegula.language`
    (looked up on use: that package imports this module)."""
    from .. import language

    if name.startswith("__") or not hasattr(language, name):
        raise AttributeError(f"module 'tegula.language.core' has no attribute '{name}'")
    return getattr(language, name)


# Triton's core defines these; libraries use them in kernel signatures and helpers
# (flash-linear-attention: `descending: tl.constexpr = tl.core.CONSTEXPR_0`)
CONSTEXPR_0 = constexpr(0)


def _normalize_tuple(t: Any) -> Any:
    """Triton's helper: a list or tuple (constexprs unwrapped) as a tuple; anything else
    unwrapped."""
    t = unwrap_constexpr(t)
    if isinstance(t, (list, tuple)):
        return tuple(unwrap_constexpr(x) for x in t)
    return t


def _unwrap_shape(shape: Any) -> list:
    """Triton's helper: a shape's sizes as plain ints."""
    return [unwrap_constexpr(s) for s in unwrap_constexpr(shape)]


def _unwrap_if_constexpr(o: Any) -> Any:
    """Triton's helper (PyTorch's Inductor calls it inside kernels): the value of a
    constexpr, anything else unchanged."""
    return o.value if isinstance(o, constexpr) else o


_constexpr_to_value = _unwrap_if_constexpr

__all__ = ["Builtin", "builtin", "extern", "extern_elementwise", "is_builtin", "PropagateNan", "static_range",
           "range", "condition", "const", "constexpr"]
