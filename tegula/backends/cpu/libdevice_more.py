"""The rest of libdevice on the host that the C library does not provide under the
same name: integer helpers (halving adds, sad, byte_perm, wrapping abs), bit-level
conversions, `rcp64h`, the `fast_*` approximations (the C library's functions: within
their bound by far), and math the interpreter composes from C library functions
(sinpi/cospi by an exact reduction, norms, rhypot, rcbrt, `frsqrt_rn` through double),
each as the interpreter computes it (`ir/libdevice_numpy.py`, `ir/libdevice_exact.py`).

The special functions no C library has (erfinv, erfcinv, erfcx, normcdf, normcdfinv,
cyl_bessel_i0/i1) call the interpreter's own float64 scalar functions through a ctypes
callback registered as a process symbol (`tegula_host_<name>`, resolved when object
code is loaded, so cached object code never holds an address): bitwise the
interpreter's results, at Python speed (these loops stay scalar and take the GIL).
"""
from __future__ import annotations

import ctypes
import functools
from typing import Callable

import llvmlite.ir as ir

from ..llvm.intrinsics import call, intrinsic
from .libdevice_rounded import ROUNDED

F32, F64 = ir.FloatType(), ir.DoubleType()
I32, I64 = ir.IntType(32), ir.IntType(64)
Emit = Callable[[ir.IRBuilder, list, ir.Type], ir.Value]


def _halving(b: ir.IRBuilder, x: ir.Value, y: ir.Value, signed: bool, rounded: bool) -> ir.Value:
    ext = b.sext if signed else b.zext
    s = b.add(ext(x, I64), ext(y, I64))
    if rounded:
        s = b.add(s, ir.Constant(I64, 1))
    return b.trunc(b.ashr(s, ir.Constant(I64, 1)), I32)


def _sad(b: ir.IRBuilder, x: ir.Value, y: ir.Value, z: ir.Value, signed: bool) -> ir.Value:
    ext = b.sext if signed else b.zext
    d = intrinsic(b, "abs", [b.sub(ext(x, I64), ext(y, I64)), ir.Constant(ir.IntType(1), 0)])
    return b.add(b.trunc(d, I32), z)  # the low 32 bits, whatever z's extension


def _byte_perm(b: ir.IRBuilder, x: ir.Value, y: ir.Value, s: ir.Value) -> ir.Value:
    src = b.or_(b.zext(x, I64), b.shl(b.zext(y, I64), ir.Constant(I64, 32)))
    out = ir.Constant(I32, 0)
    for i in range(4):
        k = b.and_(b.lshr(s, ir.Constant(I32, 4 * i)), ir.Constant(I32, 7))
        byte = b.and_(b.lshr(src, b.zext(b.mul(k, ir.Constant(I32, 8)), I64)), ir.Constant(I64, 0xFF))
        out = b.or_(out, b.shl(b.trunc(byte, I32), ir.Constant(I32, 8 * i)))
    return out


