"""Value conversions between scalar types, with the interpreter's semantics.

- float → float narrows with round-to-nearest-even (`rtne`) or toward zero (`rtz`);
- float → int truncates and saturates, NaN → 0 (`llvm.fpto[su]i.sat`, PTX `cvt.rzi`);
- anything → bool is `!= 0`; bool → number is 0/1;
- fp8 (held as i8 bit patterns) decodes exactly and encodes with round-to-nearest-even
  and saturation to the largest finite value (what PTX `cvt.rn.satfinite` does), in
  portable integer code here; a target may use hardware instructions instead
  (`ScalarTarget.convert`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Union

import llvmlite.ir as ir

from ...ir.types import F32, PointerType, ScalarType
from .intrinsics import call, intrinsic
from .types import F32 as LF32
from .types import F64 as LF64
from .types import I8, I32, float_bits_constant, llvm_type

if TYPE_CHECKING:
    from .scalar_ops import ScalarTarget

Elem = Union[ScalarType, PointerType]

_FLOAT_WIDTH = {"half": 16, "bfloat": 16, "float": 32, "double": 64}

# (exponent bits, mantissa bits, bias, code of the largest finite value, NaN code)
FP8_FORMATS = {
    "f8e4m3": (4, 3, 7, 0x7E, 0x7F),
    "f8e5m2": (5, 2, 15, 0x7B, 0x7E),
    "f8e4b15": (4, 3, 15, 0x7E, 0x7F),  # Triton's fp8e4b15 (no PTX type: always this code)
}


def convert(b: ir.IRBuilder, target: "ScalarTarget", v: ir.Value, src: Elem, dst: Elem,
            rounding: str = "rtne") -> ir.Value:
    if src == dst:
        return v
    if isinstance(src, PointerType) or isinstance(dst, PointerType):
        return _pointer_cast(b, v, src, dst)
    hooked = target.convert(b, v, src, dst, rounding)
    if hooked is not None:
        return hooked
    if dst.is_bool:
        if src.is_fp8:
            return b.icmp_unsigned("!=", b.and_(v, ir.Constant(I8, 0x7F)), ir.Constant(I8, 0))
        if src.is_float:
            return b.fcmp_unordered("!=", v, ir.Constant(v.type, 0.0))
        return b.icmp_unsigned("!=", v, ir.Constant(v.type, 0))
    if src.is_fp8:
        return convert(b, target, fp8_to_f32(b, v, src.name), F32, dst, rounding)
    if dst.is_float and dst.bits <= 16 and (not src.is_float or src.bits == 64):
        # round once into a 16/8-bit float: ints via f64 (exact to 2^53, as the
        # interpreter does), f64 via f32 rounded to odd, which the second rounding
        # cannot double-round (f32 has more than 2p + 2 bits for every narrow p)
        if not src.is_float:
            v = b.uitofp(v, LF64) if src.is_unsigned else b.sitofp(v, LF64)
        v = _f64_to_f32_toward_zero(b, v) if rounding == "rtz" else _f64_to_f32_odd(b, v)
        return convert(b, target, v, F32, dst, rounding)
    if dst.is_fp8:
        return f32_to_fp8(b, convert(b, target, v, src, F32, rounding), dst.name)
    if src.is_float and dst.is_float:
        return _float_to_float(b, target, v, src, dst, rounding)
    if dst.is_float:
        ty = llvm_type(dst)
        return b.uitofp(v, ty) if src.is_unsigned else b.sitofp(v, ty)
    if src.is_float:
        if src.bits < 32:
            v = b.fpext(v, LF32)
        name = "fptosi.sat" if dst.is_signed else "fptoui.sat"
        ty = llvm_type(dst)
        return call(b, f"llvm.{name}.i{ty.width}.{'f64' if src.bits == 64 else 'f32'}", ty, [v])
    ty = llvm_type(dst)
    if ty.width < v.type.width:
        return b.trunc(v, ty)
    if ty.width == v.type.width:
        return v
    return b.sext(v, ty) if src.is_signed else b.zext(v, ty)


def _pointer_cast(b: ir.IRBuilder, v: ir.Value, src: Elem, dst: Elem) -> ir.Value:
    if isinstance(src, PointerType) and isinstance(dst, PointerType):
        if src.address_space != dst.address_space:
            return b.addrspacecast(v, llvm_type(dst))
        return v
    if isinstance(src, PointerType):
        return b.ptrtoint(v, llvm_type(dst))
    return b.inttoptr(v, llvm_type(dst))


def _float_to_float(b: ir.IRBuilder, target: "ScalarTarget", v: ir.Value, src: ScalarType,
                    dst: ScalarType, rounding: str) -> ir.Value:
    if {src.name, dst.name} == {"f16", "bf16"}:
        # neither holds the other: widen exactly, then round once
        return _float_to_float(b, target, b.fpext(v, LF32), F32, dst, rounding)
    ty = llvm_type(dst)
    if dst.bits > src.bits:
        return b.fpext(v, ty)
    r = b.fptrunc(v, ty)
    if rounding == "rtz":
        r = _toward_zero_fix(b, v, r)
    return r


def _toward_zero_fix(b: ir.IRBuilder, x: ir.Value, r: ir.Value) -> ir.Value:
    """Turn a round-to-nearest narrowing `r` of `x` into round-toward-zero: when the
    rounded magnitude exceeds the input's, step one ulp toward zero (the bit pattern of
    a float's magnitude is monotonic, so that is "bits - 1")."""
    back = b.fpext(r, x.type)
    over = b.fcmp_ordered(">", intrinsic(b, "fabs", [back]), intrinsic(b, "fabs", [x]))
    ity = ir.IntType(_FLOAT_WIDTH[str(r.type)])
    bits = b.bitcast(r, ity)
    stepped = b.bitcast(b.sub(bits, ir.Constant(ity, 1)), r.type)
    return b.select(over, stepped, r)


