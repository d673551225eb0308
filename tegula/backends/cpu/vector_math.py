"""Float math the CPU backend emits inline, so that LLVM's loop vectorizer keeps a loop
that calls it in SIMD registers (a libm call per element stops vectorization: the
loop is run as one `expf` call per lane).

`CpuScalarTarget` is the scalar lowering's target with these overrides; everything else
is `ScalarTarget`'s (LLVM intrinsics, the host C library).

- f32 `exp`: Cody–Waite reduction by ln 2 (two constants, FMAs), a degree-6 minimax
  polynomial on [-ln2/2, ln2/2] (SLEEF's `expf_u10` coefficients) and a scale by 2^q
  in two steps (gradual underflow); at most 1 ulp from the exact result over the whole
  range (checked against float64 on 2^24 random and special arguments in
  tests/backends/cpu), within docs/numerics.md's bound for the emulator's f32 exp,
  which the CPU backend is held to. NaN stays NaN, exp(+inf) = inf, exp(-inf) = 0.
"""
from __future__ import annotations

from typing import Sequence

import llvmlite.ir as ir

from ...ir.types import ScalarType
from ..llvm.intrinsics import intrinsic
from ..llvm.scalar_ops import ScalarTarget

F32 = ir.FloatType()
I32 = ir.IntType(32)

_EXP_POLY = (0.000198527617612853646278381, 0.00139304355252534151077271, 0.00833336077630519866943359,
             0.0416664853692054748535156, 0.166666671633720397949219, 0.5)
_LOG2E = 1.442695040888963407359924681001892137
_LN2_HI = 0.693145751953125
_LN2_LO = 1.428606765330187045e-06


def _f(x: float) -> ir.Constant:
    return ir.Constant(F32, x)


def _pow2(b: ir.IRBuilder, k: ir.Value) -> ir.Value:
    """2^k for an i32 k in [-126, 127], as a float."""
    return b.bitcast(b.shl(b.add(k, ir.Constant(I32, 127)), ir.Constant(I32, 23)), F32)


def exp_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    fma = lambda a, c, d: intrinsic(b, "fma", [a, c, d])  # noqa: E731
    # clamp first, so that the conversion to an integer is defined for every input
    xc = intrinsic(b, "minnum", [intrinsic(b, "maxnum", [x, _f(-104.0)]), _f(100.0)])
    q = intrinsic(b, "rint", [b.fmul(xc, _f(_LOG2E))])
    s = fma(q, _f(-_LN2_HI), xc)
    s = fma(q, _f(-_LN2_LO), s)
    u = _f(_EXP_POLY[0])
    for c in _EXP_POLY[1:]:
        u = fma(u, s, _f(c))
    u = b.fadd(_f(1.0), fma(b.fmul(s, s), u, s))
    qi = b.fptosi(q, I32)
    half = b.ashr(qi, ir.Constant(I32, 1))
    u = b.fmul(b.fmul(u, _pow2(b, half)), _pow2(b, b.sub(qi, half)))
    u = b.select(b.fcmp_ordered("<", x, _f(-104.0)), _f(0.0), u)
    u = b.select(b.fcmp_ordered(">", x, _f(100.0)), _f(float("inf")), u)
    return b.select(b.fcmp_unordered("uno", x, x), x, u)


class CpuScalarTarget(ScalarTarget):
    name = "cpu"

    def math(self, b: ir.IRBuilder, name: str, args: Sequence[ir.Value], t: ScalarType) -> ir.Value:
        if name == "exp" and t.name == "f32":
            return exp_f32(b, args[0])
        return super().math(b, name, args, t)
