"""Rules of conversions and pointer arithmetic: cast, bitcast, ptr_to_int, int_to_ptr,
addptr.

- `cast` converts values with `numpy_ops.cast_value` (Triton's semantics: float → int
  truncates and saturates, NaN → 0; narrowing floats round to nearest even). With
  `CastAttrs(rounding="rtz")` a narrowing float cast rounds toward zero instead: the
  nearest-even result is stepped one value toward zero wherever it rounded up in
  magnitude.
- `bitcast` reinterprets the memory image (`values.to_memory` / `from_memory`), so
  bf16 <-> i16 moves bit patterns; pointer → pointer bitcasts only change the pointee
  type, which lives in the IR type, so the value is shared.
- `addptr` adds `offset * sizeof(pointee)` bytes.
"""
from __future__ import annotations

import numpy as np

from ...ir import numpy_ops as npo
from ...ir.core import Instr
from ...ir.ops import Op
from ...ir.types import PointerType, ScalarType, element_of
from .compiler import Compiler
from .memory import Ptr
from .registry import MEMORY_SLOT, Step, rule
from .values import from_memory, memory_dtype, storage_dtype, to_memory


def _toward_zero(x: np.ndarray, rounded: np.ndarray, dst: ScalarType) -> np.ndarray:
    """Turn a round-to-nearest-even result into round-toward-zero."""
    x64 = np.asarray(x, dtype=np.float64)
    up = np.abs(np.asarray(rounded, dtype=np.float64)) > np.abs(x64)
    if not np.any(up):
        return rounded
    if dst.name == "f16" or dst.name in ("f32", "f64"):
        down = np.nextafter(rounded, np.zeros((), rounded.dtype))
        return np.where(up, down, rounded).astype(rounded.dtype)
    # bf16 / fp8: step the code (sign-magnitude, so magnitude - 1 is toward zero).
    code = to_memory(rounded, dst)
    lower = np.where(up, code - 1, code).astype(code.dtype)
    return np.asarray(from_memory(lower, dst), dtype=np.float32)


def _cast_fn(src, dst, rounding: str):
    if isinstance(src, PointerType) or isinstance(dst, PointerType):
        raise NotImplementedError(f"cast between {src} and {dst}: use bitcast/ptr_to_int/int_to_ptr")
    narrowing = (src.is_float and dst.is_float and dst.bits < src.bits
                 or src.is_float and dst.is_fp8)
    if rounding == "rtz" and narrowing:
        return lambda x: _toward_zero(x, npo.cast_value(x, src, dst), dst)
    return lambda x: npo.cast_value(x, src, dst)


@rule(Op.CAST)
def cast(ins: Instr, c: Compiler) -> Step:
    src, dst = element_of(ins.operands[0].type), element_of(ins.result.type)
    rounding = ins.attrs.rounding if ins.attrs is not None else "rtne"
    a = c.slot(ins.operands[0])
    if src == dst:
        c.alias(ins.result, a)
        return None
    fn = _cast_fn(src, dst, rounding)
    o = c.slot(ins.result)

    def step(env):
        env[o] = fn(env[a])
    return step


@rule(Op.BITCAST)
def bitcast(ins: Instr, c: Compiler) -> Step:
    src, dst = element_of(ins.operands[0].type), element_of(ins.result.type)
    a = c.slot(ins.operands[0])
    if isinstance(src, PointerType) and isinstance(dst, PointerType) or src == dst:
        c.alias(ins.result, a)
        return None
    if isinstance(src, PointerType) or isinstance(dst, PointerType):
        # ptr <-> 64-bit integer: through the fake address space.
        return _ptr_to_int(ins, c) if isinstance(src, PointerType) else _int_to_ptr(ins, c)
    if src.bits != dst.bits:
        raise NotImplementedError(f"bitcast between {src} and {dst} of different widths")
    dst_mem = memory_dtype(dst)
    o = c.slot(ins.result)

    def step(env):
        env[o] = from_memory(to_memory(env[a], src).view(dst_mem), dst)
    return step


@rule(Op.PTR_TO_INT)
def _ptr_to_int(ins: Instr, c: Compiler) -> Step:
    a, o = c.slot(ins.operands[0]), c.slot(ins.result)
    dt = storage_dtype(element_of(ins.result.type))

    def step(env):
        env[o] = np.asarray(env[MEMORY_SLOT].address(env[a])).astype(dt)[()]
    return step


@rule(Op.INT_TO_PTR)
def _int_to_ptr(ins: Instr, c: Compiler) -> Step:
    a, o = c.slot(ins.operands[0]), c.slot(ins.result)
    src = element_of(ins.operands[0].type)
    unsigned = src.is_unsigned

    def step(env):
        x = np.asarray(env[a])
        # Unsigned (and narrow) integers zero-extend to 64 bits; signed ones sign-extend.
        addr = x.astype(np.uint64).view(np.int64) if unsigned else x.astype(np.int64)
        env[o] = env[MEMORY_SLOT].resolve(addr)
    return step


@rule(Op.ADDPTR)
def addptr(ins: Instr, c: Compiler) -> Step:
    p, i = c.slots(ins.operands)
    o = c.slot(ins.result)
    pointee = element_of(ins.operands[0].type).pointee
    size = np.int64(pointee.bytes)
    unsigned = element_of(ins.operands[1].type).is_unsigned

    def step(env):
        ptr, idx = env[p], env[i]
        if unsigned:
            idx = np.asarray(idx).astype(np.uint64).view(np.int64)[()]
        env[o] = Ptr(ptr.buf, ptr.off + np.asarray(idx, dtype=np.int64)[()] * size)
    return step
