"""Triton 3.6's type promotion rules, as pure functions of dtypes (no IR involved).

- `integer_promote(a, b)`: C's usual arithmetic conversions on (width, signedness).
- `computation_type(a, a_is_python, b, b_is_python, div_or_mod)`: the type both
  operands of an arithmetic operator are converted to. A Python number (`*_is_python`)
  is "weak": when its kind (bool < int < float) is not above the tensor's, the tensor's
  dtype wins (`x_fp16 + 1.0` stays fp16, `x_i8 + 1` stays i8).
- `python_scalar_dtype(value)`: the dtype a bare Python number gets.
"""
from __future__ import annotations

from . import dtypes as T
from .dtypes import dtype


class IncompatibleTypeError(TypeError):
    """Two operand types no operator can combine (Triton's IncompatibleTypeErrorImpl)."""

    def __init__(self, a: dtype, b: dtype, op: str = ""):
        where = f" for '{op}'" if op else ""
        super().__init__(f"invalid operands of type {a} and {b}{where}")


def integer_promote(a: dtype, b: dtype) -> dtype:
    if a.int_signedness == b.int_signedness:
        return a if a.int_bitwidth > b.int_bitwidth else b
    if a.is_int_unsigned():
        return a if a.int_bitwidth >= b.int_bitwidth else b
    return b if b.int_bitwidth >= a.int_bitwidth else a


def computation_type(a: dtype, a_is_python: bool, b: dtype, b_is_python: bool, div_or_mod: bool,
                     op: str = "") -> dtype:
    if a_is_python != b_is_python:
        py_ty, tensor_ty = (a, b) if a_is_python else (b, a)
        if py_ty.kind().value <= tensor_ty.kind().value:
            # / and % have no native 16-bit float instruction: Triton computes them in fp32.
            if div_or_mod and tensor_ty in (T.float16, T.bfloat16):
                return T.float32
            return tensor_ty
    if a.is_fp64() or b.is_fp64():
        return T.float64
    if a.is_fp32() or b.is_fp32():
        return T.float32
    if a.is_fp16() or b.is_fp16():
        return T.float32 if div_or_mod else T.float16
    if a.is_bf16() and b.is_bf16():
        return T.float32 if div_or_mod else T.bfloat16
    if a.is_bf16() or b.is_bf16():
        return T.float32
    if a.is_fp8() and b.is_fp8():
        return a if a == b else T.float16
    if not a.is_int() or not b.is_int():
        raise TypeError(f"unexpected type {a} and {b}" + (f" for '{op}'" if op else ""))
    if div_or_mod and a.int_signedness != b.int_signedness:
        raise TypeError(
            f"Cannot use /, //, or % with {a!r} and {b!r} because they have different signedness; "
            "this is unlikely to result in a useful answer. Cast them to the same signedness.")
    return integer_promote(a, b)


_MIN_F32 = 2.0 ** -126
_MAX_F32 = (2 - 2.0 ** -23) * 2.0 ** 127


def python_scalar_dtype(value) -> dtype:
    """bool -> int1; int -> int32, uint32, int64 or uint64 by range; float -> fp32 unless its
    magnitude needs fp64."""
    if isinstance(value, bool):
        return T.int1
    if isinstance(value, int):
        if -2 ** 31 <= value < 2 ** 31:
            return T.int32
        if 2 ** 31 <= value < 2 ** 32:
            return T.uint32
        if -2 ** 63 <= value < 2 ** 63:
            return T.int64
        if 2 ** 63 <= value < 2 ** 64:
            return T.uint64
        raise ValueError(f"Nonrepresentable integer {value}.")
    if isinstance(value, float):
        a = abs(value)
        if a == float("inf") or a == 0.0 or value != value or _MIN_F32 <= a <= _MAX_F32:
            return T.float32
        return T.float64
    raise TypeError(f"cannot convert {value!r} of type {type(value).__name__} to tensor")
