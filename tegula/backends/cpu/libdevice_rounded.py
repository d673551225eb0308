"""libdevice's explicitly rounded arithmetic and conversions on the host
(`__nv_{f,d}{add,sub,mul,div,rcp,sqrt}_{rn,rz,rd,ru}`, `__nv_fma{f,}_r*`,
`__nv_double2float_r*`, the integer ↔ float conversions with a rounding mode), as LLVM
IR the loop vectorizer keeps in SIMD registers — no change of the FPU's rounding mode.

Each result is the hardware's round-to-nearest result r plus the sign of the exact
error (exact − r), from an error-free transformation (TwoSum, an fma remainder, or the
operation done exactly in double for f32 operands); a directed mode then steps r one
value down or up where the exact result lies on the other side. That is the
interpreter's definition (`ir/libdevice_exact.py`, exact rationals): bitwise equal,
including its +0 for an exact zero and its overflow to the largest finite value where
the direction forbids infinity (f64 remainders that could underflow are formed on
operands scaled by powers of two). One approximation: the error sign of an f64 `fma`
is formed from four double-precision terms, and may be wrong under extreme
cancellation or when x·y is below 2^-969 (its error term underflows).
"""
from __future__ import annotations

from typing import Callable

import llvmlite.ir as ir

from ..llvm.intrinsics import intrinsic

F32, F64 = ir.FloatType(), ir.DoubleType()
I1 = ir.IntType(1)
Emit = Callable[[ir.IRBuilder, list, ir.Type], ir.Value]


def _c(t: ir.Type, v) -> ir.Constant:
    return ir.Constant(t, v)


def _int_of(t: ir.Type) -> ir.IntType:
    return ir.IntType(64 if t == F64 else 32)


