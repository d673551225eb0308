"""numpy implementations of the scalar/elementwise semantics of the IR's ops.

These functions are the single definition of what an elementwise op computes. The op
table (`ops.OP_INFO[...].numpy`) points at them; constant folding and the reference
interpreter both call them, so the two can never disagree.

Storage convention (shared by every numpy consumer of the IR): each scalar type has a
numpy *storage* dtype (`storage_dtype`). bf16 and the fp8 types are held in float32
whose values are exactly representable in the narrow type; after every op producing
such a type the caller rounds with `round_to_type` (round to nearest even, as the GPU
does). Integer arithmetic wraps; integer `//` and `%` are C-style (truncating).

Rounding to fp8 saturates (`cvt.rn.satfinite`, what Triton 3.6 emits on sm_90): e5m2
overflow and infinities become ±57344, never ±inf. `fma` rounds once for every float
type, as the GPU's `fma.rn` does (float64 through an exact, vectorized emulation).
The bounds between these semantics and the GPU's are in docs/numerics.md.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .types import ScalarType

_STORAGE = {
    "i1": np.bool_, "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
    "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
    "f16": np.float16, "bf16": np.float32, "f32": np.float32, "f64": np.float64,
    "f8e4m3": np.float32, "f8e5m2": np.float32, "f8e4b15": np.float32,
}


def storage_dtype(t: ScalarType) -> np.dtype:
    """The numpy dtype holding values of scalar type `t` (pointers are not scalars here)."""
    return np.dtype(_STORAGE[t.name])


# ---------------------------------------------------------------- narrow float rounding

def f32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """Round float values to bfloat16 (nearest even) and return the 16-bit patterns.

    Keeps the shape of `x` (rank 0 included). float64 input is rounded once, not
    through float32 (see `_f64_to_f32_round_odd`)."""
    x = np.asarray(x)
    f32 = _f64_to_f32_round_odd(x) if x.dtype == np.float64 else np.asarray(x, dtype=np.float32)
    bits = f32.view(np.uint32)
    rounding = ((bits >> 16) & 1) + np.uint32(0x7FFF)
    out = ((bits + rounding) >> 16).astype(np.uint16)
    nan = np.isnan(f32)
    if nan.any():
        out = np.where(nan, ((bits >> 16) | 0x40).astype(np.uint16), out)
    return out


def _f64_to_f32_round_odd(x: np.ndarray) -> np.ndarray:
    """float64 → float32 rounding to odd (truncate, then set the last bit if inexact).

    A later round-to-nearest-even to a format with at most 22 significant bits then
    gives the correctly rounded result of the float64 value: rounding float64 → f32 →
    bf16 twice to nearest would not (double rounding)."""
    f = x.astype(np.float32)
    away = np.abs(f.astype(np.float64)) > np.abs(x)  # includes overflow to inf
    f = np.where(away, np.nextafter(f, np.float32(0)), f).astype(np.float32)
    inexact = (f.astype(np.float64) != x) & ~np.isnan(x)
    return (f.view(np.uint32) | inexact.astype(np.uint32)).view(np.float32)


def bf16_bits_to_f32(bits: np.ndarray) -> np.ndarray:
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def _fp8_table(exp_bits: int, man_bits: int, bias: int, fn: bool) -> np.ndarray:
    """Decode table of all 256 fp8 bit patterns to float32."""
    vals = np.empty(256, dtype=np.float32)
    for b in range(256):
        sign = -1.0 if b & 0x80 else 1.0
        e = (b >> man_bits) & ((1 << exp_bits) - 1)
        m = b & ((1 << man_bits) - 1)
        if fn and e == (1 << exp_bits) - 1 and m == (1 << man_bits) - 1:
            v = math.nan
        elif not fn and e == (1 << exp_bits) - 1:
            v = math.nan if m else math.inf
        elif e == 0:
            v = m / (1 << man_bits) * 2.0 ** (1 - bias)
        else:
            v = (1 + m / (1 << man_bits)) * 2.0 ** (e - bias)
        vals[b] = sign * v
    return vals


FP8_DECODE = {
    "f8e4m3": _fp8_table(4, 3, 7, fn=True),
    "f8e5m2": _fp8_table(5, 2, 15, fn=False),
    # Triton's fp8e4b15: e4m3 with exponent bias 15, no infinity, NaN = S.1111.111
    "f8e4b15": _fp8_table(4, 3, 15, fn=True),
}


def _fp8_encoder(name: str):
    table = FP8_DECODE[name]
    pos_codes = np.array([b for b in range(128) if np.isfinite(table[b])], dtype=np.uint8)
    pos_vals = table[pos_codes].astype(np.float64)
    order = np.argsort(pos_vals)
    pos_codes, pos_vals = pos_codes[order], pos_vals[order]
    max_finite = pos_vals[-1]
    nan_code = 0x7F if name in ("f8e4m3", "f8e4b15") else 0x7E

    def encode(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        a = np.abs(x)
        hi = np.clip(np.searchsorted(pos_vals, a, side="left"), 1, len(pos_vals) - 1)
        lo = hi - 1
        d_lo, d_hi = a - pos_vals[lo], pos_vals[hi] - a
        even_hi = (pos_codes[hi] & 1) == 0
        pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & even_hi)
        code = np.where(pick_hi, pos_codes[hi], pos_codes[lo])
        code = np.where(a <= 0, 0, code)
        # Overflow saturates in both formats, infinities included: PTX
        # `cvt.rn.satfinite`, which Triton 3.6 uses on sm_90 for every f32/f16/bf16 →
        # fp8 conversion (e5m2 has an infinity, but satfinite never produces it).
        code = np.where(a > max_finite, pos_codes[-1], code)
        code = code.astype(np.uint8) | np.where(np.signbit(x), 0x80, 0).astype(np.uint8)
        return np.where(np.isnan(x), nan_code, code).astype(np.uint8)

    return encode


# Rounding to fp8 (conversions, constants, results of fp8 arithmetic): nearest even,
# saturating to the largest finite value, NaN → the format's NaN code.
FP8_ENCODE = {name: _fp8_encoder(name) for name in FP8_DECODE}


def fp8_memory_bits(x: np.ndarray, name: str) -> np.ndarray:
    """The bit patterns of values already in fp8 type `name`'s value set (a memory
    image): exact, so an e5m2 infinity (loaded from memory) is stored back as one."""
    code = FP8_ENCODE[name](x)
    if name == "f8e5m2":
        x = np.asarray(x)
        code = np.where(np.isinf(x), np.where(x < 0, 0xFC, 0x7C), code).astype(np.uint8)
    return code


def round_to_type(x: np.ndarray, t: ScalarType) -> np.ndarray:
    """Round float32/64 storage values to the value set of narrow float type `t`."""
    if t.name == "bf16":
        return bf16_bits_to_f32(f32_to_bf16_bits(x))
    if t.is_fp8:
        return FP8_DECODE[t.name][FP8_ENCODE[t.name](x)]
    return x


def needs_rounding(t: ScalarType) -> bool:
    return t.name == "bf16" or t.is_fp8


# ---------------------------------------------------------------- integer semantics

def c_div(a, b):
    """Integer division truncating toward zero (C, PTX); floats divide normally."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind == "f":
        return a / b
    safe_b = np.where(b == 0, 1, b).astype(b.dtype)
    r = np.fmod(a, safe_b)
    q = ((a - r) // safe_b).astype(a.dtype)
    return np.where(b == 0, np.array(-1).astype(a.dtype), q)


def c_rem(a, b):
    """Remainder with the sign of the dividend (C fmod semantics, also for floats)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind == "f":
        return np.fmod(a, b)
    safe_b = np.where(b == 0, 1, b).astype(b.dtype)
    return np.where(b == 0, a, np.fmod(a, safe_b)).astype(a.dtype)


def shift_left(a, b):
    a, b = np.asarray(a), np.asarray(b)
    bits = a.dtype.itemsize * 8
    return np.where(b >= bits, np.zeros((), a.dtype), np.left_shift(a, b % bits)).astype(a.dtype)


def shift_right(a, b):
    """Arithmetic shift for signed types, logical for unsigned (numpy does both)."""
    a, b = np.asarray(a), np.asarray(b)
    bits = a.dtype.itemsize * 8
    fill = np.where(a < 0, np.array(-1).astype(a.dtype), np.zeros((), a.dtype))
    return np.where(b >= bits, fill, np.right_shift(a, b % bits)).astype(a.dtype)


def umulhi(a, b):
    """High half of the unsigned product of two integers of the same width."""
    a, b = np.asarray(a), np.asarray(b)
    bits = a.dtype.itemsize * 8
    udt = np.dtype(f"u{a.dtype.itemsize}")
    ua, ub = a.view(udt) if a.ndim else a.astype(udt), b.view(udt) if b.ndim else b.astype(udt)
    if bits <= 32:
        hi = (ua.astype(np.uint64) * ub.astype(np.uint64)) >> np.uint64(bits)
        return hi.astype(udt).astype(a.dtype)
    mask = np.uint64(0xFFFFFFFF)
    a_lo, a_hi = ua & mask, ua >> np.uint64(32)
    b_lo, b_hi = ub & mask, ub >> np.uint64(32)
    lo_lo = a_lo * b_lo
    mid1 = a_hi * b_lo + (lo_lo >> np.uint64(32))
    mid2 = a_lo * b_hi + (mid1 & mask)
    hi = a_hi * b_hi + (mid1 >> np.uint64(32)) + (mid2 >> np.uint64(32))
    return hi.astype(a.dtype)


def bitwise_not(a):
    a = np.asarray(a)
    return np.logical_not(a) if a.dtype == np.bool_ else np.invert(a)


# ---------------------------------------------------------------- float semantics

def rsqrt(a):
    a = np.asarray(a)
    return (1.0 / np.sqrt(a.astype(np.float64))).astype(a.dtype)


_erf_vec = np.frompyfunc(math.erf, 1, 1)


def erf(a):
    a = np.asarray(a)
    return _erf_vec(a.astype(np.float64)).astype(a.dtype)


def fma(a, b, c):
    """`a * b + c` rounded once, in the operands' dtype (the GPU's `fma.rn`)."""
    a, b, c = np.asarray(a), np.asarray(b), np.asarray(c)
    if a.dtype.kind != "f":
        return (a * b + c).astype(a.dtype)
    if a.dtype == np.float64:
        return fma_f64(a, b, c)
    # f32/f16: the product is exact in float64 (at most 48 bits); the sum rounded to
    # odd there keeps a sticky bit, so the final rounding to nearest is the single
    # rounding of the exact result (float64 has more than p + 2 bits for these p).
    return fma_round_to_odd(a, b, c).astype(a.dtype)


def fma_round_to_odd(a, b, c) -> np.ndarray:
    """`a * b + c` for operands whose product is exact in float64 (formats of at most
    26 bits: f32, f16, bf16, fp8), rounded *to odd* in float64. Rounding that to any
    format of at most 51 bits to nearest even gives the correctly rounded fma."""
    a, b, c = (np.asarray(x, dtype=np.float64) for x in (a, b, c))
    p = a * b
    with np.errstate(invalid="ignore", over="ignore"):
        r = add_round_to_odd(p, c)
    # infinities and NaNs: the IEEE sum of the (exact) product is the fused answer
    return np.where(np.isfinite(r), r, p + c)


# ---------------------------------------------------------------- exact float64 pieces
# Error-free transformations (TwoSum, Dekker's product with Veltkamp's splitting) and
# rounding to odd, vectorized. Each is exact for finite operands away from overflow
# (and, for the product, away from underflow); `fma_f64` checks those ranges.

def _two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(s, e) with s = RN(a + b) and s + e = a + b exactly (Knuth's TwoSum)."""
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


