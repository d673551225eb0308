"""The part of `Semantic` every other part builds on: construction, wrapping IR values
as tensors, constants and Python-value conversion, and calling combine functions.

The Semantic is handed a `tegula.ir.builder.Builder` positioned where code goes; it
never moves the insertion point except to fill the regions it creates itself.
"""
from __future__ import annotations

import numbers
import warnings
from typing import Any, Callable, Optional, Sequence

import numpy as np

from .. import ir
from ..ir.builder import Builder
from . import dtypes as T
from .constexpr import unwrap_constexpr
from .core import Builtin
from .dtypes import block_type, dtype, from_ir
from .semantic_types import python_scalar_dtype
from .tensor import tensor

CallFunction = Callable[[Any, list], Any]


def fmt_shape(shape: Sequence[Any]) -> str:
    """`(128,)`, `(16, 32)`, `()`: a shape as users write it."""
    dims = tuple(int(unwrap_constexpr(d)) for d in shape)
    return str(dims)


def python_number(x: Any) -> Any:
    """`x` as a plain Python bool/int/float if it is a number (numpy scalars included),
    else `x` unchanged."""
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return float(x)
    return x


def is_python_number(x: Any) -> bool:
    return isinstance(x, numbers.Number) and not isinstance(x, complex)


def normalize_constant(value: Any, ty: dtype) -> Any:
    """`value` as the Python literal an IR constant of scalar `ty` holds: bools for int1,
    ints wrapped into the type's range (two's complement), floats for float types."""
    if ty.is_bool():
        return bool(value)
    if ty.is_int():
        if isinstance(value, float):
            if value != value or value in (float("inf"), float("-inf")):
                raise ValueError(f"cannot represent {value} as {ty}")
            value = int(value)
        bits = ty.int_bitwidth
        value = int(value) % (1 << bits)
        if ty.is_int_signed() and value >= 1 << (bits - 1):
            value -= 1 << bits
        return value
    if ty.is_floating():
        return float(value)
    raise TypeError(f"cannot make a constant of type {ty}")


