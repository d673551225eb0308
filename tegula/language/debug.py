"""Debugging and hint builtins: static_print / static_assert (run while compiling),
device_print / device_assert (run in the kernel; asserts only in debug mode),
multiple_of / max_contiguous / max_constancy / assume hints, and debug_barrier.
"""
from __future__ import annotations

import builtins as _py

from .constexpr import unwrap_constexpr
from .core import builtin
from .tensor import tensor

U = unwrap_constexpr


@builtin
def static_print(sem, *values, sep=" ", end="\n", file=None, flush=False):
    """Print `values` while the kernel compiles (tensors print as `fp32[128]`)."""
    _py.print(*(U(v) for v in values), sep=U(sep), end=U(end), file=U(file), flush=U(flush))
    return None


@builtin
def static_assert(sem, cond, msg=""):
    """Fail compilation with `msg` unless compile-time `cond` is true."""
    value = U(cond)
    if isinstance(value, tensor):
        raise ValueError("static_assert's condition could not be determined at compile time: it is a tensor; "
                         "make it depend only on constexpr values (or use tl.device_assert)")
    if not value:
        text = U(msg)
        raise AssertionError(f"static_assert failed: {text}" if text else "static_assert failed")
    return None


@builtin
def device_print(sem, prefix, *args, hex=False):
    """Print `prefix` and the values of `args` from every program instance at run time."""
    return sem.device_print(U(prefix), [U(a) for a in args], bool(U(hex)))


@builtin
def device_assert(sem, cond, msg="", mask=None):
    """Check `cond` at run time (only when compiled with debug=True)."""
    mask = U(mask)
    return sem.device_assert(U(cond), U(msg), mask)


def _hint_values(values, fn: str) -> list[int]:
    values = values if isinstance(values, (list, tuple)) else [values]
    out = []
    for i, v in enumerate(values):
        v = U(v)
        if not isinstance(v, int) or isinstance(v, bool):
            raise TypeError(f"{fn}: values element {i} must have type `constexpr[int]`, got {v!r}")
        out.append(v)
    return out


@builtin
def multiple_of(sem, input, values):
    """Tell the compiler every element of `input` is a multiple of `values` (per axis)."""
    return sem.multiple_of(U(input), _hint_values(values, "multiple_of"))


@builtin
def max_contiguous(sem, input, values):
    """Tell the compiler `input` holds runs of `values` consecutive integers (per axis)."""
    return sem.max_contiguous(U(input), _hint_values(values, "max_contiguous"))


@builtin
def max_constancy(sem, input, values):
    """Tell the compiler `input` holds runs of `values` equal elements (per axis)."""
    return sem.max_constancy(U(input), _hint_values(values, "max_constancy"))


@builtin
def assume(sem, cond):
    """Let the compiler assume `cond` holds."""
    return sem.assume(U(cond))


@builtin
def debug_barrier(sem):
    """Synchronize all threads of a program instance."""
    return sem.debug_barrier()

