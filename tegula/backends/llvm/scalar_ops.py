"""Lowering of one scalar application of an elementwise op to LLVM IR, read from the op
table's LLVM strings (`ops.OP_INFO[op].llvm`, keyed by type class).

The compiled backends call `lower_op` once per register (the GPU) or per loop element
(the host) with llvmlite values. What differs between targets (math functions, fast
division, hardware conversions) is asked of a `ScalarTarget`; the base class here is the
generic LLVM answer (intrinsics and libm names), which the host can use as is and the
NVPTX target overrides with libdevice and PTX instructions.

Semantics follow the reference interpreter (`ir.numpy_ops`): integer division by zero
gives -1 (quotient) and the dividend (remainder), shifts by the bit width or more give 0
(or the sign fill), float → int conversion saturates and maps NaN to 0. LLVM would call
those cases poison, so they are guarded with selects, which fold away for constants.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import llvmlite.ir as ir

from ...ir.ops import OP_INFO, Op, type_class
from ...ir.ptx_equivalents import equivalent_of
from ...ir.types import F32, ScalarType, Type, element_of
from . import casts
from .host_libm import host_libm_name
from .intrinsics import call, intrinsic
from .types import llvm_type, memory_type

# Float math the generic path maps to LLVM intrinsics (`llvm.<name>.<ty>`).
_FLOAT_INTRINSICS = {
    "exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "sin": "sin", "cos": "cos",
    "sqrt": "sqrt", "sqrt_rn": "sqrt", "ceil": "ceil", "floor": "floor", "fabs": "fabs",
    "fma": "fma",
}

_CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
        "slt": "<", "sle": "<=", "sgt": ">", "sge": ">=",
        "ult": "<", "ule": "<=", "ugt": ">", "uge": ">=",
        "oeq": "==", "one": "!=", "olt": "<", "ole": "<=", "ogt": ">", "oge": ">=",
        "une": "!="}

_ASM_ONLY_ON_GPU = ("tl.inline_asm_elementwise runs PTX assembly, which only an NVIDIA GPU executes; "
                    "run the kernel on CUDA tensors")


class ScalarTarget:
    """Target hooks of the scalar lowering; the defaults are plain LLVM."""

    name = "generic"
    # math computed on f16 directly (the rest goes through f32, as Triton does)
    native_half: frozenset[str] = frozenset({"fabs"})
    # Mark float add/sub/mul `contract`, so LLVM may fuse a multiply into the add that
    # uses it (one rounding instead of two: Triton's `enable_fp_fusion`, on by default
    # there). Off here: the host backends round every op as the interpreter does.
    fp_contract: bool = False
    # Compute bf16 arithmetic in f32 and narrow through `convert` (as fp8 always is),
    # instead of LLVM's `fadd bfloat`: LLVM legalizes that by promoting to f32 and
    # narrowing with its own fptrunc, which a target may have to avoid (the CPU's
    # AVX512-BF16 narrowing flushes subnormals; backends/cpu/bf16_narrowing.py).
    widen_bf16_arith: bool = False

    def math(self, b: ir.IRBuilder, name: str, args: Sequence[ir.Value], t: ScalarType) -> ir.Value:
        """`name` (an op table `math:` name, or `fmod`, `fdiv_fast`, `fmax_nan`,
        `fmin_nan`, `rsqrt`) on f32/f64/f16 operands of scalar type `t`."""
        if name in _FLOAT_INTRINSICS:
            return intrinsic(b, _FLOAT_INTRINSICS[name], list(args))
        if name == "fmax":
            return intrinsic(b, "maxnum", list(args))
        if name == "fmin":
            return intrinsic(b, "minnum", list(args))
        if name == "fmax_nan":
            return intrinsic(b, "maximum", list(args))
        if name == "fmin_nan":
            return intrinsic(b, "minimum", list(args))
        if name == "rsqrt":
            one = ir.Constant(args[0].type, 1.0)
            return b.fdiv(one, intrinsic(b, "sqrt", list(args)))
        if name == "fdiv_fast":
            return b.fdiv(args[0], args[1])
        if name == "fmod":
            return b.frem(args[0], args[1])
        if name == "erf":
            return call(b, "erff" if t.bits <= 32 else "erf", args[0].type, list(args))
        raise NotImplementedError(f"math function '{name}' on {t}")

    def extern(self, b: ir.IRBuilder, symbol: str, args: Sequence[ir.Value], ret: ir.Type) -> ir.Value:
        """A call of library function `symbol` (a libdevice `__nv_*` name): on the host,
        the C library function of the same meaning where there is one."""
        name = host_libm_name(symbol)
        if name is None:
            raise NotImplementedError(f"the host has no implementation of the library function '{symbol}' "
                                      "(libdevice functions run on the GPU and in the interpreter)")
        return call(b, name, ret, list(args))

    def convert(self, b: ir.IRBuilder, v: ir.Value, src: ScalarType, dst: ScalarType,
                rounding: str) -> Optional[ir.Value]:
        """A target-specific conversion, or None to use the generic one."""
        return None


def _compute_type(t: ScalarType) -> ScalarType:
    """fp8 has no arithmetic: compute in f32."""
    return F32 if t.is_fp8 else t


def lower_math(b: ir.IRBuilder, target: ScalarTarget, name: str, args: Sequence[ir.Value],
               t: ScalarType) -> ir.Value:
    """Float math on any float type: narrow types go through f32 unless native."""
    if t.name in ("f32", "f64") or (t.name == "f16" and name in target.native_half):
        return target.math(b, name, args, t)
    wide = [casts.convert(b, target, a, t, F32) for a in args]
    return casts.convert(b, target, target.math(b, name, wide, F32), F32, t)


def _int_math(b: ir.IRBuilder, name: str, args: Sequence[ir.Value], t: ScalarType) -> ir.Value:
    a = args[0]
    if name == "iabs":
        return intrinsic(b, "abs", [a, ir.Constant(ir.IntType(1), 0)])
    if name in ("smax", "umax", "smin", "umin"):
        return intrinsic(b, name, list(args))
    if name == "umulhi":
        w = a.type.width
        wide = ir.IntType(2 * w)
        prod = b.mul(b.zext(a, wide), b.zext(args[1], wide))
        return b.trunc(b.lshr(prod, ir.Constant(wide, w)), a.type)
    raise NotImplementedError(f"integer math '{name}'")


def _guarded_div(b: ir.IRBuilder, code: str, x: ir.Value, y: ir.Value) -> ir.Value:
    """C-style integer division and remainder with the interpreter's answers where LLVM
    has none: x/0 = -1, x%0 = x, MIN/-1 wraps."""
    ty = x.type
    zero, one, minus1 = ir.Constant(ty, 0), ir.Constant(ty, 1), ir.Constant(ty, -1)
    is_zero = b.icmp_unsigned("==", y, zero)
    signed = code in ("sdiv", "srem")
    if signed:
        is_m1 = b.icmp_signed("==", y, minus1)
        safe = b.select(b.or_(is_zero, is_m1), one, y)
    else:
        safe = b.select(is_zero, one, y)
    if code == "sdiv":
        q = b.select(is_m1, b.sub(zero, x), b.sdiv(x, safe))
        return b.select(is_zero, minus1, q)
    if code == "udiv":
        return b.select(is_zero, minus1, b.udiv(x, safe))
    if code == "srem":
        r = b.select(is_m1, zero, b.srem(x, safe))
        return b.select(is_zero, x, r)
    return b.select(is_zero, x, b.urem(x, safe))


def _shift(b: ir.IRBuilder, code: str, x: ir.Value, y: ir.Value) -> ir.Value:
    ty = x.type
    width = ir.Constant(ty, ty.width)
    big = b.icmp_unsigned(">=", y, width)
    if code == "ashr":
        return b.ashr(x, b.select(big, ir.Constant(ty, ty.width - 1), y))
    out = b.shl(x, y) if code == "shl" else b.lshr(x, y)
    return b.select(big, ir.Constant(ty, 0), out)


def _offset_to_i64(b: ir.IRBuilder, off: ir.Value, t: ScalarType) -> ir.Value:
    """Pointer offsets are sign-extended (unsigned: zero-extended) to 64 bits before the
    GEP, so an i32 offset can address past 2^31 bytes."""
    if off.type.width == 64:
        return off
    return b.sext(off, ir.IntType(64)) if t.is_signed else b.zext(off, ir.IntType(64))


def lower_op(b: ir.IRBuilder, target: ScalarTarget, op: Op, attrs: Any,
             args: Sequence[ir.Value], arg_types: Sequence[Type], result_type: Type) -> ir.Value:
    """One scalar application of elementwise `op` (operands already in registers)."""
    res = element_of(result_type)
    if op is Op.CAST:
        return casts.convert(b, target, args[0], element_of(arg_types[0]), res,
                             getattr(attrs, "rounding", "rtne"))
    if op is Op.BITCAST:
        dst = llvm_type(res)
        return args[0] if args[0].type == dst else b.bitcast(args[0], dst)
    if op is Op.PTR_TO_INT:
        return b.ptrtoint(args[0], llvm_type(res))
    if op is Op.INT_TO_PTR:
        return b.inttoptr(args[0], llvm_type(res))
    if op is Op.ADDPTR:
        pointee = element_of(arg_types[0]).pointee  # type: ignore[union-attr]
        off = _offset_to_i64(b, args[1], element_of(arg_types[1]))
        return b.gep(args[0], [off], source_etype=memory_type(pointee))
    if op is Op.SELECT:
        return b.select(args[0], args[1], args[2])
    if op is Op.EXTERN_ELEMENTWISE:
        return target.extern(b, attrs.symbol, list(args), llvm_type(res))
    if op is Op.INLINE_ASM:
        # the CUDA backend lowers it itself, `pack` elements at a time (lower_inline_asm.py);
        # on the host only a one-instruction approximation runs, as its libdevice function
        symbol = equivalent_of(attrs, arg_types, result_type)
        if symbol is None:
            raise NotImplementedError(_ASM_ONLY_ON_GPU)
        return target.extern(b, symbol, list(args), llvm_type(res))

    t = element_of(arg_types[0])
    cls = type_class(arg_types[0])
    code = OP_INFO[op].llvm.get(cls)
    if code is None:
        raise NotImplementedError(f"no LLVM lowering of '{op.value}' for {t}")
    if isinstance(t, ScalarType) and cls == "float" and (
            t.is_fp8 or (t.name == "bf16" and target.widen_bf16_arith)):
        # no fp8 arithmetic anywhere (nor bf16 where the target says so): widen,
        # compute, and narrow float results
        wide = [casts.convert(b, target, a, t, F32) for a in args]
        out_t = F32 if element_of(result_type) == t else element_of(result_type)
        r = lower_op(b, target, op, attrs, wide, [F32] * len(args), out_t)
        return casts.convert(b, target, r, F32, t) if out_t == F32 else r
    return _lower_code(b, target, code, op, attrs, list(args), t)


def _lower_code(b: ir.IRBuilder, target: ScalarTarget, code: str, op: Op, attrs: Any,
                args: list[ir.Value], t: Any) -> ir.Value:
    x = args[0]
    y = args[1] if len(args) > 1 else None
    if code.startswith("math:"):
        name = code[5:]
        if isinstance(t, ScalarType) and not t.is_float:
            return _int_math(b, name, args, t)
        if name in ("fmax", "fmin") and getattr(attrs, "propagate_nan", False):
            name += "_nan"
        return lower_math(b, target, name, args, t)
    if code.startswith(("icmp", "fcmp")):
        kind, pred = code.split()
        if kind == "fcmp":
            fn = b.fcmp_unordered if pred.startswith("u") else b.fcmp_ordered
            return fn(_CMP[pred], x, y)
        fn = b.icmp_unsigned if pred[0] == "u" or pred in ("eq", "ne") else b.icmp_signed
        return fn(_CMP[pred], x, y)
    if code in ("fadd", "fsub", "fmul"):
        flags = ("contract",) if target.fp_contract else ()
        return getattr(b, code)(x, y, flags=flags)
    simple = {"add": b.add, "sub": b.sub, "mul": b.mul, "and": b.and_, "or": b.or_,
              "xor": b.xor, "fdiv": b.fdiv}
    if code in simple:
        return simple[code](x, y)
    if code in ("sdiv", "udiv", "srem", "urem"):
        return _guarded_div(b, code, x, y)
    if code in ("shl", "ashr", "lshr"):
        return _shift(b, code, x, y)
    if code == "sub0":
        return b.sub(ir.Constant(x.type, 0), x)
    if code == "fneg":
        return b.fneg(x)
    if code == "xor-1":
        return b.not_(x)
    if code == "identity":
        return x
    if code == "frem":
        return lower_math(b, target, "fmod", args, t)
    if code == "fdiv_fast":
        name = "fdiv_fast" if not getattr(attrs, "ieee_rounding", False) else None
        if name is None or t.name != "f32":
            return b.fdiv(x, y)
        return target.math(b, name, args, t)
    raise NotImplementedError(f"LLVM op string '{code}' ({op.value})")