_SPLITTER = float(2 ** 27 + 1)


def _split(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Veltkamp: a = hi + lo with hi, lo of at most 26 significant bits each."""
    t = _SPLITTER * a
    hi = t - (t - a)
    return hi, a - hi


def _two_prod(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(p, e) with p = RN(a * b) and p + e = a * b exactly (Dekker)."""
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


def add_round_to_odd(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x + y rounded to odd in float64: truncated toward zero, with the last bit set
    when the sum was inexact. Finite, non-overflowing sums only."""
    s, e = _two_sum(x, y)
    inexact = e != 0
    # s = RN(x + y) lies above the exact sum in magnitude when e points back to zero
    toward_zero = inexact & (np.signbit(e) != np.signbit(s))
    t = np.where(toward_zero, np.nextafter(s, np.zeros_like(s)), s)
    bits = np.ascontiguousarray(t, dtype=np.float64).view(np.int64) | inexact.astype(np.int64)
    return bits.view(np.float64).reshape(np.shape(t))


def fma_f64(a, b, c) -> np.ndarray:
    """Correctly rounded float64 fma, vectorized: Boldo and Melquiond's emulation
    (IEEE Trans. Computers 57(4), 2008) — uh + ul = a*b exactly, th + tl = c + uh
    exactly, v = RO(tl + ul) rounded to odd, result RN(th + v). Lanes outside the
    range where those steps are exact (huge or tiny products, overflow) and lanes
    with infinities or NaNs are computed separately, exactly (Fractions) or by IEEE
    rules; they are rare, so their cost does not matter."""
    a, b, c = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64) for x in (a, b, c)))
    shape = a.shape
    a, b, c = a.reshape(-1), b.reshape(-1), c.reshape(-1)
    with np.errstate(all="ignore"):
        uh, ul = _two_prod(a, b)
        th, tl = _two_sum(c, uh)
        v = add_round_to_odd(tl, ul)
        z = th + v
        ea, eb = np.frexp(a)[1], np.frexp(b)[1]
        # a, b < 2**996 (the split does not overflow); the product in
        # [2**-968, 2**1021] (Dekker's error term is representable and nothing
        # overflows); a zero product goes the IEEE way (signs of zeros)
        fast = (np.isfinite(a) & np.isfinite(b) & np.isfinite(c) & (a != 0) & (b != 0)
                & (ea <= 996) & (eb <= 996) & (ea + eb >= -966) & (ea + eb <= 1021)
                & np.isfinite(th) & np.isfinite(z))
    if fast.all():
        return z.reshape(shape)
    out = z.copy()
    for i in np.flatnonzero(~fast):
        out[i] = _fma_slow(float(a[i]), float(b[i]), float(c[i]))
    return out.reshape(shape)


def _fma_slow(a: float, b: float, c: float) -> float:
    """One fma lane outside `fma_f64`'s fast range, exactly."""
    if not (math.isfinite(a) and math.isfinite(b)):
        return a * b + c  # inf * 0 = NaN, inf + -inf = NaN, as the fused operation
    if not math.isfinite(c):
        return c  # a finite product never changes an infinite (or NaN) addend
    if a == 0 or b == 0:
        return a * b + c  # the product is an exact (signed) zero: IEEE addition
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:
        return 0.0  # an exact zero sum of nonzero terms is +0 when rounding to nearest
    try:
        return float(exact)  # correctly rounded (subnormals included)
    except OverflowError:
        return math.inf if exact > 0 else -math.inf


def maximum(a, b, propagate_nan: bool = False):
    return np.maximum(a, b) if propagate_nan else np.fmax(a, b)


def minimum(a, b, propagate_nan: bool = False):
    return np.minimum(a, b) if propagate_nan else np.fmin(a, b)


def float_to_int(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Float → integer as PTX `cvt.rzi` does: truncate, saturate, NaN → 0."""
    info = np.iinfo(dtype)
    x = np.asarray(x, dtype=np.float64)
    x = np.where(np.isnan(x), 0.0, np.trunc(x))
    x = np.clip(x, float(info.min), float(info.max))
    # float(info.max) for 64-bit rounds up past the range; clamp after conversion.
    big = x >= float(info.max)
    out = x.astype(dtype) if not big.any() else np.where(big, info.max, np.where(big, 0, x).astype(dtype))
    return np.asarray(out, dtype=dtype)


def cast_value(x: np.ndarray, src: ScalarType, dst: ScalarType) -> np.ndarray:
    """Value conversion between scalar types with Triton's semantics."""
    x = np.asarray(x)
    out_dtype = storage_dtype(dst)
    if dst.is_bool:
        return x != 0
    if dst.is_float:
        if dst.is_fp8 or dst.name == "bf16":
            return round_to_type(x.astype(np.float64 if x.dtype.kind != "f" else x.dtype), dst).astype(np.float32)
        return x.astype(out_dtype)
    if src.is_float:
        return float_to_int(x, out_dtype)
    return x.astype(out_dtype)

