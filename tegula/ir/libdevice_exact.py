"""The exact part of libdevice's reference (see `libdevice_numpy`): explicitly rounded
arithmetic and conversions, evaluated on exact rationals and rounded in the requested
direction, and the bit and integer functions, in `EXACT` (symbol -> implementation)."""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Callable

import numpy as np

Impl = Callable[..., np.ndarray]
F32, F64 = np.float32, np.float64
EXACT: dict[str, Impl] = {}


def _register(symbol: str, fn: Impl) -> None:
    EXACT[symbol] = fn


# ------------------------------------------------------------------ exact rounding

def _neighbors(fr: Fraction, dt) -> tuple[float, float]:
    """The two values of float type `dt` around the rational `fr` (equal when exact)."""
    try:
        x = dt(float(fr))
    except OverflowError:  # beyond float64's range (an f64 add or product that overflows)
        x = dt(math.inf if fr > 0 else -math.inf)
    if not np.isfinite(x):
        big = np.finfo(dt).max
        return (big, dt(math.inf)) if fr > 0 else (-dt(math.inf), -big)
    fx = Fraction(float(x))
    if fx == fr:
        return x, x
    if fx > fr:
        return np.nextafter(x, dt(-math.inf)), x
    return x, np.nextafter(x, dt(math.inf))


def round_rational(fr: Fraction, dt, mode: str):
    """`fr` rounded to float type `dt`: `rn` nearest-even, `rz` toward zero, `rd` down,
    `ru` up (overflow to infinity only where the direction allows)."""
    lo, hi = _neighbors(fr, dt)
    if lo == hi:
        return lo
    if mode == "rd":
        return lo
    if mode == "ru":
        return hi
    if mode == "rz":
        return lo if fr > 0 else hi
    if not np.isfinite(lo) or not np.isfinite(hi):
        return hi if not np.isfinite(hi) else lo
    dlo, dhi = fr - Fraction(float(lo)), Fraction(float(hi)) - fr
    if dlo != dhi:
        return lo if dlo < dhi else hi
    bits = np.array(lo, dt).view(np.uint32 if dt is F32 else np.uint64)
    return lo if int(bits) % 2 == 0 else hi


def exact_op(op: Callable[..., Fraction], dt, mode: str, special: Callable[..., float], nin: int) -> Impl:
    """Elementwise `op` on exact rationals, rounded to `dt` by `mode`; `special` computes
    the IEEE result when an operand is not finite (or the exact result is undefined)."""
    def scalar(*xs):
        if not all(math.isfinite(v) for v in xs):
            return dt(special(*xs))
        try:
            return round_rational(op(*(Fraction(float(v)) for v in xs)), dt, mode)
        except ZeroDivisionError:
            return dt(special(*xs))
    vec = np.frompyfunc(scalar, nin, 1)

    def apply(*arrays):
        return np.asarray(vec(*arrays)).astype(dt)
    return apply


def ieee(fn: Callable[..., float]) -> Callable[..., float]:
    """The IEEE double result for special operands (inf/NaN/division by zero)."""
    def run(*xs):
        with np.errstate(all="ignore"):
            return float(fn(*(np.float64(v) for v in xs)))
    return run


def _sqrt_directed(dt, mode: str) -> Impl:
    def scalar(x):
        x = float(x)
        if not math.isfinite(x) or x <= 0:
            with np.errstate(all="ignore"):
                return dt(np.sqrt(np.float64(x)))
        fx = Fraction(x)
        r = dt(math.sqrt(x))
        # the pair of representable values bracketing the exact root
        while Fraction(float(r)) ** 2 > fx:
            r = np.nextafter(r, dt(0))
        while Fraction(float(np.nextafter(r, dt(math.inf)))) ** 2 <= fx:
            r = np.nextafter(r, dt(math.inf))
        lo, hi = r, np.nextafter(r, dt(math.inf))
        if Fraction(float(lo)) ** 2 == fx or mode in ("rd", "rz"):
            return lo
        if mode == "ru":
            return hi
        mid = (Fraction(float(lo)) + Fraction(float(hi))) / 2
        return lo if mid * mid > fx else hi  # a tie is impossible for a square root
    vec = np.frompyfunc(scalar, 1, 1)
    return lambda a: np.asarray(vec(a)).astype(dt)


