"""`numpy_ops.fma` rounds once, like the GPU's `fma.rn`: against exact rational
arithmetic (`fractions.Fraction`) on random operands, cancellation (c ≈ −a·b), exact
ties of the narrow types, and the edges of the float64 range (tiny and huge products,
overflow, subnormal results, infinities, NaNs, signed zeros)."""
from __future__ import annotations

import math
import time
from fractions import Fraction

import numpy as np
import pytest

from tegula.ir.numpy_ops import add_round_to_odd, fma, fma_f64


def exact_f64(a: float, b: float, c: float) -> float:
    if not (math.isfinite(a) and math.isfinite(b)):
        return a * b + c  # IEEE: inf * 0 = NaN, inf - inf = NaN
    if not math.isfinite(c):
        return c  # a finite product does not change an infinite or NaN addend
    r = Fraction(a) * Fraction(b) + Fraction(c)
    if r == 0:
        return a * b + c if a == 0 or b == 0 else 0.0
    try:
        return float(r)
    except OverflowError:
        return math.inf if r > 0 else -math.inf


def round_fraction(r: Fraction, p: int, emin: int) -> float:
    """r rounded once to p significant bits (nearest even), subnormals below 2**emin."""
    if r == 0:
        return 0.0
    a = abs(r)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    q = Fraction(2) ** (max(e, emin) - p + 1)
    v = float(round(a / q) * q)
    return v if r > 0 else -v


def same(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Equal, NaN matching NaN, and zeros of equal sign."""
    return (got == want) & (np.signbit(got) == np.signbit(want)) | (np.isnan(got) & np.isnan(want))


def cancellation_operands(rng, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a = rng.standard_normal(n) * np.exp2(rng.integers(-40, 40, n))
    b = rng.standard_normal(n) * np.exp2(rng.integers(-40, 40, n))
    p = a * b
    kind = rng.integers(0, 5, n)
    c = np.select([kind == 0, kind == 1, kind == 2, kind == 3],
                  [-p,                                             # leaves the product's error
                   -p * (1 + rng.integers(-8, 9, n) * 2.0 ** -52),  # near cancellation
                   p * 2.0 ** -rng.integers(53, 110, n) * rng.standard_normal(n),  # far below a*b's ulp
                   rng.standard_normal(n) * np.exp2(rng.integers(-120, 120, n))],
                  p * 2.0 ** -53 * rng.integers(-3, 4, n))          # exactly at half-ulp multiples
    return a, b, c


def test_f64_fma_is_correctly_rounded_with_cancellation():
    rng = np.random.default_rng()
    a, b, c = cancellation_operands(rng, 20000)
    got = fma_f64(a, b, c)
    want = np.array([exact_f64(*v) for v in zip(a.tolist(), b.tolist(), c.tolist())])
    bad = ~same(got, want)
    assert not bad.any(), list(zip(a[bad][:3], b[bad][:3], c[bad][:3], got[bad][:3], want[bad][:3]))
    # the unfused a*b + c really differs on these operands (the test can fail)
    assert (a * b + c != want).sum() > 1000


def test_f64_fma_over_the_whole_range_and_special_values():
    rng = np.random.default_rng()
    n = 4000
    a = rng.standard_normal(n) * np.exp2(rng.integers(-1074, 1023, n))
    b = rng.standard_normal(n) * np.exp2(rng.integers(-1074, 1023, n))
    c = rng.standard_normal(n) * np.exp2(rng.integers(-1074, 1023, n))
    with np.errstate(all="ignore"):
        c[::4] = -(a * b)[::4]
    specials = [0.0, -0.0, math.inf, -math.inf, math.nan, 5e-324, -5e-324, 1.7976931348623157e308, 1.0, -3.0]
    grid = np.array([(x, y, z) for x in specials for y in specials for z in specials]).T
    a, b, c = (np.concatenate([u, v]) for u, v in zip((a, b, c), grid))
    with np.errstate(all="ignore"):
        got = fma_f64(a, b, c)
    want = np.array([exact_f64(*v) for v in zip(a.tolist(), b.tolist(), c.tolist())])
    bad = ~same(got, want)
    assert not bad.any(), list(zip(a[bad][:3], b[bad][:3], c[bad][:3], got[bad][:3], want[bad][:3]))


@pytest.mark.parametrize("dtype,p,emin", [(np.float32, 24, -126), (np.float16, 11, -14)], ids=["f32", "f16"])
def test_narrow_fma_rounds_once(dtype, p, emin):
    """f32/f16: a*b + c rounded to float64 first and then to the type would round twice;
    the tie lanes (a*b halfway between two values, c far below) catch that."""
    rng = np.random.default_rng()
    n = 4000
    a = (rng.standard_normal(n) * 3).astype(dtype)
    b = (rng.standard_normal(n) * 3).astype(dtype)
    c = (rng.standard_normal(n) * 3).astype(dtype)
    k = n // 4
    h = p // 2
    a[:k] = (1 + 2.0 ** -h) * rng.choice([-1.0, 1.0], k)
    b[:k] = 1 + 2.0 ** -(p - h)
    # far below the last bit of a*b (~1): below float64's for f32 (where rounding
    # through float64 would round twice); f16 has no such values, its smallest
    # subnormal 2**-24 only gets below float32's
    c[:k] = (2.0 ** -60 if dtype == np.float32 else 2.0 ** -24) * rng.choice([-1.0, 1.0], k)
    c[k:2 * k] = -(a[k:2 * k].astype(np.float64) * b[k:2 * k]).astype(dtype)
    got = fma(a, b, c)
    assert got.dtype == dtype
    want = np.array([round_fraction(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)), p, emin)
                     for x, y, z in zip(a, b, c)]).astype(dtype)
    np.testing.assert_array_equal(got, want)
    through = np.float64 if dtype == np.float32 else np.float32
    twice = (a.astype(through) * b + c).astype(dtype)
    assert (twice != want).any()  # the double rounding the tie lanes are there for


def test_round_to_odd_sum():
    rng = np.random.default_rng()
    x = rng.standard_normal(5000)
    y = rng.standard_normal(5000) * np.exp2(rng.integers(-80, 0, 5000))
    got = add_round_to_odd(x, y)
    for g, u, v in zip(got[:2000], x[:2000], y[:2000]):
        exact = Fraction(u) + Fraction(v)
        if Fraction(g) != exact:  # inexact: the odd one of the two neighbours of the sum
            lo, hi = Fraction(np.nextafter(g, -math.inf)), Fraction(np.nextafter(g, math.inf))
            assert lo < exact < hi
            assert np.array([g]).view(np.int64)[0] & 1


def test_f64_fma_is_fast_for_large_arrays():
    rng = np.random.default_rng()
    a, b, c = (rng.standard_normal(1 << 20) for _ in range(3))
    t0 = time.perf_counter()
    fma_f64(a, b, c)
    assert time.perf_counter() - t0 < 2.0  # ~0.25 s here: vectorized, no per-element Python
