"""The error bounds of the numerical suite, in one place: how far each backend's float
results may lie from the exact result, per op and type. docs/numerics.md shows the
same table (`test_numerics_doc.py` checks that the two agree) and the tests take their
tolerances from here, never a tolerance of their own.

Integer results are always compared bitwise. So are float ops every backend rounds
correctly: a bound of 0 below means "bitwise equal to the correctly rounded result",
and an op/type pair missing from `ULP_BOUNDS` is such an op (add, sub, mul, div, rem,
sqrt_rn, neg, abs, ceil, floor, min/max, fma outside the table, every cast).

Units: for a value x of a type with p significant bits, ulp(x) = 2**(e - p + 1) where
2**e <= |x| < 2**(e + 1) and e is at least the type's smallest normal exponent;
u = 2**-p is the unit roundoff and gamma(n) = n*u / (1 - n*u) (Higham's bound of n
roundings). Reductions and dots, whose summation order differs between backends, are
bounded by formulas (`sum_bound`, `dot_bound`) rather than ulps.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import numpy as np

PRECISION = {"f16": 11, "bf16": 8, "f32": 24, "f64": 53, "f8e4m3": 4, "f8e5m2": 3}
MIN_EXPONENT = {"f16": -14, "bf16": -126, "f32": -126, "f64": -1022, "f8e4m3": -6, "f8e5m2": -14}


# A bound in ulps: a number, or (c, k) for c + k·abs(x) ulps where x is the input
# (the GPU's f32 exp, whose error grows with the argument).
Ulps = Union[float, tuple[float, float]]


def describe(v: Ulps) -> str:
    """A bound as docs/numerics.md writes it: `2`, `3 + 1.5·abs(x)`."""
    def num(f: float) -> str:
        return f"{f:g}"
    if isinstance(v, tuple):
        return f"{num(v[0])} + {num(v[1])}·abs(x)"
    return num(v)


def _add(a: Ulps, b: Ulps) -> Ulps:
    ca, ka = a if isinstance(a, tuple) else (a, 0.0)
    cb, kb = b if isinstance(b, tuple) else (b, 0.0)
    return (ca + cb, ka + kb) if ka or kb else ca + cb


@dataclass(frozen=True)
class Bound:
    """ulps from the exact result on the GPU ("cuda"), the interpreter, and the host
    emulator ("cuda-emulated": the GPU's lowering and instruction choices, with host
    models of the approximate instructions and the host's libm)."""
    cuda: Ulps
    interpreter: Ulps
    emulated: Ulps

    def on(self, backend: str) -> Ulps:
        return {"cuda": self.cuda, "interpreter": self.interpreter, "cuda-emulated": self.emulated,
                # the CPU backend rounds as the emulator does (the shared scalar lowering, host
                # libm) or better (its f32 exp is expf, not the GPU's ex2 sequence)
                "cpu": self.emulated}[backend]

    @property
    def gpu_vs_interpreter(self) -> Ulps:
        """The bound between the GPU's and the interpreter's results (they may err on
        opposite sides of the exact value)."""
        return _add(self.cuda, self.interpreter)


def _math(f32: tuple, f64: tuple, f16: tuple = (1, 2, 1), bf16: tuple = (1, 1, 1)) -> dict:
    return {"f32": Bound(*f32), "f64": Bound(*f64), "f16": Bound(*f16), "bf16": Bound(*bf16)}


# (op, type) -> Bound. Sources, for the docs: the GPU's libdevice bounds are CUDA's
# (Programming Guide, "Mathematical Functions", full range). The GPU computes f32 exp
# as Triton does, ex2.approx.f32(x · log2(e)): ex2.approx's ~2 ulp plus the rounding
# of the product and of log2(e) to f32, which shift the result by up to |x|·2**-23
# relative (1.5·abs(x) ulp); f32 exp2 is ex2.approx.ftz.f32, ~2 ulp down to 2**-126
# (below, flushed to zero). sqrt.approx.f32 is 2**-23 relative and rsqrt.approx.f32
# 2**-22.9 (PTX ISA), at most 2 and 3 ulp (a relative error r is up to r·2**24 ulp at
# the top of a binade); div.full.f32 2 ulp (PTX ISA); narrow types compute in f32 and
# round, so they are within 1 ulp. The interpreter's are numpy's float loops
# (float32: SIMD exp 2.52 / log 3.83 ulp, sin/cos 1.49, SVML exp2/log2 4; float64
# within 2, SVML 4; float16 through float32 within 2); erf and rsqrt it computes in
# float64 and rounds. The emulator calls the host's libm (glibc: within 1 ulp) for
# libdevice, and runs the GPU's f32 exp sequence with ex2.approx as exp2f.
ULP_BOUNDS: dict[tuple[str, str], Bound] = {}
for _op, _bounds in {
    "exp": _math(f32=((3, 1.5), 3, (1, 1.5)), f64=(1, 2, 1)),
    "exp2": _math(f32=(2, 4, 1), f64=(1, 4, 1)),
    "log": _math(f32=(1, 4, 1), f64=(1, 2, 1)),
    "log2": _math(f32=(1, 4, 1), f64=(1, 4, 1)),
    "sin": _math(f32=(2, 2, 1), f64=(2, 2, 1)),
    "cos": _math(f32=(2, 2, 1), f64=(2, 2, 1)),
    "erf": _math(f32=(2, 1, 1), f64=(2, 1, 1), f16=(1, 1, 1)),
    # the emulator's rsqrt is 1/sqrt: two roundings
    "rsqrt": _math(f32=(3, 1, 2), f64=(1, 2, 2), f16=(1, 1, 1)),
    # sqrt.approx.f32 on the GPU (sqrt_rn is correctly rounded everywhere)
    "sqrt": {"f32": Bound(2, 0, 0), "f16": Bound(1, 0, 0), "bf16": Bound(1, 0, 0)},
    # fdiv without ieee_rounding: div.full.f32 on the GPU
    "fdiv": {"f32": Bound(2, 0, 0)},
    # fma rounds once in the interpreter; the GPU computes bf16 fma in f32 and rounds
    # again (the emulator f16 in f64), which can land one ulp off
    "fma": {"bf16": Bound(1, 0, 1), "f16": Bound(0, 0, 1)},
}.items():
    for _t, _b in _bounds.items():
        ULP_BOUNDS[(_op, _t)] = _b


def ulp_bound(op: str, t: str, backend: str, x=None):
    """ulps of type `t` that `op`'s results may lie from the exact result on `backend`
    (0: bitwise equal to the correctly rounded result); an array over the inputs `x`
    for bounds that grow with the argument."""
    b = ULP_BOUNDS.get((op, t))
    v = 0.0 if b is None else b.on(backend)
    if isinstance(v, tuple):
        assert x is not None, f"the bound of {op} on {t} depends on the input"
        return v[0] + v[1] * np.abs(np.asarray(x, dtype=np.float64))
    return v


def ulp(x: np.ndarray, t: str) -> np.ndarray:
    """ulp of type `t` at the magnitude of each value of `x` (float64)."""
    a = np.abs(np.asarray(x, dtype=np.float64))
    with np.errstate(divide="ignore"):
        e = np.floor(np.log2(np.where(a > 0, a, 1.0)))
    e = np.maximum(np.where(a > 0, e, MIN_EXPONENT[t]), MIN_EXPONENT[t])
    return np.exp2(e - PRECISION[t] + 1)


def unit_roundoff(t: str) -> float:
    return 2.0 ** -PRECISION[t]


def gamma(n: int, t: str) -> float:
    """Higham's gamma_n: the relative error bound of n roundings in type `t`."""
    nu = n * unit_roundoff(t)
    assert nu < 1
    return nu / (1 - nu)


def sum_bound(n_terms: int, abs_sum, t: str):
    """|computed − exact| of a sum of `n_terms` values in type `t`, in any order (every
    combine rounded in `t`): gamma(n_terms − 1) · Σ|x_i|. Between the GPU (in-thread,
    then shuffle-tree, then cross-warp order) and the interpreter (numpy's order), the
    bound is twice this."""
    return gamma(max(n_terms - 1, 0), t) * np.asarray(abs_sum, dtype=np.float64)


def dot_bound(k: int, abs_terms, t: str = "f32"):
    """|computed − exact| of acc + Σ_k a_k·b_k accumulated in type `t` (`abs_terms` =
    |acc| + Σ|a_k·b_k|): gamma(k) · abs_terms. The GPU's FMA chain rounds k times, numpy's
    float32 matmul k times, the interpreter's f32 `ieee` dot once."""
    return gamma(k, t) * np.asarray(abs_terms, dtype=np.float64)


def assert_ulps(got, exact, t: str, ulps, what: str = "") -> None:
    """`got` (values of type `t`) lies within `ulps` ulps (a number, or one per value)
    of `exact` (float64; for t = f64 the float64 nearest the exact value, so half an
    ulp more is allowed). ulps = 0: bitwise equal to `exact` rounded to `t` (NaNs
    match NaNs)."""
    got = np.asarray(got, dtype=np.float64)
    exact = np.asarray(exact, dtype=np.float64)
    ulps = np.broadcast_to(np.asarray(ulps, dtype=np.float64), exact.shape)
    nan = np.isnan(exact)
    np.testing.assert_array_equal(np.isnan(got), nan, err_msg=f"{what}: NaN positions")
    g, x, n = got[~nan], exact[~nan], ulps[~nan]
    if not n.any():
        np.testing.assert_array_equal(g, round_to(x, t), err_msg=f"{what}: not correctly rounded")
        return
    inf = np.isinf(x)
    np.testing.assert_array_equal(g[inf], x[inf], err_msg=f"{what}: infinities")
    g, x, n = g[~inf], x[~inf], n[~inf]
    allowed = (n + (0.5 if t == "f64" else 0.0)) * ulp(x, t)
    err = np.abs(g - x)
    bad = err > allowed
    if bad.any():
        i = np.flatnonzero(bad)[:5]
        raise AssertionError(f"{what}: {int(bad.sum())} of {bad.size} values beyond their bound in ulp of {t}: "
                             f"got {g[i].tolist()}, exact {x[i].tolist()}, "
                             f"errors {(err[i] / ulp(x[i], t)).tolist()} ulp, bounds {n[i].tolist()}")


def assert_within(got, exact, bound, what: str = "") -> None:
    """|got − exact| <= bound, elementwise (bound from `sum_bound` / `dot_bound`)."""
    got = np.asarray(got, dtype=np.float64)
    exact = np.asarray(exact, dtype=np.float64)
    err = np.abs(got - exact)
    bad = ~(err <= np.broadcast_to(bound, err.shape))
    if bad.any():
        i = np.flatnonzero(bad.reshape(-1))[:5]
        raise AssertionError(f"{what}: {int(bad.sum())} of {bad.size} beyond the bound: got "
                             f"{got.reshape(-1)[i].tolist()}, exact {exact.reshape(-1)[i].tolist()}, "
                             f"bound {np.broadcast_to(bound, err.shape).reshape(-1)[i].tolist()}")


def round_to(x: np.ndarray, t: str) -> np.ndarray:
    """float64 values rounded once, to nearest even, to type `t` (f16, bf16, f32, f64),
    back as float64; computed independently of tegula (frexp and rint)."""
    x = np.asarray(x, dtype=np.float64)
    if t != "bf16":
        with np.errstate(over="ignore"):  # numpy rounds float64 → f16/f32 once
            return x.astype({"f16": np.float16, "f32": np.float32, "f64": np.float64}[t]).astype(np.float64)
    m, e = np.frexp(x)  # x = m · 2**e, 1/2 <= |m| < 1
    # significant bits available at this exponent (fewer for subnormals of the type)
    p = PRECISION[t] - np.maximum(MIN_EXPONENT[t] - (e - 1), 0)
    r = np.ldexp(np.rint(np.ldexp(m, p)), e - p)  # rint: ties to even
    with np.errstate(over="ignore"):
        r = np.where(np.abs(r) >= 2.0 ** 128, np.copysign(np.inf, x), r)  # bf16 overflows as f32 does
    return np.where(np.isfinite(x), r, x)


def round_fraction(r, t: str) -> float:
    """An exact rational (`fractions.Fraction`) rounded once, to nearest even, to type
    `t`, as a Python float: the reference for fma, where rounding the exact value to
    float64 first could round twice."""
    from fractions import Fraction
    if r == 0:
        return 0.0
    p, emin = PRECISION[t], MIN_EXPONENT[t]
    a = abs(r)
    e = a.numerator.bit_length() - a.denominator.bit_length()  # 2**e <= a < 2**(e + 1)
    if Fraction(2) ** e > a:
        e -= 1
    quantum = Fraction(2) ** (max(e, emin) - p + 1)
    q = round(a / quantum)  # Fraction.__round__ rounds ties to even
    try:
        v = float(q * quantum)
    except OverflowError:
        v = float("inf")
    return v if r > 0 else -v