def _register_rounded_arithmetic() -> None:
    ops = {  # name: (exact rational op, IEEE op for special operands, arity)
        "add": (lambda a, b: a + b, lambda a, b: a + b, 2),
        "sub": (lambda a, b: a - b, lambda a, b: a - b, 2),
        "mul": (lambda a, b: a * b, lambda a, b: a * b, 2),
        "div": (lambda a, b: a / b, lambda a, b: a / b, 2),
        "rcp": (lambda a: 1 / a, lambda a: 1.0 / a, 1),
        "fma": (lambda a, b, c: a * b + c, lambda a, b, c: a * b + c, 3),
    }
    for mode in ("rn", "rz", "rd", "ru"):
        for name, (exact, special, nin) in ops.items():
            for prefix, dt in (("f", F32), ("d", F64)):
                if name == "fma":
                    symbol = f"__nv_fma{'f' if dt is F32 else ''}_{mode}"
                else:
                    symbol = f"__nv_{prefix}{name}_{mode}"
                _register(symbol, exact_op(exact, dt, mode, ieee(special), nin))
        _register(f"__nv_fsqrt_{mode}", _sqrt_directed(F32, mode))
        _register(f"__nv_dsqrt_{mode}", _sqrt_directed(F64, mode))


# ------------------------------------------------------------------ conversions

_INT_RANGE = {"int": (-2**31, 2**31 - 1, np.int32), "uint": (0, 2**32 - 1, np.uint32),
              "ll": (-2**63, 2**63 - 1, np.int64), "ull": (0, 2**64 - 1, np.uint64)}
_ROUND_TO_INT = {"rn": np.rint, "rz": np.trunc, "rd": np.floor, "ru": np.ceil}


def float_to_int(kind: str, mode: str, out_dtype) -> Impl:
    """PTX `cvt.r*i`: round, saturate to the integer range, NaN -> 0; the bits are
    returned in `out_dtype` (Triton declares uint results as int32/int64)."""
    lo, hi, exact_dt = _INT_RANGE[kind]
    rounding = {"rn": round, "rz": math.trunc, "rd": math.floor, "ru": math.ceil}[mode]

    def scalar(v):
        v = float(v)
        if math.isnan(v):
            return 0
        if math.isinf(v):
            return hi if v > 0 else lo
        return min(max(rounding(v), lo), hi)  # Python ints: exact

    def apply(x):
        x = np.asarray(x)
        out = [scalar(v) for v in x.ravel()]
        return np.array(out, dtype=exact_dt).reshape(x.shape).view(out_dtype)
    return apply


def _int_to_float(dt, mode: str) -> Impl:
    def scalar(v):
        return round_rational(Fraction(int(v)), dt, mode)
    vec = np.frompyfunc(scalar, 1, 1)
    return lambda a: np.asarray(vec(a)).astype(dt)


def _register_conversions() -> None:
    fmt = {"float": F32, "double": F64}
    for mode in ("rn", "rz", "rd", "ru"):
        _register(f"__nv_double2float_{mode}",
                  exact_op(lambda a: a, F32, mode, ieee(lambda a: np.float32(a)), 1))
        for src in ("float", "double"):
            for kind, out in (("int", np.int32), ("uint", np.int32), ("ll", np.int64), ("ull", np.int64)):
                _register(f"__nv_{src}2{kind}_{mode}", float_to_int(kind, mode, out))
        for kind in ("int", "uint"):
            _register(f"__nv_{kind}2float_{mode}", _int_to_float(F32, mode))
        for kind in ("ll", "ull"):
            for dst in ("float", "double"):
                _register(f"__nv_{kind}2{dst}_{mode}", _int_to_float(fmt[dst], mode))
    _register("__nv_int2double_rn", lambda a: np.asarray(a, F64))
    _register("__nv_uint2double_rn", lambda a: np.asarray(a, F64))
    _register("__nv_int_as_float", lambda a: np.asarray(a, np.int32).view(F32))
    _register("__nv_uint_as_float", lambda a: np.asarray(a, np.uint32).view(F32))
    _register("__nv_float_as_int", lambda a: np.asarray(a, F32).view(np.int32))
    _register("__nv_float_as_uint", lambda a: np.asarray(a, F32).view(np.int32))
    _register("__nv_longlong_as_double", lambda a: np.asarray(a, np.int64).view(F64))
    _register("__nv_double_as_longlong", lambda a: np.asarray(a, F64).view(np.int64))
    _register("__nv_double2loint", lambda a: np.asarray(a, F64).view(np.int64).astype(np.int32))
    _register("__nv_double2hiint", lambda a: (np.asarray(a, F64).view(np.int64) >> 32).astype(np.int32))

    def hilo(hi, lo):
        bits = (np.asarray(hi, np.int64) << 32) | (np.asarray(lo, np.int64) & 0xFFFFFFFF)
        return np.asarray(bits, np.int64).view(F64)
    _register("__nv_hiloint2double", hilo)


# ------------------------------------------------------------------ bits and integers

def _bits(dt) -> int:
    return np.dtype(dt).itemsize * 8


def _clz(dt) -> Impl:
    n = _bits(dt)
    udt = np.uint32 if n == 32 else np.uint64

    def apply(x):
        u = np.asarray(x).view(udt).astype(object)
        return np.array([n - int(v).bit_length() for v in np.ravel(u)], np.int32).reshape(np.shape(x))
    return apply