def _rcp64h(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """1 / (x with its low 32 bits cleared), with the result's low 32 bits cleared."""
    high = ir.Constant(I64, -(1 << 32))
    hi = b.bitcast(b.and_(b.bitcast(x, I64), high), F64)
    r = b.fdiv(ir.Constant(F64, 1.0), hi)
    return b.bitcast(b.and_(b.bitcast(r, I64), high), F64)


def _sin_cos_pi(b: ir.IRBuilder, x: ir.Value, shift: int) -> ir.Value:
    """The interpreter's sinpi/cospi in double: x = k/2 + f exactly with |f| <= 1/4, then
    ±sin or ±cos of pi·f by the quarter turn k (+ shift)."""
    d = lambda v: ir.Constant(F64, v)  # noqa: E731
    r = b.frem(x, d(2.0))                                   # exact, sign of x
    k = intrinsic(b, "rint", [b.fmul(r, d(2.0))])
    f = b.fsub(r, b.fmul(k, d(0.5)))
    q = b.and_(b.add(b.fptosi(k, I64), ir.Constant(I64, shift)), ir.Constant(I64, 3))
    pf = b.fmul(d(3.141592653589793), f)
    s, c = call(b, "sin", F64, [pf]), call(b, "cos", F64, [pf])
    odd = b.icmp_unsigned("==", b.and_(q, ir.Constant(I64, 1)), ir.Constant(I64, 1))
    neg = b.icmp_unsigned(">=", q, ir.Constant(I64, 2))
    v = b.select(odd, c, s)
    v = b.select(neg, b.fneg(v), v)
    zero = b.fmul(d(0.0), x) if shift == 0 else d(0.0)
    v = b.select(b.fcmp_ordered("==", v, d(0.0)), zero, v)
    finite = b.fcmp_ordered("<", intrinsic(b, "fabs", [x]), d(float("inf")))
    return b.select(finite, v, d(float("nan")))


def _norm(b: ir.IRBuilder, xs: list) -> ir.Value:
    h = intrinsic(b, "fabs", [xs[0]])
    for x in xs[1:]:
        h = call(b, "hypot", F64, [h, x])
    return h


def _recip(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    return b.fdiv(ir.Constant(F64, 1.0), v)


# ---- the special functions through the interpreter's scalar references -------------
_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)


@functools.lru_cache(maxsize=None)
def register_host_references() -> tuple:
    """Register `tegula_host_<name>` for each scalar reference (once per process; the
    callbacks are kept alive by the cache)."""
    import llvmlite.binding as llvm

    from ...ir.libdevice_numpy import SCALAR_REFERENCES

    keep = []
    for name, fn in SCALAR_REFERENCES.items():
        cb = _CALLBACK(lambda v, fn=fn: float(fn(float(v))))
        llvm.add_symbol(f"tegula_host_{name}", ctypes.cast(cb, ctypes.c_void_p).value)
        keep.append(cb)
    return tuple(keep)


def _reference(name: str) -> Emit:
    def emit(b: ir.IRBuilder, a: list, ret: ir.Type) -> ir.Value:
        register_host_references()
        x = b.fpext(a[0], F64) if a[0].type == F32 else a[0]
        r = call(b, f"tegula_host_{name}", F64, [x])
        return b.fptrunc(r, F32) if ret == F32 else r
    return emit


def _in_double(fn: Callable[[ir.IRBuilder, list], ir.Value]) -> Emit:
    """A float64 composition, applied to f32 arguments widened and rounded once (the
    interpreter's `_float_pair`)."""
    def emit(b: ir.IRBuilder, a: list, ret: ir.Type) -> ir.Value:
        xs = [b.fpext(v, F64) if v.type == F32 else v for v in a]
        r = fn(b, xs)
        return b.fptrunc(r, F32) if ret == F32 else r
    return emit


def _table() -> dict[str, Emit]:
    t: dict[str, Emit] = dict(ROUNDED)
    t.update({
        "hadd": lambda b, a, r: _halving(b, a[0], a[1], True, False),
        "rhadd": lambda b, a, r: _halving(b, a[0], a[1], True, True),
        "uhadd": lambda b, a, r: _halving(b, a[0], a[1], False, False),
        "urhadd": lambda b, a, r: _halving(b, a[0], a[1], False, True),
        "sad": lambda b, a, r: _sad(b, a[0], a[1], a[2], True),
        "usad": lambda b, a, r: _sad(b, a[0], a[1], a[2], False),
        "byte_perm": lambda b, a, r: _byte_perm(b, a[0], a[1], a[2]),
        # wrapping: abs(INT_MIN) is INT_MIN, as on the GPU
        "abs": lambda b, a, r: intrinsic(b, "abs", [a[0], ir.Constant(ir.IntType(1), 0)]),
        "llabs": lambda b, a, r: intrinsic(b, "abs", [a[0], ir.Constant(ir.IntType(1), 0)]),
        "double2loint": lambda b, a, r: b.trunc(b.bitcast(a[0], I64), I32),
        "double2hiint": lambda b, a, r: b.trunc(b.lshr(b.bitcast(a[0], I64), ir.Constant(I64, 32)), I32),
        "hiloint2double": lambda b, a, r: b.bitcast(b.or_(b.shl(b.zext(a[0], I64), ir.Constant(I64, 32)),
                                                          b.zext(a[1], I64)), F64),
        "rcp64h": lambda b, a, r: _rcp64h(b, a[0]),
        # the interpreter's definition: 1/sqrt in double, rounded once
        "frsqrt_rn": lambda b, a, r: b.fptrunc(_recip(b, intrinsic(b, "sqrt", [b.fpext(a[0], F64)])), F32),
        "fast_fdividef": lambda b, a, r: b.fdiv(a[0], a[1]),
    })
    for name in ("sinf", "cosf", "tanf", "expf", "logf", "log2f", "log10f", "exp10f", "powf"):
        t[f"fast_{name}"] = lambda b, a, r, name=name: call(b, name, F32, list(a))
    compositions = {
        "sinpi": lambda b, x: _sin_cos_pi(b, x[0], 0), "cospi": lambda b, x: _sin_cos_pi(b, x[0], 1),
        "rcbrt": lambda b, x: _recip(b, call(b, "cbrt", F64, [x[0]])),
        "rhypot": lambda b, x: _recip(b, call(b, "hypot", F64, [x[0], x[1]])),
        "norm3d": _norm, "norm4d": _norm,
        "rnorm3d": lambda b, x: _recip(b, _norm(b, x)), "rnorm4d": lambda b, x: _recip(b, _norm(b, x)),
    }
    for name, fn in compositions.items():
        t[name] = t[name + "f"] = _in_double(fn)
    for name in ("erfinv", "erfcinv", "erfcx", "normcdf", "normcdfinv", "cyl_bessel_i0", "cyl_bessel_i1"):
        t[name] = t[name + "f"] = _reference(name)
    return t


# `__nv_<name>` → emitter of (builder, args, result type)
MORE: dict[str, Emit] = _table()