def _finite(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return b.fcmp_ordered("<", intrinsic(b, "fabs", [x]), _c(x.type, float("inf")))


def next_up(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """The least value above x (x itself for NaN and +inf; the least subnormal for ±0)."""
    it = _int_of(x.type)
    bits = b.bitcast(x, it)
    step = b.select(b.icmp_signed(">=", bits, _c(it, 0)), b.add(bits, _c(it, 1)), b.sub(bits, _c(it, 1)))
    out = b.bitcast(step, x.type)
    out = b.select(b.fcmp_ordered("==", x, _c(x.type, 0.0)), b.bitcast(_c(it, 1), x.type), out)
    keep = b.or_(b.fcmp_unordered("uno", x, x), b.fcmp_ordered("==", x, _c(x.type, float("inf"))))
    return b.select(keep, x, out)


def next_down(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return b.fneg(next_up(b, b.fneg(x)))


def directed(b: ir.IRBuilder, r: ir.Value, below: ir.Value, above: ir.Value, finite: ir.Value,
             mode: str) -> ir.Value:
    """r (the nearest value to the exact result) rounded by `mode`, given whether the
    exact result lies `below` or `above` r and whether the operands were `finite` (and
    the result defined): an r that overflowed to infinity from finite operands lies
    beyond the exact result; an exact zero is +0 (the interpreter's rational zero)."""
    inf = b.and_(finite, b.fcmp_ordered("==", intrinsic(b, "fabs", [r]), _c(r.type, float("inf"))))
    zero = _c(r.type, 0.0)
    below = b.select(inf, b.fcmp_ordered(">", r, zero), below)
    above = b.select(inf, b.fcmp_ordered("<", r, zero), above)
    exact_zero = b.and_(b.and_(finite, b.fcmp_ordered("==", r, zero)), b.not_(b.or_(below, above)))
    r = b.select(exact_zero, zero, r)
    if mode == "rn":
        return r
    if mode == "rd":
        return b.select(below, next_down(b, r), r)
    if mode == "ru":
        return b.select(above, next_up(b, r), r)
    toward = b.or_(b.and_(below, b.fcmp_ordered(">", r, zero)), b.and_(above, b.fcmp_ordered("<", r, zero)))
    return b.select(toward, b.select(below, next_down(b, r), next_up(b, r)), r)


def _sign_of(b: ir.IRBuilder, e: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(exact < r, exact > r) from e = exact − r (or anything of its sign)."""
    zero = _c(e.type, 0.0)
    return b.fcmp_ordered("<", e, zero), b.fcmp_ordered(">", e, zero)


def _all_finite(b: ir.IRBuilder, xs: list) -> ir.Value:
    out = _finite(b, xs[0])
    for x in xs[1:]:
        out = b.and_(out, _finite(b, x))
    return out


def _two_sum_error(b: ir.IRBuilder, a: ir.Value, c: ir.Value, s: ir.Value) -> ir.Value:
    """(a + c) − s exactly, for s = a + c rounded (Knuth's TwoSum, no overflow)."""
    cc = b.fsub(s, a)
    return b.fadd(b.fsub(a, b.fsub(s, cc)), b.fsub(c, cc))


def _add(b: ir.IRBuilder, x: ir.Value, y: ir.Value, mode: str) -> ir.Value:
    s = b.fadd(x, y)
    below, above = _sign_of(b, _two_sum_error(b, x, y, s))
    return directed(b, s, below, above, _all_finite(b, [x, y]), mode)


def _small(b: ir.IRBuilder, x: ir.Value, bound: float) -> ir.Value:
    return b.fcmp_ordered("<", intrinsic(b, "fabs", [x]), _c(x.type, bound))


def _scaled(b: ir.IRBuilder, x: ir.Value, small: ir.Value, by: float) -> ir.Value:
    """x·by (a power of two, exact for the small x it is applied to) where `small`."""
    return b.select(small, b.fmul(x, _c(x.type, by)), x)


def _mul(b: ir.IRBuilder, x: ir.Value, y: ir.Value, mode: str) -> ir.Value:
    if x.type == F32:  # the product is exact in double
        p = b.fmul(b.fpext(x, F64), b.fpext(y, F64))
        r = b.fptrunc(p, F32)
        below, above = _sign_of(b, b.fsub(p, b.fpext(r, F64)))
    else:
        r = b.fmul(x, y)
        # fma rounds the exact x·y − r once: its sign is exact, unless that difference
        # underflows, which can happen only when r is tiny; then x·2^sx · y·2^sy −
        # r·2^(sx+sy) has the same sign and a normal magnitude (scaling is exact)
        tiny = _small(b, r, 2.0 ** -960)
        sx, sy = b.and_(tiny, _small(b, x, 2.0 ** -400)), b.and_(tiny, _small(b, y, 2.0 ** -400))
        rs = _scaled(b, _scaled(b, r, sx, 2.0 ** 600), sy, 2.0 ** 600)
        err = intrinsic(b, "fma", [_scaled(b, x, sx, 2.0 ** 600), _scaled(b, y, sy, 2.0 ** 600), b.fneg(rs)])
        below, above = _sign_of(b, err)
    return directed(b, r, below, above, _all_finite(b, [x, y]), mode)


def _div(b: ir.IRBuilder, x: ir.Value, y: ir.Value, mode: str) -> ir.Value:
    q = b.fdiv(x, y)
    if x.type == F32:
        rem = intrinsic(b, "fma", [b.fneg(b.fpext(q, F64)), b.fpext(y, F64), b.fpext(x, F64)])
    else:
        # x − q·y may underflow only for a tiny q (then x is small too): scaled by 2^600
        tiny = _small(b, q, 2.0 ** -960)
        rem = intrinsic(b, "fma", [b.fneg(_scaled(b, q, tiny, 2.0 ** 600)), y, _scaled(b, x, tiny, 2.0 ** 600)])
    # exact − q = rem / y
    lo, hi = _sign_of(b, rem)
    pos = b.fcmp_ordered(">", y, _c(y.type, 0.0))
    below, above = b.select(pos, lo, hi), b.select(pos, hi, lo)
    defined = b.and_(_all_finite(b, [x, y]), b.fcmp_ordered("!=", y, _c(y.type, 0.0)))
    return directed(b, q, below, above, defined, mode)


def _fma(b: ir.IRBuilder, x: ir.Value, y: ir.Value, z: ir.Value, mode: str) -> ir.Value:
    r = intrinsic(b, "fma", [x, y, z])
    if x.type == F32:
        p = b.fmul(b.fpext(x, F64), b.fpext(y, F64))      # exact
        zd = b.fpext(z, F64)
        s = b.fadd(p, zd)
        e = _two_sum_error(b, p, zd, s)                    # exact: p + z = s + e
        d = b.fsub(s, b.fpext(r, F64))                     # exact (s, r are neighbours)
        err = b.select(b.fcmp_ordered("==", d, _c(F64, 0.0)), e, d)
    else:
        p = b.fmul(x, y)
        pe = intrinsic(b, "fma", [x, y, b.fneg(p)])
        s = b.fadd(p, z)
        e1 = _two_sum_error(b, p, z, s)
        s2 = b.fsub(s, r)
        e2 = _two_sum_error(b, s, b.fneg(r), s2)
        err = b.fadd(s2, b.fadd(e2, b.fadd(e1, pe)))
    below, above = _sign_of(b, err)
    return directed(b, r, below, above, _all_finite(b, [x, y, z]), mode)


def _sqrt(b: ir.IRBuilder, x: ir.Value, mode: str) -> ir.Value:
    r = intrinsic(b, "sqrt", [x])
    if x.type == F32:
        rd = b.fpext(r, F64)
        rem = intrinsic(b, "fma", [b.fneg(rd), rd, b.fpext(x, F64)])
    else:
        # x − r² may underflow for a tiny x: then x·2^600 − (r·2^300)²
        tiny = _small(b, x, 2.0 ** -900)
        rs = _scaled(b, r, tiny, 2.0 ** 300)
        rem = intrinsic(b, "fma", [b.fneg(rs), rs, _scaled(b, x, tiny, 2.0 ** 600)])
    below, above = _sign_of(b, rem)
    # x − r² has the sign of sqrt(x) − r; negative, zero, inf and NaN are IEEE's
    defined = b.and_(_finite(b, x), b.fcmp_ordered(">", x, _c(x.type, 0.0)))
    return directed(b, r, below, above, defined, mode)


def _double2float(b: ir.IRBuilder, x: ir.Value, mode: str) -> ir.Value:
    r = b.fptrunc(x, F32)
    below, above = _sign_of(b, b.fsub(x, b.fpext(r, F64)))
    return directed(b, r, below, above, _finite(b, x), mode)


def _int2float(b: ir.IRBuilder, x: ir.Value, ret: ir.Type, signed: bool, mode: str) -> ir.Value:
    conv = b.sitofp if signed else b.uitofp
    r = conv(x, ret)
    if x.type.width <= 32:
        # both sides exact in double
        e = b.fsub(conv(x, F64), b.fpext(r, F64) if ret == F32 else r)
        below, above = _sign_of(b, e)
    else:
        # r is an integer; 2^63 (2^64 unsigned) lies above every value of x
        top = _c(ret, 2.0 ** 63 if signed else 2.0 ** 64)
        big = b.fcmp_ordered(">=", r, top)
        back = (b.fptosi if signed else b.fptoui)(b.select(big, _c(ret, 0.0), r), x.type)
        less = b.icmp_signed if signed else b.icmp_unsigned
        below = b.or_(big, less("<", x, back))
        above = b.and_(b.not_(big), less(">", x, back))
    return directed(b, r, below, above, ir.Constant(I1, 1), mode)


_TO_INT = {"rn": "roundeven", "rz": "trunc", "rd": "floor", "ru": "ceil"}
_INT_KINDS = {"int": (32, True), "uint": (32, False), "ll": (64, True), "ull": (64, False)}


def float_to_int(b: ir.IRBuilder, x: ir.Value, kind: str, how: str) -> ir.Value:
    """Rounded by `how` (an LLVM rounding intrinsic), then saturated to the range of
    `kind`, NaN → 0 (PTX `cvt.r*i`, the interpreter's definition)."""
    width, signed = _INT_KINDS[kind]
    it = ir.IntType(width)
    v = intrinsic(b, how, [x])
    name = f"llvm.fpto{'s' if signed else 'u'}i.sat.i{width}.{'f32' if x.type == F32 else 'f64'}"
    from ..llvm.intrinsics import call
    return call(b, name, it, [v])


def _table() -> dict[str, Emit]:
    out: dict[str, Emit] = {}
    for mode in ("rn", "rz", "rd", "ru"):
        for p in ("f", "d"):
            out[f"{p}add_{mode}"] = lambda b, a, r, m=mode: _add(b, a[0], a[1], m)
            out[f"{p}sub_{mode}"] = lambda b, a, r, m=mode: _add(b, a[0], b.fneg(a[1]), m)
            out[f"{p}mul_{mode}"] = lambda b, a, r, m=mode: _mul(b, a[0], a[1], m)
            out[f"{p}div_{mode}"] = lambda b, a, r, m=mode: _div(b, a[0], a[1], m)
            out[f"{p}rcp_{mode}"] = lambda b, a, r, m=mode: _div(b, _c(a[0].type, 1.0), a[0], m)
            out[f"{p}sqrt_{mode}"] = lambda b, a, r, m=mode: _sqrt(b, a[0], m)
        out[f"fmaf_{mode}"] = lambda b, a, r, m=mode: _fma(b, a[0], a[1], a[2], m)
        out[f"fma_{mode}"] = lambda b, a, r, m=mode: _fma(b, a[0], a[1], a[2], m)
        out[f"double2float_{mode}"] = lambda b, a, r, m=mode: _double2float(b, a[0], m)
        for src in ("float", "double"):
            for kind in _INT_KINDS:
                out[f"{src}2{kind}_{mode}"] = lambda b, a, r, k=kind, m=mode: float_to_int(b, a[0], k, _TO_INT[m])
        for kind in ("int", "uint"):
            out[f"{kind}2float_{mode}"] = lambda b, a, r, k=kind, m=mode: _int2float(b, a[0], F32, k == "int", m)
        for kind in ("ll", "ull"):
            for dst, t in (("float", F32), ("double", F64)):
                out[f"{kind}2{dst}_{mode}"] = lambda b, a, r, k=kind, t=t, m=mode: _int2float(b, a[0], t, k == "ll", m)
    out["int2double_rn"] = lambda b, a, r: b.sitofp(a[0], F64)
    out["uint2double_rn"] = lambda b, a, r: b.uitofp(a[0], F64)
    for p in ("", "f"):
        out[f"llrint{p}"] = lambda b, a, r: float_to_int(b, a[0], "ll", "roundeven")
        # half away from zero, then toward zero: llvm.round is exactly that rounding
        out[f"llround{p}"] = lambda b, a, r: float_to_int(b, a[0], "ll", "round")
    return out


ROUNDED: dict[str, Emit] = _table()