def _popc(dt) -> Impl:
    udt = np.uint32 if _bits(dt) == 32 else np.uint64

    def apply(x):
        u = np.asarray(x).view(udt)
        return np.array([bin(int(v)).count("1") for v in np.ravel(u)], np.int32).reshape(np.shape(x))
    return apply


def _ffs(dt) -> Impl:
    udt = np.uint32 if _bits(dt) == 32 else np.uint64

    def apply(x):
        u = np.asarray(x).view(udt)
        return np.array([(int(v) & -int(v)).bit_length() for v in np.ravel(u)], np.int32).reshape(np.shape(x))
    return apply


def _brev(dt) -> Impl:
    n = _bits(dt)
    udt = np.uint32 if n == 32 else np.uint64

    def apply(x):
        u = np.asarray(x).view(udt)
        out = [int(format(int(v), f"0{n}b")[::-1], 2) for v in np.ravel(u)]
        return np.array(out, udt).reshape(np.shape(x)).view(dt)
    return apply


def _mulhi(dt) -> Impl:
    n = _bits(dt)

    def apply(a, b):
        a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
        out = [(int(x) * int(y)) >> n for x, y in zip(np.ravel(a), np.ravel(b))]
        mask = (1 << n) - 1
        udt = np.uint32 if n == 32 else np.uint64
        return np.array([v & mask for v in out], udt).reshape(a.shape).view(dt)
    return apply


def _mul24(signed: bool) -> Impl:
    def apply(a, b):
        def low24(v):
            v = np.asarray(v).astype(np.int64) & 0xFFFFFF
            return np.where(v >= 0x800000, v - 0x1000000, v) if signed else v
        prod = (low24(a) * low24(b)) & 0xFFFFFFFF
        return prod.astype(np.uint32).view(np.int32 if signed else np.uint32)
    return apply


def _sad(signed: bool) -> Impl:
    def apply(a, b, c):
        a64, b64 = np.asarray(a).astype(np.int64), np.asarray(b).astype(np.int64)
        r = (np.abs(a64 - b64) + np.asarray(c).astype(np.int64)) & 0xFFFFFFFF
        return r.astype(np.uint32).view(np.int32 if signed else np.uint32)
    return apply


def _halving_add(signed: bool, rounded: bool) -> Impl:
    def apply(a, b):
        s = np.asarray(a).astype(np.int64) + np.asarray(b).astype(np.int64) + (1 if rounded else 0)
        r = s >> 1
        return r.astype(np.int32) if signed else (r & 0xFFFFFFFF).astype(np.uint32)
    return apply


def _byte_perm(x, y, s):
    x, y, s = np.broadcast_arrays(np.asarray(x), np.asarray(y), np.asarray(s))
    out = []
    for a, b, sel in zip(np.ravel(x).view(np.uint32), np.ravel(y).view(np.uint32), np.ravel(s).view(np.uint32)):
        src = int(a) | (int(b) << 32)
        r = 0
        for i in range(4):
            k = (int(sel) >> (4 * i)) & 7
            r |= ((src >> (8 * k)) & 0xFF) << (8 * i)
        out.append(r)
    return np.array(out, np.uint32).reshape(x.shape).view(np.int32)


def _register_integer() -> None:
    for dt, sfx in ((np.int32, ""), (np.int64, "ll")):
        _register(f"__nv_clz{sfx}", _clz(dt))
        _register(f"__nv_popc{sfx}", _popc(dt))
        _register(f"__nv_ffs{sfx}", _ffs(dt))
        _register(f"__nv_brev{sfx}", _brev(dt))
    _register("__nv_mulhi", _mulhi(np.int32))
    _register("__nv_umulhi", _mulhi(np.uint32))
    _register("__nv_mul64hi", _mulhi(np.int64))
    _register("__nv_umul64hi", _mulhi(np.uint64))
    _register("__nv_mul24", _mul24(True))
    _register("__nv_umul24", _mul24(False))
    _register("__nv_sad", _sad(True))
    _register("__nv_usad", _sad(False))
    _register("__nv_hadd", _halving_add(True, False))
    _register("__nv_uhadd", _halving_add(False, False))
    _register("__nv_rhadd", _halving_add(True, True))
    _register("__nv_urhadd", _halving_add(False, True))
    _register("__nv_byte_perm", _byte_perm)
    _register("__nv_abs", lambda a: np.abs(np.asarray(a, np.int32)))  # INT_MIN wraps, as on the GPU
    _register("__nv_llabs", lambda a: np.abs(np.asarray(a, np.int64)))


_register_rounded_arithmetic()
_register_conversions()
_register_integer()
