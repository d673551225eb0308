"""`tensor`: a value of the kernel being compiled (a scalar or a tile).

A tensor holds its IR value (`handle`), its Triton type (`type`: a scalar dtype or a
`block_type`), and the `Semantic` that made it (`_sem`). Every Python operator and every
method delegates to that Semantic, which owns the typing rules and emits the IR; nothing
here decides a type. Shapes follow Triton 3.6: `shape` is a tuple of constexpr (`()` for
a scalar) and `numel` a constexpr.
"""
from __future__ import annotations

import importlib
from typing import Any

from .base import base_value
from .constexpr import constexpr, unwrap_constexpr
from .dtypes import dtype


def delegate(module: str, name: str):
    """A method forwarding to builtin `name` of `tegula.language.<module>` with self first
    (any class whose instances have a `_sem`: tensors, block pointers). The import is
    lazy because the builtin modules import this one."""

    def method(self, *args, **kwargs):
        fn = getattr(importlib.import_module(f"tegula.language.{module}"), name)
        return fn.impl(self._sem, self, *args, **kwargs)

    method.__name__ = name
    method.__qualname__ = name
    method.__doc__ = f"Same as `tl.{name}(self, ...)`."
    return method


class tensor(base_value):
    """A scalar or tile value inside a @jit function."""

    def __init__(self, handle, type: dtype, sem=None):
        self.handle = handle
        self.type = type
        self._sem = sem

    # ------------------------------------------------------------------ structure
    @property
    def dtype(self) -> dtype:
        """The element type (Triton: `x.dtype` is the scalar type even for tiles)."""
        return self.type.scalar

    @property
    def shape(self) -> tuple:
        return tuple(constexpr(s) for s in self.type.shape) if self.type.is_block() else ()

    @property
    def numel(self) -> constexpr:
        return constexpr(self.type.numel if self.type.is_block() else 1)

    @property
    def T(self) -> "tensor":
        """The transpose of a 2-D tensor (the last two axes of a batched one)."""
        return self._sem.trans(self)

    def __str__(self) -> str:
        return f"{self.dtype}[{', '.join(str(s) for s in self.shape)}]"

    def __repr__(self) -> str:
        return f"<tl.tensor {self}>"

    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        raise TypeError(
            f"the truth value of a tensor ({self}) is only known when the kernel runs; "
            "use it as an `if`/`while` condition inside the kernel, or tl.where(...) to select values")

    def __iter__(self):
        raise TypeError(f"a tensor ({self}) cannot be iterated over; use tl.static_range or tl.range")

    def __len__(self) -> int:
        raise TypeError(f"len() of a tensor ({self}) is not defined; use x.shape[0] or x.numel")

    # ------------------------------------------------------------------ arithmetic
    def __add__(self, other):
        return self._sem.add(self, unwrap_constexpr(other))

    def __radd__(self, other):
        return self._sem.add(unwrap_constexpr(other), self)

    def __sub__(self, other):
        return self._sem.sub(self, unwrap_constexpr(other))

    def __rsub__(self, other):
        return self._sem.sub(unwrap_constexpr(other), self)

    def __mul__(self, other):
        return self._sem.mul(self, unwrap_constexpr(other))

    def __rmul__(self, other):
        return self._sem.mul(unwrap_constexpr(other), self)

    def __truediv__(self, other):
        return self._sem.truediv(self, unwrap_constexpr(other))

    def __rtruediv__(self, other):
        return self._sem.truediv(unwrap_constexpr(other), self)

    def __floordiv__(self, other):
        return self._sem.floordiv(self, unwrap_constexpr(other))

    def __rfloordiv__(self, other):
        return self._sem.floordiv(unwrap_constexpr(other), self)

    def __mod__(self, other):
        return self._sem.mod(self, unwrap_constexpr(other))

    def __rmod__(self, other):
        return self._sem.mod(unwrap_constexpr(other), self)

    def __pow__(self, other):
        raise TypeError("the ** operator is not supported on tensors (as in Triton); multiply explicitly, "
                        "or use tl.exp2(y * tl.log2(x)) for a real power")

    __rpow__ = __pow__

    def __matmul__(self, other):
        raise TypeError("the @ operator is not supported on tensors; use tl.dot(a, b)")

    __rmatmul__ = __matmul__

    def __neg__(self):
        return self._sem.minus(self)

    def __pos__(self):
        return self._sem.plus(self)

    def __invert__(self):
        return self._sem.invert(self)

    def __abs__(self):
        return delegate("math", "abs")(self)

    # ------------------------------------------------------------------ bitwise
    def __and__(self, other):
        return self._sem.and_(self, unwrap_constexpr(other))

    def __rand__(self, other):
        return self._sem.and_(unwrap_constexpr(other), self)

    def __or__(self, other):
        return self._sem.or_(self, unwrap_constexpr(other))

    def __ror__(self, other):
        return self._sem.or_(unwrap_constexpr(other), self)

    def __xor__(self, other):
        return self._sem.xor_(self, unwrap_constexpr(other))

    def __rxor__(self, other):
        return self._sem.xor_(unwrap_constexpr(other), self)

    def __lshift__(self, other):
        return self._sem.shl(self, unwrap_constexpr(other))

    def __rlshift__(self, other):
        return self._sem.shl(unwrap_constexpr(other), self)

    def __rshift__(self, other):
        # Triton picks arithmetic/logical shift from the left operand's own signedness.
        return self._sem.rshift(self, unwrap_constexpr(other), self.dtype.is_int_signed())

    def __rrshift__(self, other):
        return self._sem.rshift(unwrap_constexpr(other), self, self.dtype.is_int_signed())

    # ------------------------------------------------------------------ comparisons
    # Triton turns a Python operand of a comparison into a tensor first (no weak typing).
    def __lt__(self, other):
        return self._sem.less_than(self, self._sem.to_tensor(other))

    def __le__(self, other):
        return self._sem.less_equal(self, self._sem.to_tensor(other))

    def __gt__(self, other):
        return self._sem.greater_than(self, self._sem.to_tensor(other))

    def __ge__(self, other):
        return self._sem.greater_equal(self, self._sem.to_tensor(other))

    def __eq__(self, other):
        return self._sem.equal(self, self._sem.to_tensor(other))

    def __ne__(self, other):
        return self._sem.not_equal(self, self._sem.to_tensor(other))

    def logical_and(self, other):
        return self._sem.logical_and(self, self._sem.to_tensor(other))

    def logical_or(self, other):
        return self._sem.logical_or(self, self._sem.to_tensor(other))

    def __not__(self):
        return self._sem.not_(self)

    # ------------------------------------------------------------------ indexing
    def __getitem__(self, slices):
        """`x[:, None]`: None inserts a length-1 axis, `:` keeps one; nothing else is allowed."""
        slices = unwrap_constexpr(slices)
        if not isinstance(slices, (tuple, list)):
            slices = [slices]
        ret = self
        for dim, sl in enumerate(slices):
            sl = unwrap_constexpr(sl)
            if sl is None:
                ret = self._sem.expand_dims(ret, dim)
            elif isinstance(sl, slice) and all(unwrap_constexpr(a) is None
                                               for a in (sl.start, sl.stop, sl.step)):
                continue
            else:
                raise ValueError(f"unsupported tensor index: {sl!r} (only `None` and `:` are allowed)")
        return ret

    # ------------------------------------------------------------------ conversion
    def to(self, dtype: Any, fp_downcast_rounding=None, bitcast: bool = False) -> "tensor":
        """Cast to `dtype` (value conversion, or reinterpretation of the bits with bitcast=True)."""
        return delegate("core_builtins", "cast")(self, dtype, fp_downcast_rounding, bitcast)

    cast = delegate("core_builtins", "cast")

    # ------------------------------------------------------------------ shape
    broadcast_to = delegate("core_builtins", "broadcast_to")
    reshape = delegate("core_builtins", "reshape")
    view = delegate("core_builtins", "view")
    permute = delegate("core_builtins", "permute")
    trans = delegate("core_builtins", "trans")
    expand_dims = delegate("core_builtins", "expand_dims")
    split = delegate("core_builtins", "split")
    item = delegate("core_builtins", "item")
    store = delegate("core_builtins", "store")
    atomic_add = delegate("atomics", "atomic_add")
    atomic_and = delegate("atomics", "atomic_and")
    atomic_or = delegate("atomics", "atomic_or")
    atomic_xor = delegate("atomics", "atomic_xor")
    atomic_xchg = delegate("atomics", "atomic_xchg")
    atomic_max = delegate("atomics", "atomic_max")
    atomic_min = delegate("atomics", "atomic_min")
    atomic_cas = delegate("atomics", "atomic_cas")
    ravel = delegate("standard", "ravel")

    # ------------------------------------------------------------------ math
    exp = delegate("math", "exp")
    exp2 = delegate("math", "exp2")
    log = delegate("math", "log")
    log2 = delegate("math", "log2")
    cos = delegate("math", "cos")
    sin = delegate("math", "sin")
    sqrt = delegate("math", "sqrt")
    sqrt_rn = delegate("math", "sqrt_rn")
    rsqrt = delegate("math", "rsqrt")
    abs = delegate("math", "abs")
    erf = delegate("math", "erf")
    floor = delegate("math", "floor")
    ceil = delegate("math", "ceil")
    cdiv = delegate("standard", "cdiv")
    sigmoid = delegate("standard", "sigmoid")
    softmax = delegate("standard", "softmax")

    # ------------------------------------------------------------------ reductions and scans
    reduce = delegate("reductions", "reduce")
    associative_scan = delegate("reductions", "associative_scan")
    sum = delegate("reductions", "sum")
    max = delegate("reductions", "max")
    min = delegate("reductions", "min")
    argmax = delegate("reductions", "argmax")
    argmin = delegate("reductions", "argmin")
    xor_sum = delegate("reductions", "xor_sum")
    reduce_or = delegate("reductions", "reduce_or")
    cumsum = delegate("reductions", "cumsum")
    cumprod = delegate("reductions", "cumprod")
    sort = delegate("sorting", "sort")
    flip = delegate("sorting", "flip")
    topk = delegate("sorting", "topk")
    gather = delegate("indexing", "gather")
    histogram = delegate("indexing", "histogram")


def is_tensor(x: Any) -> bool:
    return isinstance(x, tensor)
