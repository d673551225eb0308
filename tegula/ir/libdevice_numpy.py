"""The reference meaning of libdevice's `__nv_*` symbols, on numpy arrays: what the
interpreter computes for `extern_elementwise` (and what the GPU's libdevice is held to,
within docs/numerics.md's bounds).

`IMPLEMENTATIONS[symbol](*arrays) -> array` (the exact symbols come from
`libdevice_exact`) takes arrays in the numpy storage dtypes of
the symbol's argument types and returns the result in its storage dtype. How each family
is computed:
- exact operations are exact: bit functions, integer arithmetic, classification,
  reinterpretations, rounding to integers, and every explicitly rounded operation
  (`__nv_fadd_rz`, `__nv_ddiv_ru`, `__nv_float2int_rd`, `__nv_ll2float_rn`, ...), which
  are evaluated on exact rationals and rounded in the requested direction;
- transcendental functions are the host C library's double-precision function (the
  same as Python's `math` where it has one; Bessel functions through libm directly),
  rounded once to float32 for the `...f` symbols, so they are at least as accurate as
  libdevice's; `cyl_bessel_i0/i1` are summed series, `erfinv`/`erfcinv` are Newton-
  refined inverses of `erf`/`erfc`;
- the `fast_*` approximations compute the exact function (their GPU error is part of
  the bounds); `rcp64h` is the reciprocal of the high word, truncated to a high word, as
  PTX defines the instruction behind it.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import math
from decimal import Context, Decimal
from fractions import Fraction
from typing import Callable

import numpy as np

from .libdevice_exact import EXACT, Impl, exact_op, float_to_int, ieee

IMPLEMENTATIONS: dict[str, Impl] = dict(EXACT)

F32, F64 = np.float32, np.float64


def _register(symbol: str, fn: Impl) -> None:
    IMPLEMENTATIONS[symbol] = fn


# ------------------------------------------------------------------ float math

def _libm() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("m") or None)


def _c_double(name: str, nargs: int = 1, int_first: bool = False, returns_int: bool = False) -> Callable:
    fn = getattr(_libm(), name)
    fn.restype = ctypes.c_int if returns_int else ctypes.c_double
    fn.argtypes = ([ctypes.c_int] if int_first else []) + [ctypes.c_double] * (nargs - int_first)
    return fn


def _vectorize(scalar: Callable, nin: int, out_dtype) -> Impl:
    vec = np.frompyfunc(scalar, nin, 1)
    return lambda *a: np.asarray(vec(*a)).astype(out_dtype)


def _float_pair(base: str, f64_impl: Impl) -> None:
    """`__nv_<base>` on float64 and `__nv_<base>f` on float32 (float64 math rounded once)."""
    _register(f"__nv_{base}", lambda *a: np.asarray(f64_impl(*(np.asarray(x, F64) for x in a)), F64))
    _register(f"__nv_{base}f", lambda *a: np.asarray(f64_impl(*(np.asarray(x, F64) for x in a))).astype(F32))


def _numpy_math() -> dict[str, Impl]:
    def sinpi(x):
        return _sin_cos_pi(x, 0)

    def cospi(x):
        return _sin_cos_pi(x, 1)

    def round_half_away(x):
        t = np.trunc(x)
        return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t)

    def logb(x):
        m, e = np.frexp(x)
        return np.where(x == 0, -np.inf, np.where(np.isfinite(x), (e - 1).astype(F64), np.abs(x)))

    def rcbrt(x):
        return 1.0 / np.cbrt(x)

    def norm(*xs):
        h = np.abs(xs[0])
        for x in xs[1:]:
            h = np.hypot(h, x)
        return h

    return {
        "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "rint": np.rint, "nearbyint": np.rint,
        "round": round_half_away, "sqrt": np.sqrt, "rsqrt": lambda x: 1.0 / np.sqrt(x), "exp2": np.exp2,
        "exp": np.exp, "exp10": lambda x: np.power(10.0, x), "expm1": np.expm1, "log": np.log,
        "log2": np.log2, "log10": np.log10, "log1p": np.log1p, "logb": logb, "sin": np.sin, "cos": np.cos,
        "tan": np.tan, "sinpi": sinpi, "cospi": cospi, "asin": np.arcsin, "acos": np.arccos,
        "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "asinh": np.arcsinh,
        "acosh": np.arccosh, "atanh": np.arctanh, "cbrt": np.cbrt, "rcbrt": rcbrt,
        "atan2": np.arctan2, "hypot": np.hypot, "rhypot": lambda a, b: 1.0 / np.hypot(a, b),
        "copysign": np.copysign, "nextafter": None, "fmod": np.fmod, "remainder": None,
        "fdim": lambda a, b: np.where(np.isnan(a) | np.isnan(b), np.nan, np.maximum(a - b, 0.0)),
        "norm3d": norm, "rnorm3d": lambda *x: 1.0 / norm(*x), "norm4d": norm, "rnorm4d": lambda *x: 1.0 / norm(*x),
    }


def _sin_cos_pi(x, shift: int):
    """sin(pi x) (shift 0) or cos(pi x) = sin(pi (x + 1/2)) (shift 1), from an exact
    reduction: x = k/2 + f with |f| <= 1/4 (exact in floating point), then sin or cos of
    pi f, whose argument has only the rounding of one product."""
    x = np.asarray(x, F64)
    with np.errstate(all="ignore"):
        r = np.fmod(x, 2.0)                 # exact, sign of x
        k = np.rint(2 * r)                  # quarter turns, exact
        f = r - k / 2                       # exact, |f| <= 1/4
        q = (k.astype(np.int64) + shift) % 4
        s, c = np.sin(np.pi * f), np.cos(np.pi * f)
        out = np.choose(q, [s, c, -s, -c])
        # exact zeros keep the sign IEEE gives sinpi (+0 for cospi's zeros)
        out = np.where(out == 0, 0.0 * x if shift == 0 else 0.0, out)
        return np.where(np.isfinite(x), out, np.nan)


_INV_SQRT2 = Fraction(int(Decimal(2).sqrt(Context(prec=50)).scaleb(49).to_integral_value()), 10 ** 49) ** -1


def _erfc_scaled_arg(x: float, scale: Fraction) -> tuple[float, float]:
    """t = x * scale as a float and the exact remainder (double-double)."""
    exact = Fraction(x) * scale
    hi = float(exact)
    return hi, float(exact - Fraction(hi))


def _normcdf_scalar(x: float) -> float:
    """0.5 erfc(-x/sqrt 2), with the rounding of -x/sqrt 2 corrected to first order
    (erfc' = -2/sqrt(pi) exp(-t^2)), so the tail keeps its relative accuracy."""
    if not math.isfinite(x):
        return math.nan if math.isnan(x) else (1.0 if x > 0 else 0.0)
    hi, lo = _erfc_scaled_arg(-x, _INV_SQRT2)
    return 0.5 * (math.erfc(hi) - lo * 2 / math.sqrt(math.pi) * math.exp(-hi * hi))


def _giles_start(w: float) -> float:
    """Giles' single-precision approximation of erfinv(x) / x from w = -log(1 - x^2)."""
    if w < 5:
        w -= 2.5
        p = 2.81022636e-08
        coeffs = (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
                  -0.00417768164, 0.246640727, 1.50140941)
    else:
        w = math.sqrt(w) - 3
        p = -0.000200214257
        coeffs = (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
                  0.00943887047, 1.00167406, 2.83297682)
    for c in coeffs:
        p = c + p * w
    return p


def _newton_erf(y: float) -> float:
    """erfinv(y) for |y| <= 1/2, where erf is well conditioned: Newton on erf."""
    x = _giles_start(-math.log((1.0 - y) * (1.0 + y))) * y
    for _ in range(4):
        x -= (math.erf(x) - y) / (2 / math.sqrt(math.pi) * math.exp(-x * x))
    return x


def _newton_erfc(q: float) -> float:
    """The x > 0 with erfc(x) = q, for 0 < q <= 1/2: Newton on log erfc (relative
    accuracy of q carries over; erf near 1 would lose it)."""
    x = _giles_start(-math.log(q * (2.0 - q))) * (1.0 - q)
    if not math.isfinite(x) or x <= 0:
        x = math.sqrt(-math.log(q))
    for _ in range(60):
        f = math.erfc(x)
        if f == 0:
            x *= 0.99
            continue
        step = (math.log(f) - math.log(q)) / (-2 / math.sqrt(math.pi) * math.exp(-x * x) / f)
        x -= step
        if abs(step) <= 1e-17 * abs(x):
            break
    return x


def _erfinv_scalar(y: float) -> float:
    if math.isnan(y) or abs(y) > 1:
        return math.nan
    if abs(y) == 1:
        return math.copysign(math.inf, y)
    if abs(y) <= 0.5:
        return _newton_erf(y) if y != 0 else y
    return math.copysign(_newton_erfc(1.0 - abs(y)), y)  # 1 - |y| is exact here


def _erfcinv_scalar(y: float) -> float:
    if math.isnan(y) or y < 0 or y > 2:
        return math.nan
    if y == 0:
        return math.inf
    if y == 2:
        return -math.inf
    if y > 1:
        return -_erfcinv_scalar(2.0 - y)  # exact
    if y >= 0.5:
        return _newton_erf(1.0 - y)  # exact, |1 - y| <= 1/2
    return _newton_erfc(y)


def _erfcx_scalar(x: float) -> float:
    if math.isnan(x):
        return x
    if x < 26:
        # exp(x^2) with x^2 = hi + lo exactly: exp(hi) (1 + lo) keeps the relative
        # accuracy that the rounding of x*x would cost (about 2 x^2 ulps)
        sq = Fraction(x) * Fraction(x)
        hi = float(sq)
        lo = float(sq - Fraction(hi))
        try:
            return math.exp(hi) * (1 + lo) * math.erfc(x)
        except OverflowError:
            return math.inf
    # asymptotic series: exp(x^2) erfc(x) ~ 1/(x sqrt(pi)) * sum (-1)^k (2k-1)!! / (2x^2)^k
    s, term = 1.0, 1.0
    for k in range(1, 12):
        term *= -(2 * k - 1) / (2 * x * x)
        s += term
    return s / (x * math.sqrt(math.pi))


def _bessel_i(order: int) -> Callable[[float], float]:
    def f(x: float) -> float:
        if math.isnan(x):
            return x
        if math.isinf(x):
            return math.inf if order == 0 or x > 0 else -math.inf
        q = (x / 2) ** 2
        term = 1.0 if order == 0 else x / 2
        total = term
        k = 0
        while True:
            k += 1
            term *= q / (k * (k + order))
            total += term
            if abs(term) <= abs(total) * 1e-17 or math.isinf(total):
                return total
    return f


def _safe(fn: Callable[..., float]) -> Callable[..., float]:
    """A Python math function with IEEE answers instead of exceptions."""
    def run(*xs):
        try:
            return fn(*xs)
        except OverflowError:
            return math.inf
        except ValueError:
            return math.nan
    return run


def _tgamma(x: float) -> float:
    if math.isnan(x) or x == -math.inf:
        return math.nan
    if x == 0:
        return math.copysign(math.inf, x)
    if x < 0 and x == math.floor(x):
        return math.nan
    try:
        return math.gamma(x)
    except OverflowError:
        return math.inf


def _lgamma(x: float) -> float:
    if math.isinf(x):
        return math.inf
    if x <= 0 and x == math.floor(x):
        return math.inf
    return math.lgamma(x)


# the float64 scalar functions above that no C library has, for the compiled CPU backend,
# which calls them from its code for these symbols (so its results are these, bitwise)
SCALAR_REFERENCES: dict[str, Callable[[float], float]] = {
    "erfinv": _erfinv_scalar, "erfcinv": _erfcinv_scalar, "erfcx": _erfcx_scalar, "normcdf": _normcdf_scalar,
    "normcdfinv": lambda p: -math.sqrt(2) * _erfcinv_scalar(2 * p),
    "cyl_bessel_i0": _bessel_i(0), "cyl_bessel_i1": _bessel_i(1),
}


def _register_float_math() -> None:
    for base, fn in _numpy_math().items():
        if fn is not None:
            _float_pair(base, fn)
    _float_pair("fabs", np.abs)
    # fma rounds once, to its own type (a float64 route would round fmaf twice)
    for sym, dt in (("__nv_fma", F64), ("__nv_fmaf", F32)):
        _register(sym, exact_op(lambda x, y, z: x * y + z, dt, "rn", ieee(lambda x, y, z: x * y + z), 3))
    libm_unary = {"erf": "erf", "erfc": "erfc", "j0": "j0", "j1": "j1", "y0": "y0", "y1": "y1"}
    for base, cname in libm_unary.items():
        _float_pair(base, _vectorize(_c_double(cname), 1, F64))
    _float_pair("lgamma", _vectorize(_lgamma, 1, F64))
    _float_pair("tgamma", _vectorize(_tgamma, 1, F64))
    for name, scalar in SCALAR_REFERENCES.items():
        _float_pair(name, _vectorize(scalar, 1, F64))
    _float_pair("remainder", _vectorize(_safe(math.remainder), 2, F64))
    for prefix, dt in (("", F64), ("f", F32)):
        _register(f"__nv_nextafter{prefix}", lambda a, b, dt=dt: np.nextafter(np.asarray(a, dt), np.asarray(b, dt)))
    jn, yn = _c_double("jn", 2, int_first=True), _c_double("yn", 2, int_first=True)
    for name, cfn in (("jn", jn), ("yn", yn)):
        vec = np.frompyfunc(lambda n, x, cfn=cfn: cfn(int(n), float(x)), 2, 1)
        _register(f"__nv_{name}", lambda n, x, vec=vec: np.asarray(vec(n, x)).astype(F64))
        _register(f"__nv_{name}f", lambda n, x, vec=vec: np.asarray(vec(n, x)).astype(F32))
    # ldexp / scalbn / powi: exact scaling or repeated products, rounded once
    for name in ("ldexp", "scalbn"):
        _register(f"__nv_{name}", lambda x, n: np.ldexp(np.asarray(x, F64), np.asarray(n, np.int32)))
        _register(f"__nv_{name}f", lambda x, n: np.ldexp(np.asarray(x, F64), np.asarray(n, np.int32)).astype(F32))
    _register("__nv_powi", lambda x, n: np.power(np.asarray(x, F64), np.asarray(n, F64)))
    _register("__nv_powif", lambda x, n: np.power(np.asarray(x, F64), np.asarray(n, F64)).astype(F32))
    _float_pair("pow", lambda a, b: np.power(a, b))
    _register("__nv_ilogb", _ilogb)
    _register("__nv_ilogbf", _ilogb)
    round_half_away = _numpy_math()["round"]
    to_ll = float_to_int("ll", "rz", np.int64)
    for prefix in ("f", ""):
        _register(f"__nv_llrint{prefix}", float_to_int("ll", "rn", np.int64))
        _register(f"__nv_llround{prefix}", lambda x: to_ll(round_half_away(np.asarray(x, F64))))
    # approximations: the exact function (their error is part of the GPU bound)
    for name, base in (("sinf", "sin"), ("cosf", "cos"), ("tanf", "tan"), ("expf", "exp"), ("logf", "log"),
                       ("log2f", "log2"), ("log10f", "log10"), ("exp10f", "exp10")):
        _register(f"__nv_fast_{name}", IMPLEMENTATIONS[f"__nv_{base}f"])
    _register("__nv_fast_fdividef", lambda a, b: (np.asarray(a, F64) / np.asarray(b, F64)).astype(F32))
    _register("__nv_fast_powf", IMPLEMENTATIONS["__nv_powf"])
    _register("__nv_frsqrt_rn", _exact_rsqrt_f32)
    _register("__nv_saturatef", lambda x: np.where(np.isnan(x), F32(0), np.clip(np.asarray(x, F32), 0, 1)).astype(F32))
    _register("__nv_rcp64h", _rcp64h)
    # classification (int32 results)
    for prefix, dt in (("f", F32), ("d", F64)):
        _register(f"__nv_isnan{prefix}", lambda x: np.isnan(x).astype(np.int32))
        _register(f"__nv_isinf{prefix}", lambda x: np.isinf(x).astype(np.int32))
        _register(f"__nv_signbit{prefix}", lambda x: np.signbit(x).astype(np.int32))
    _register("__nv_finitef", lambda x: np.isfinite(x).astype(np.int32))
    _register("__nv_isfinited", lambda x: np.isfinite(x).astype(np.int32))


def _rcp64h(x):
    """PTX `rcp.approx.ftz.f64`, what libdevice's rcp64h is: the reciprocal of x with its
    low 32 bits cleared, returned with its own low 32 bits clear (the GPU's value, from
    20 mantissa bits, agrees to about 2^-20 relative)."""
    hi = np.asarray(x, F64).view(np.int64) & np.int64(-(1 << 32))
    with np.errstate(all="ignore"):
        r = 1.0 / hi.view(F64)
    return (r.view(np.int64) & np.int64(-(1 << 32))).view(F64)


def _ilogb(x):
    x = np.asarray(x, F64)
    _m, e = np.frexp(x)
    out = (e - 1).astype(np.int64)
    out = np.where(x == 0, -2**31, out)
    out = np.where(np.isnan(x), -2**31, out)
    out = np.where(np.isinf(x), 2**31 - 1, out)
    return out.astype(np.int32)


def _exact_rsqrt_f32(x):
    """1/sqrt(x) rounded to nearest float32, from float64 arithmetic (within about one
    float64 ulp of the exact value): it can differ from correct rounding only when the
    exact value lies within ~2^-52 (relative) of a float32 rounding midpoint."""
    with np.errstate(all="ignore"):
        return (1.0 / np.sqrt(np.asarray(x, F64))).astype(F32)


_register_float_math()

