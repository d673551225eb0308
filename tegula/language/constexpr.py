"""`constexpr`: a value known while the kernel is compiled.

Kernel parameters annotated `tl.constexpr`, literals and the results of arithmetic on
them are constexprs. Arithmetic and comparisons follow plain Python semantics and give
new constexprs (`constexpr(7) // 2 == constexpr(3)`), so shape computations such as
`BLOCK // 2` stay compile-time values. An operation with a tensor operand is left to the
tensor (the dunder returns NotImplemented), so `BLOCK + x` is a tensor, never a
constexpr wrapping one.
"""
from __future__ import annotations

from typing import Any


def _is_runtime_value(x: Any) -> bool:
    # A tensor (or anything else the frontend produces at run time) has a `handle`.
    return hasattr(x, "handle") and hasattr(x, "type") and not isinstance(x, constexpr)


class constexpr:
    """A compile-time value: `.value` is the wrapped Python object (never a constexpr)."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        while isinstance(value, constexpr):
            value = value.value
        self.value = value

    # ------------------------------------------------------------------ conversions
    def __repr__(self) -> str:
        return f"constexpr[{self.value!r}]"

    def __str__(self) -> str:
        return str(self.value)

    def __hash__(self) -> int:
        return hash(self.value)

    def __bool__(self) -> bool:
        return bool(self.value)

    def __index__(self) -> int:
        return self.value.__index__()

    def __int__(self) -> int:
        return int(self.value)

    def __float__(self) -> float:
        return float(self.value)

    def __iter__(self):
        return iter(self.value)

    def __len__(self) -> int:
        return len(self.value)

    def __call__(self, *args, **kwargs):
        return self.value(*args, **kwargs)

    def __getitem__(self, index):
        return self.value[unwrap_constexpr(index)]

    def __getattr__(self, name: str):
        # `ptr.dtype.element_ty` where the dtype arrived as a constexpr, `BLOCK.bit_length()`...
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(object.__getattribute__(self, "value"), name)

    # ------------------------------------------------------------------ Python-semantics operators
    def _binary(self, other, fn):
        if _is_runtime_value(other):
            return NotImplemented
        return constexpr(fn(self.value, unwrap_constexpr(other)))

    def __add__(self, o):
        return self._binary(o, lambda a, b: a + b)

    def __radd__(self, o):
        return self._binary(o, lambda a, b: b + a)

    def __sub__(self, o):
        return self._binary(o, lambda a, b: a - b)

    def __rsub__(self, o):
        return self._binary(o, lambda a, b: b - a)

    def __mul__(self, o):
        return self._binary(o, lambda a, b: a * b)

    def __rmul__(self, o):
        return self._binary(o, lambda a, b: b * a)

    def __truediv__(self, o):
        return self._binary(o, lambda a, b: a / b)

    def __rtruediv__(self, o):
        return self._binary(o, lambda a, b: b / a)

    def __floordiv__(self, o):
        return self._binary(o, lambda a, b: a // b)

    def __rfloordiv__(self, o):
        return self._binary(o, lambda a, b: b // a)

    def __mod__(self, o):
        return self._binary(o, lambda a, b: a % b)

    def __rmod__(self, o):
        return self._binary(o, lambda a, b: b % a)

    def __pow__(self, o):
        return self._binary(o, lambda a, b: a ** b)

    def __rpow__(self, o):
        return self._binary(o, lambda a, b: b ** a)

    def __lshift__(self, o):
        return self._binary(o, lambda a, b: a << b)

    def __rlshift__(self, o):
        return self._binary(o, lambda a, b: b << a)

    def __rshift__(self, o):
        return self._binary(o, lambda a, b: a >> b)

    def __rrshift__(self, o):
        return self._binary(o, lambda a, b: b >> a)

    def __and__(self, o):
        return self._binary(o, lambda a, b: a & b)

    def __rand__(self, o):
        return self._binary(o, lambda a, b: b & a)

    def __or__(self, o):
        return self._binary(o, lambda a, b: a | b)

    def __ror__(self, o):
        return self._binary(o, lambda a, b: b | a)

    def __xor__(self, o):
        return self._binary(o, lambda a, b: a ^ b)

    def __rxor__(self, o):
        return self._binary(o, lambda a, b: b ^ a)

    def __eq__(self, o):
        return self._binary(o, lambda a, b: a == b)

    def __ne__(self, o):
        return self._binary(o, lambda a, b: a != b)

    def __lt__(self, o):
        return self._binary(o, lambda a, b: a < b)

    def __le__(self, o):
        return self._binary(o, lambda a, b: a <= b)

    def __gt__(self, o):
        return self._binary(o, lambda a, b: a > b)

    def __ge__(self, o):
        return self._binary(o, lambda a, b: a >= b)

    def __neg__(self):
        return constexpr(-self.value)

    def __pos__(self):
        return constexpr(+self.value)

    def __invert__(self):
        return constexpr(~self.value)

    def __abs__(self):
        return constexpr(abs(self.value))

    def logical_and(self, o):
        return self._binary(o, lambda a, b: a and b)

    def logical_or(self, o):
        return self._binary(o, lambda a, b: a or b)

    def __not__(self):
        return constexpr(not self.value)


def unwrap_constexpr(x: Any) -> Any:
    """The Python value inside a constexpr; lists and tuples are unwrapped element-wise;
    anything else is returned unchanged."""
    if isinstance(x, constexpr):
        return x.value
    if isinstance(x, list):
        return [unwrap_constexpr(v) for v in x]
    if type(x) is tuple:
        return tuple(unwrap_constexpr(v) for v in x)
    return x


def is_power_of_two(n: int) -> bool:
    return isinstance(n, int) and n > 0 and (n & (n - 1)) == 0
