"""Which C library function computes a libdevice symbol on the host: `__nv_<f>` is C's
`<f>` (double) and `__nv_<f>f` is `<f>f` (float) for the functions C's math library
has with the same signature and meaning. Everything else (rounding-mode arithmetic,
classification, bit functions, the `fast_*` approximations) has no host counterpart."""
from __future__ import annotations

from typing import Optional

LIBM_FUNCTIONS = frozenset("""sin cos tan asin acos atan atan2 sinh cosh tanh asinh acosh atanh exp exp2 exp10
expm1 log log2 log10 log1p logb cbrt pow hypot erf erfc lgamma tgamma j0 j1 y0 y1 jn yn fmod remainder fdim
copysign nextafter ceil floor trunc round rint nearbyint sqrt fabs fma ldexp scalbn ilogb""".split())


def host_libm_name(symbol: str) -> Optional[str]:
    if not symbol.startswith("__nv_"):
        return None
    name = symbol[len("__nv_"):]
    if name in LIBM_FUNCTIONS or (name.endswith("f") and name[:-1] in LIBM_FUNCTIONS):
        return name
    return None
