"""Float math the CPU backend emits inline, so that LLVM's loop vectorizer keeps a loop
that calls it in SIMD registers (a libm call per element stops vectorization: the
loop is run as one `expf` call per lane).

`CpuScalarTarget` is the scalar lowering's target with these overrides; everything else
is `ScalarTarget`'s (LLVM intrinsics, the host C library), except f32 → bf16, narrowed
in integer code (`bf16_narrowing`) and bf16 arithmetic done in f32 then narrowed so:
with the host's bf16 instructions turned off (`host_jit.host_cpu`: they flush
subnormals) LLVM would narrow through a `__truncsfbf2` call per element, which stops
vectorization (a bf16 multiply-add over 16M elements: 43 ms against 5 ms inline).

- f32 `exp`: Cody–Waite reduction by ln 2 (two constants, FMAs), a degree-6 minimax
  polynomial on [-ln2/2, ln2/2] (SLEEF's `expf_u10` coefficients) and a scale by 2^q
  in two steps (gradual underflow); at most 1 ulp from the exact result over the whole
  range (checked against float64 on 2^24 random and special arguments in
  tests/backends/cpu), within docs/numerics.md's bound for the emulator's f32 exp,
  which the CPU backend is held to. NaN stays NaN, exp(+inf) = inf, exp(-inf) = 0.
- libdevice symbols the C library has no function for, but that have an exact
  definition in a few instructions (classification, bit casts, bit counts and reversal,
  high halves of products, mul24, saturate, powi as double pow rounded once): bitwise
  the interpreter's results (tests/numerics/test_libdevice.py); with those of
  `libdevice_rounded` and `libdevice_more`, every libdevice symbol runs here
  (`CPU_LIBDEVICE`: the ones defined in this backend, not by the C library).
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

import llvmlite.ir as ir

from ...ir.types import ScalarType
from ..llvm.intrinsics import call, intrinsic
from ..llvm.scalar_ops import ScalarTarget
from .bf16_narrowing import f32_to_bf16

F32 = ir.FloatType()
I32 = ir.IntType(32)

_EXP_POLY = (0.000198527617612853646278381, 0.00139304355252534151077271, 0.00833336077630519866943359,
             0.0416664853692054748535156, 0.166666671633720397949219, 0.5)
_LOG2E = 1.442695040888963407359924681001892137
_LN2_HI = 0.693145751953125
_LN2_LO = 1.428606765330187045e-06
_SHIFTER = 12582912.0  # 1.5 * 2^23


def _f(x: float) -> ir.Constant:
    return ir.Constant(F32, x)


def _pow2(b: ir.IRBuilder, k: ir.Value) -> ir.Value:
    """2^k for an i32 k in [-126, 127], as a float."""
    return b.bitcast(b.shl(b.add(k, ir.Constant(I32, 127)), ir.Constant(I32, 23)), F32)


def _scalef() -> bool:
    """Whether LLVM lowers a vector ldexp to one instruction here (AVX-512F's vscalef;
    elsewhere it becomes a C library call per lane)."""
    from ..llvm import host_jit
    return host_jit.simd_bytes() >= 64


def exp_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    fma = lambda a, c, d: intrinsic(b, "fma", [a, c, d])  # noqa: E731
    scalef = _scalef()
    # clamp first (compare and select: one vmaxps/vminps each; NaN becomes the lower
    # bound and is restored at the end), so that the conversion to an integer is
    # defined everywhere. With ldexp's single rounding the bounds can lie beyond the
    # range where exp is 0 or inf (|q| <= 289 keeps q * LN2_HI exact)
    bound = 200.0 if scalef else 104.0
    lo = b.select(b.fcmp_ordered(">", x, _f(-bound)), x, _f(-bound))
    xc = b.select(b.fcmp_ordered("<", lo, _f(bound)), lo, _f(bound))
    # q = round(x·log2 e) by the 1.5·2^23 shifter: t's low mantissa bits are q itself
    # (|x·log2 e| < 2^22), so the integer needs no conversion; any q within 1/2 + a few
    # ulps of x·log2 e works, since s below is formed exactly from q
    t = fma(xc, _f(_LOG2E), _f(_SHIFTER))
    q = b.fsub(t, _f(_SHIFTER))
    s = fma(q, _f(-_LN2_HI), xc)
    s = fma(q, _f(-_LN2_LO), s)
    u = _f(_EXP_POLY[0])
    for c in _EXP_POLY[1:]:
        u = fma(u, s, _f(c))
    u = b.fadd(_f(1.0), fma(b.fmul(s, s), u, s))
    qi = b.sub(b.bitcast(t, I32), b.bitcast(_f(_SHIFTER), I32))
    if scalef:
        # u * 2^q rounded once (AVX-512's vscalefps, one instruction): overflow to inf
        # and underflow to 0 come out right by themselves
        u = call(b, "llvm.ldexp.f32.i32", F32, [u, qi])
    else:
        half = b.ashr(qi, ir.Constant(I32, 1))
        u = b.fmul(b.fmul(u, _pow2(b, half)), _pow2(b, b.sub(qi, half)))
        # above 88.73 the scaling overflows to inf by itself; far below, the second
        # rounding could leave 2^-149 where exp rounds to 0
        u = b.select(b.fcmp_ordered("<", x, _f(-104.0)), _f(0.0), u)
    return b.select(b.fcmp_unordered("uno", x, x), x, u)


def _bool_i32(b: ir.IRBuilder, c: ir.Value) -> ir.Value:
    return b.zext(c, I32)


def _fabs_bits(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return intrinsic(b, "fabs", [x])


def _inf(x: ir.Value) -> ir.Constant:
    return ir.Constant(x.type, float("inf"))


def _signbit(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    ity = ir.IntType(64 if isinstance(x.type, ir.DoubleType) else 32)
    return _bool_i32(b, b.icmp_signed("<", b.bitcast(x, ity), ir.Constant(ity, 0)))


def _ffs(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """1 + the index of the lowest set bit, 0 for 0 (an i32)."""
    tz = intrinsic(b, "cttz", [x, ir.Constant(ir.IntType(1), 0)])
    tz = b.trunc(tz, I32) if x.type.width > 32 else tz
    return b.select(b.icmp_unsigned("==", x, ir.Constant(x.type, 0)), ir.Constant(I32, 0),
                    b.add(tz, ir.Constant(I32, 1)))


def _mulhi(b: ir.IRBuilder, x: ir.Value, y: ir.Value, signed: bool) -> ir.Value:
    w = x.type.width
    wide = ir.IntType(2 * w)
    ext = b.sext if signed else b.zext
    return b.trunc(b.lshr(b.mul(ext(x, wide), ext(y, wide)), ir.Constant(wide, w)), x.type)


def _mul24(b: ir.IRBuilder, x: ir.Value, y: ir.Value, signed: bool) -> ir.Value:
    """The low 32 bits of the product of the low 24 bits (sign-extended for mul24)."""
    if signed:
        lo = lambda v: b.ashr(b.shl(v, ir.Constant(I32, 8)), ir.Constant(I32, 8))  # noqa: E731
    else:
        lo = lambda v: b.and_(v, ir.Constant(I32, 0xFFFFFF))  # noqa: E731
    return b.mul(lo(x), lo(y))


def _saturate(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    # NaN -> 0, else clamp to [0, 1]
    c = b.select(b.fcmp_ordered(">", x, _f(1.0)), _f(1.0), x)
    c = b.select(b.fcmp_ordered("<", x, _f(0.0)), _f(0.0), c)
    return b.select(b.fcmp_unordered("uno", x, x), _f(0.0), c)


def _powi(b: ir.IRBuilder, x: ir.Value, n: ir.Value) -> ir.Value:
    """pow(x, n) in double, rounded once to x's type (the interpreter's definition)."""
    d = ir.DoubleType()
    xd = b.fpext(x, d) if x.type != d else x
    r = call(b, "pow", d, [xd, b.sitofp(n, d)])
    return b.fptrunc(r, x.type) if x.type != d else r


# libdevice symbols with an exact host definition here (the C library has none with
# the same meaning); `__nv_<name>` → emitter of (builder, args, result type)
_EXACT: dict[str, Callable] = {
    "isnanf": lambda b, a, r: _bool_i32(b, b.fcmp_unordered("uno", a[0], a[0])),
    "isnand": lambda b, a, r: _bool_i32(b, b.fcmp_unordered("uno", a[0], a[0])),
    "isinff": lambda b, a, r: _bool_i32(b, b.fcmp_ordered("==", _fabs_bits(b, a[0]), _inf(a[0]))),
    "isinfd": lambda b, a, r: _bool_i32(b, b.fcmp_ordered("==", _fabs_bits(b, a[0]), _inf(a[0]))),
    "finitef": lambda b, a, r: _bool_i32(b, b.fcmp_ordered("<", _fabs_bits(b, a[0]), _inf(a[0]))),
    "isfinited": lambda b, a, r: _bool_i32(b, b.fcmp_ordered("<", _fabs_bits(b, a[0]), _inf(a[0]))),
    "signbitf": lambda b, a, r: _signbit(b, a[0]),
    "signbitd": lambda b, a, r: _signbit(b, a[0]),
    "float_as_int": lambda b, a, r: b.bitcast(a[0], r),
    "float_as_uint": lambda b, a, r: b.bitcast(a[0], r),
    "int_as_float": lambda b, a, r: b.bitcast(a[0], r),
    "uint_as_float": lambda b, a, r: b.bitcast(a[0], r),
    "double_as_longlong": lambda b, a, r: b.bitcast(a[0], r),
    "longlong_as_double": lambda b, a, r: b.bitcast(a[0], r),
    "popc": lambda b, a, r: intrinsic(b, "ctpop", [a[0]]),
    "popcll": lambda b, a, r: b.trunc(intrinsic(b, "ctpop", [a[0]]), I32),
    "clz": lambda b, a, r: intrinsic(b, "ctlz", [a[0], ir.Constant(ir.IntType(1), 0)]),
    "clzll": lambda b, a, r: b.trunc(intrinsic(b, "ctlz", [a[0], ir.Constant(ir.IntType(1), 0)]), I32),
    "brev": lambda b, a, r: intrinsic(b, "bitreverse", [a[0]]),
    "brevll": lambda b, a, r: intrinsic(b, "bitreverse", [a[0]]),
    "ffs": lambda b, a, r: _ffs(b, a[0]),
    "ffsll": lambda b, a, r: _ffs(b, a[0]),
    "mulhi": lambda b, a, r: _mulhi(b, a[0], a[1], True),
    "umulhi": lambda b, a, r: _mulhi(b, a[0], a[1], False),
    "mul64hi": lambda b, a, r: _mulhi(b, a[0], a[1], True),
    "umul64hi": lambda b, a, r: _mulhi(b, a[0], a[1], False),
    "mul24": lambda b, a, r: _mul24(b, a[0], a[1], True),
    "umul24": lambda b, a, r: _mul24(b, a[0], a[1], False),
    "saturatef": lambda b, a, r: _saturate(b, a[0]),
    # 1 / sqrt(x), two roundings (the interpreter's definition; the GPU's rsqrt.approx
    # is within the same bound)
    "rsqrtf": lambda b, a, r: b.fdiv(ir.Constant(a[0].type, 1.0), intrinsic(b, "sqrt", [a[0]])),
    "rsqrt": lambda b, a, r: b.fdiv(ir.Constant(a[0].type, 1.0), intrinsic(b, "sqrt", [a[0]])),
    "powif": lambda b, a, r: _powi(b, a[0], a[1]),
    "powi": lambda b, a, r: _powi(b, a[0], a[1]),
}

def _host_libdevice() -> dict[str, Callable]:
    from .libdevice_more import MORE
    return {**MORE, **_EXACT}


HOST_LIBDEVICE = _host_libdevice()
# the libdevice symbols defined here (the others map to the C library's functions)
CPU_LIBDEVICE = frozenset("__nv_" + name for name in HOST_LIBDEVICE)


class CpuScalarTarget(ScalarTarget):
    name = "cpu"
    widen_bf16_arith = True  # every bf16 result narrowed inline by `convert` below (docstring)

    def math(self, b: ir.IRBuilder, name: str, args: Sequence[ir.Value], t: ScalarType) -> ir.Value:
        if name == "exp" and t.name == "f32":
            return exp_f32(b, args[0])
        return super().math(b, name, args, t)

    def extern(self, b: ir.IRBuilder, symbol: str, args: Sequence[ir.Value], ret: ir.Type) -> ir.Value:
        emit = HOST_LIBDEVICE.get(symbol[len("__nv_"):]) if symbol.startswith("__nv_") else None
        if emit is not None:
            return emit(b, list(args), ret)
        return super().extern(b, symbol, args, ret)

    def convert(self, b: ir.IRBuilder, v: ir.Value, src: ScalarType, dst: ScalarType,
                rounding: str) -> Optional[ir.Value]:
        # inline integer code, which vectorizes (module docstring)
        if src.name == "f32" and dst.name == "bf16":
            return f32_to_bf16(b, v, rounding)
        return None
