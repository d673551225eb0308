"""IR types → llvmlite types, and IR constants → llvmlite constants.

Registers hold a value in its *register type*: `i1` for booleans, `half`, `bfloat`,
`float`, `double`, `iN`, and `i8` bit patterns for the fp8 types (LLVM has no fp8).
In memory a boolean is one byte (`memory_type`), as in Triton.
"""
from __future__ import annotations

import math
import struct
from typing import Any, Union

import llvmlite.ir as ir
import numpy as np
from llvmlite.ir.types import _BaseFloatType

from ...ir.numpy_ops import FP8_ENCODE, f32_to_bf16_bits
from ...ir.types import PointerType, ScalarType, TileType, Type, element_of


class BFloatType(_BaseFloatType):
    """LLVM's `bfloat`, which llvmlite.ir lacks (built on its private float base)."""

    null = "0.0"
    intrinsic_name = "bf16"

    def __str__(self) -> str:
        return "bfloat"

    def format_constant(self, value: float) -> str:
        bits = int(f32_to_bf16_bits(np.array([value], dtype=np.float32))[0])
        return f"0xR{bits:04X}"


BFloatType._create_instance()

I1, I8, I16, I32, I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))
F16, BF16, F32, F64 = ir.HalfType(), BFloatType(), ir.FloatType(), ir.DoubleType()
VOID = ir.VoidType()

_SCALARS = {
    "i1": I1, "i8": I8, "i16": I16, "i32": I32, "i64": I64,
    "u8": I8, "u16": I16, "u32": I32, "u64": I64,
    "f8e4m3": I8, "f8e5m2": I8, "f8e4b15": I8, "f16": F16, "bf16": BF16, "f32": F32, "f64": F64,
}

ElementType = Union[ScalarType, PointerType]


def ptr_type(address_space: int = 1) -> ir.PointerType:
    return ir.PointerType(addrspace=address_space)


def llvm_type(t: Type) -> ir.Type:
    """The register type of one element of `t` (a tile's element, or a scalar)."""
    e = element_of(t)
    if isinstance(e, PointerType):
        return ptr_type(e.address_space)
    return _SCALARS[e.name]


def memory_type(t: Type) -> ir.Type:
    """The in-memory type of one element (booleans are bytes)."""
    e = element_of(t)
    if isinstance(e, ScalarType) and e.is_bool:
        return I8
    return llvm_type(e)


def byte_size(t: Type) -> int:
    e = element_of(t)
    return 8 if isinstance(e, PointerType) else e.bytes


def int_bits(v: int, bits: int) -> int:
    """`v` wrapped to a signed `bits`-wide integer (LLVM's constant syntax)."""
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) and bits > 1 else v


def constant(t: Type, value: Any) -> ir.Constant:
    """An LLVM constant of the element type of `t` holding the IR literal `value`."""
    e = element_of(t)
    ty = llvm_type(e)
    if isinstance(e, PointerType):
        return ir.Constant(I64, int(value or 0)).inttoptr(ty) if value else ir.Constant(ty, None)
    if e.is_bool:
        return ir.Constant(I1, int(bool(value)))
    if e.is_fp8:
        return ir.Constant(I8, int(FP8_ENCODE[e.name](np.array([float(value)]))[0]))
    if e.is_int:
        if isinstance(value, float):
            value = int(value) if math.isfinite(value) else 0
        return ir.Constant(ty, int_bits(int(value), e.bits))
    return ir.Constant(ty, float(value))


def float_bits_constant(value: float) -> int:
    return struct.unpack("<I", struct.pack("<f", value))[0]


def is_tile(t: Type) -> bool:
    return isinstance(t, TileType)