class SemanticBase:
    """Construction and the helpers shared by all the typing rules."""

    def __init__(self, builder: Builder, options: Any = None, call_function: Optional[CallFunction] = None):
        self.builder = builder
        self.options = options
        self.call_function = call_function

    @property
    def debug(self) -> bool:
        return bool(getattr(self.options, "debug", False))

    def warn(self, message: str, category: type = UserWarning) -> None:
        """Warn at the kernel line being compiled (the builder's location), not at a
        line of tegula: the user's file:line is what a warning must name."""
        loc = getattr(self.builder, "loc", None)
        if loc is None or not getattr(loc, "line", 0):
            warnings.warn(message, category, stacklevel=3)
            return
        warnings.warn_explicit(message, category, loc.file, loc.line)

    # ------------------------------------------------------------------ tensors <-> IR
    def tensor(self, handle: ir.Value, type: dtype) -> tensor:
        return tensor(handle, type, self)

    def wrap(self, value: ir.Value) -> tensor:
        """A tensor for an IR value (kernel argument, block argument, loop result...)."""
        return tensor(value, from_ir(value.type), self)

    @staticmethod
    def ir_type_to_tl(t: ir.Type) -> dtype:
        return from_ir(t)

    @staticmethod
    def tl_type_to_ir(t: dtype) -> ir.Type:
        return T.as_dtype(t).to_ir()

    def emit(self, op: ir.Op, *operands: ir.Value, attrs: Any = None,
             type: Optional[ir.Type] = None) -> ir.Value:
        """Create a one-result instruction at the insertion point; return its result."""
        return self.builder.op1(op, *operands, attrs=attrs, type=type)

    def emit_tensor(self, op: ir.Op, *operands: tensor, attrs: Any = None,
                    type: Optional[dtype] = None) -> tensor:
        """Like `emit` over tensors; the result's tl type is `type` or derived from the IR."""
        v = self.emit(op, *(o.handle for o in operands), attrs=attrs,
                      type=None if type is None else type.to_ir())
        return tensor(v, type if type is not None else from_ir(v.type), self)

    # ------------------------------------------------------------------ constants
    def scalar_constant(self, value: Any, dtype: dtype) -> tensor:
        """A rank-0 constant of scalar `dtype`."""
        if dtype is None:
            raise ValueError("dtype must be specified when value is not a tensor")
        dtype = T.as_dtype(dtype)
        v = self.builder.constant(normalize_constant(python_number(value), dtype), dtype.to_ir())
        return tensor(v, dtype, self)

    def tile_constant(self, value: Any, dtype: dtype, shape: Sequence[int]) -> tensor:
        """A constant tile (or a scalar when `shape` is empty) with every element `value`."""
        if not shape:
            return self.scalar_constant(value, dtype)
        ty = block_type(dtype, list(shape))
        v = self.builder.constant(normalize_constant(python_number(value), dtype), ty.to_ir())
        return tensor(v, ty, self)

    def zero_like(self, x: tensor) -> tensor:
        return self.tile_constant(0, x.dtype, [int(s) for s in x.shape])

    def undefined(self, ty: dtype) -> tensor:
        """A value of type `ty` (scalar or block, numbers or pointers) whose contents the
        program may not rely on: what a function returns on a path that ends without a
        `return` while others return a value (Triton's `ub.poison`). tegula makes it
        zeros (null pointers), which cost one constant and keep runs deterministic."""
        shape = list(ty.shape) if ty.is_block() else []
        elem = ty.scalar
        if elem.is_ptr():
            return self.cast(self.tile_constant(0, T.int64, shape), ty)
        return self.tile_constant(0, elem, shape)

    def to_tensor(self, x: Any, check_type: bool = True) -> Any:
        """Python bool/int/float (or a constexpr of one) -> a constant tensor with Triton's
        default dtype (int1, int32/uint32/int64/uint64 by range, fp32 or fp64)."""
        if isinstance(x, tensor):
            return x
        x = python_number(unwrap_constexpr(x))
        if isinstance(x, (bool, int, float)):
            return self.scalar_constant(x, python_scalar_dtype(x))
        if check_type:
            what = "a dtype" if isinstance(x, dtype) else f"{x!r} of type {type(x).__name__}"
            raise TypeError(f"cannot convert {what} to a tensor")
        return x

    # ------------------------------------------------------------------ shapes
    @staticmethod
    def shape_of(x: tensor) -> tuple[int, ...]:
        return tuple(x.type.shape) if x.type.is_block() else ()

    def splat(self, value: tensor, shape: Sequence[int]) -> tensor:
        if value.type.is_block():
            raise ValueError(f"cannot splat a tensor of shape {fmt_shape(self.shape_of(value))}")
        if not shape:
            return value
        ty = block_type(value.type, list(shape))
        return tensor(self.builder.splat(value.handle, tuple(ty.shape)), ty, self)

    # ------------------------------------------------------------------ conditions
    def bool_condition(self, x: Any) -> tensor:
        """A scalar int1 for an `if`/`while` test: `x != 0` unless `x` is already a bool."""
        x = self.to_tensor(x)
        if x.type.is_block():
            raise ValueError(
                f"a condition must be a scalar, got a tensor of shape {fmt_shape(self.shape_of(x))}; "
                "reduce it first (e.g. tl.max(mask, 0) != 0) or use tl.where")
        return x if x.dtype.is_bool() else self.cast(x, T.int1)

    # ------------------------------------------------------------------ user functions
    def call_combine(self, fn: Any, args: list[tensor]) -> list[tensor]:
        """Call a combine function (a @jit function through the frontend's hook, a Builtin,
        or a plain Python callable over tensors) and return its results as a list."""
        fn = unwrap_constexpr(fn)
        if isinstance(fn, Builtin):
            result = fn.impl(self, *args)
        elif getattr(fn, "_tegula_jit", False):
            if self.call_function is None:
                raise RuntimeError("this Semantic has no call_function hook to inline @jit functions")
            result = self.call_function(fn, list(args))
        elif callable(fn):
            result = fn(*args)
        else:
            raise TypeError(f"combine_fn must be a @jit function, got {fn!r}")
        if isinstance(result, (tuple, list)):
            results = list(result)
        else:
            results = [result]
        return [self.to_tensor(r) for r in results]

    def build_region(self, arg_types: Sequence[dtype], body: Callable[[list[tensor]], list[tensor]],
                     expect: Sequence[dtype], what: str) -> ir.Block:
        """A region block with scalar arguments `arg_types`, filled by `body(args)`, ending in
        a yield of its results, which must have the types `expect`."""
        block = ir.Block()
        for t in arg_types:
            block.add_arg(t.to_ir())
        with self.builder.at_end_of(block):
            results = body([self.wrap(a) for a in block.args])
            if len(results) != len(expect):
                raise TypeError(f"{what} must return {len(expect)} value(s), got {len(results)}")
            handles = []
            for i, (r, ty) in enumerate(zip(results, expect)):
                if r.type.is_block():
                    raise TypeError(f"{what} must return scalars, but result {i} has shape "
                                    f"{fmt_shape(self.shape_of(r))}")
                if r.dtype != ty:
                    raise TypeError(f"{what} returned {r.dtype} for result {i}, expected {ty}")
                handles.append(r.handle)
            self.builder.yield_(handles)
        return block

    # Subclasses provide cast(); declared here so helpers above can call it.
    def cast(self, input: Any, dst_ty: dtype, fp_downcast_rounding: Optional[str] = None) -> tensor:
        raise NotImplementedError

