"""f32 → bf16 narrowing in integer code, as the CPU backend emits it.

LLVM lowers `fptrunc float to bfloat` on an x86 host with AVX512-BF16 (or AVX-NE-CONVERT)
to `vcvtneps2bf16`, which ignores MXCSR and always treats subnormal inputs as zero: a
subnormal f32 would become ±0 on such a host and keep its value everywhere else, and in
the interpreter, in torch and on the GPU (`cvt.rn.bf16.f32` keeps subnormals). bf16 is
the top half of an f32's bits, so both roundings are a few integer operations that no
target rewrites, and that vectorize (where LLVM's own narrowing, with those instructions
turned off, is a `__truncsfbf2` call per element):

- nearest even (`rtne`): add 0x7FFF plus the lowest kept bit, drop the low half (a
  carry out of the mantissa rounds up into the exponent, up to inf, as it should);
- toward zero (`rtz`): drop the low half.

NaN keeps its sign and payload's top bits and is made quiet (the add could carry a
NaN into inf, the drop could clear every mantissa bit).
"""
from __future__ import annotations

import llvmlite.ir as ir

from ..llvm.types import BF16, I16, I32


def f32_to_bf16(b: ir.IRBuilder, v: ir.Value, rounding: str) -> ir.Value:
    bits = b.bitcast(v, I32)
    high = b.lshr(bits, ir.Constant(I32, 16))
    if rounding == "rtz":
        out = high
    else:
        odd = b.and_(high, ir.Constant(I32, 1))
        out = b.lshr(b.add(bits, b.add(odd, ir.Constant(I32, 0x7FFF))), ir.Constant(I32, 16))
    quiet = b.or_(high, ir.Constant(I32, 0x40))
    out = b.select(b.fcmp_unordered("uno", v, v), quiet, out)
    return b.bitcast(b.trunc(out, I16), BF16)