def _f64_to_f32_toward_zero(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return _toward_zero_fix(b, x, b.fptrunc(x, LF32))


def _f64_to_f32_odd(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """f64 → f32 rounded to odd: truncate, then set the last bit if anything was lost."""
    t = _f64_to_f32_toward_zero(b, x)
    inexact = b.fcmp_ordered("!=", b.fpext(t, x.type), x)
    bits = b.or_(b.bitcast(t, I32), b.zext(inexact, I32))
    return b.bitcast(bits, LF32)


def fp8_to_f32(b: ir.IRBuilder, v: ir.Value, fmt: str) -> ir.Value:
    """Exact decoding of an fp8 bit pattern (i8) to f32."""
    e_bits, m_bits, bias, _max_code, _nan = FP8_FORMATS[fmt]
    x = b.zext(v, I32)

    def c(n: int) -> ir.Constant:
        return ir.Constant(I32, n)

    sign = b.shl(b.and_(x, c(0x80)), c(24))
    e = b.and_(b.lshr(x, c(m_bits)), c((1 << e_bits) - 1))
    m = b.and_(x, c((1 << m_bits) - 1))
    normal = b.or_(b.shl(b.add(e, c(127 - bias)), c(23)), b.shl(m, c(23 - m_bits)))
    # subnormal: m · 2^(1 - bias - m_bits), exact in f32
    scale = ir.Constant(LF32, 2.0 ** (1 - bias - m_bits))
    sub = b.bitcast(b.fmul(b.uitofp(m, LF32), scale), I32)
    bits = b.select(b.icmp_unsigned("==", e, c(0)), sub, normal)
    if fmt in ("f8e4m3", "f8e4b15"):
        is_nan = b.icmp_unsigned("==", b.and_(x, c(0x7F)), c(0x7F))
        bits = b.select(is_nan, c(0x7FC00000), bits)
    else:
        special = b.or_(c(0x7F800000), b.shl(m, c(21)))
        bits = b.select(b.icmp_unsigned("==", e, c(31)), special, bits)
    return b.bitcast(b.or_(bits, sign), LF32)


def f32_to_fp8(b: ir.IRBuilder, v: ir.Value, fmt: str) -> ir.Value:
    """f32 → fp8 bit pattern: round to nearest even, saturate to the largest finite
    value (infinities too, as `cvt.rn.satfinite`), NaN → the format's NaN code."""
    e_bits, m_bits, bias, max_code, nan_code = FP8_FORMATS[fmt]

    def c(n: int) -> ir.Constant:
        return ir.Constant(I32, n)

    x = b.bitcast(v, I32)
    sign = b.and_(b.lshr(x, c(24)), c(0x80))
    a = b.and_(x, c(0x7FFFFFFF))
    shift = 23 - m_bits
    # normal: round the 23-bit mantissa to m_bits (the carry may bump the exponent)
    rounded = b.add(b.add(a, c((1 << (shift - 1)) - 1)), b.and_(b.lshr(a, c(shift)), c(1)))
    normal = b.sub(b.lshr(rounded, c(shift)), c((127 - bias) << m_bits))
    # subnormal: a · 2^(bias - 1 + m_bits) rounded to an integer (ties to even)
    scaled = b.fmul(b.bitcast(a, LF32), ir.Constant(LF32, 2.0 ** (bias - 1 + m_bits)))
    sub = b.fptosi(intrinsic(b, "rint", [scaled]), I32)
    min_normal_bits = (1 - bias + 127) << 23
    code = b.select(b.icmp_unsigned(">=", a, c(min_normal_bits)), normal, sub)
    max_value = (1 + (max_code & ((1 << m_bits) - 1)) / (1 << m_bits)) * 2.0 ** ((max_code >> m_bits) - bias)
    code = b.select(b.icmp_unsigned(">", a, c(float_bits_constant(max_value))), c(max_code), code)
    code = b.select(b.icmp_unsigned(">", a, c(0x7F800000)), c(nan_code), code)
    return b.trunc(b.or_(code, sign), I8)
