"""The functions of Triton 3.6's CUDA libdevice module, as data: for each Python name,
its overloads — argument dtypes, the `__nv_*` symbol, the result dtype — and whether
Triton turns the integer result into a boolean.

Written compactly by family (most functions are `__nv_<name>f` on fp32 and
`__nv_<name>` on fp64); `LIBDEVICE` expands it. The names, symbols and dtypes are
Triton's (`third_party/nvidia/language/cuda/libdevice.py`, release 3.6), including its
choices that look odd (`float2uint_*` and `double2uint_*` return int32, `float2ull_*`
int64): a drop-in keeps them.
"""
from __future__ import annotations

from typing import NamedTuple


class Overload(NamedTuple):
    args: tuple[str, ...]   # Triton dtype names
    symbol: str
    ret: str


class LibdeviceFunction(NamedTuple):
    name: str
    overloads: tuple[Overload, ...]
    to_bool: bool = False   # Triton casts the int32 result to int1 (isnan, isinf, ...)

    @property
    def arity(self) -> int:
        return len(self.overloads[0].args)


ROUNDINGS = ("rn", "rz", "rd", "ru")

# fp32 -> __nv_<name>f, fp64 -> __nv_<name>, same arity and result type
_FLOAT_UNARY = """floor rsqrt ceil trunc exp2 sqrt rint nearbyint sin cos sinpi cospi tan log2 exp exp10
cosh sinh tanh atan asin acos log log10 log1p acosh asinh atanh expm1 cbrt rcbrt j0 j1 y0 y1
cyl_bessel_i0 cyl_bessel_i1 erf erfinv erfc erfcx erfcinv normcdfinv normcdf lgamma tgamma round logb""".split()
_FLOAT_BINARY = "copysign nextafter atan2 hypot rhypot fmod remainder fdim".split()
_FLOAT_TERNARY = "norm3d rnorm3d fma".split()
_FLOAT_QUATERNARY = "norm4d rnorm4d".split()


def _fd(name: str, n: int, f_sym: str = "", d_sym: str = "", f_ret: str = "fp32", d_ret: str = "fp64",
        to_bool: bool = False) -> LibdeviceFunction:
    f_sym = f_sym or f"__nv_{name}f"
    d_sym = d_sym or f"__nv_{name}"
    return LibdeviceFunction(name, (Overload(("fp32",) * n, f_sym, f_ret), Overload(("fp64",) * n, d_sym, d_ret)),
                             to_bool)


def _one(name: str, args: tuple[str, ...], symbol: str, ret: str, to_bool: bool = False) -> LibdeviceFunction:
    return LibdeviceFunction(name, (Overload(args, symbol, ret),), to_bool)


def _many(name: str, *overloads: tuple[tuple[str, ...], str, str]) -> LibdeviceFunction:
    return LibdeviceFunction(name, tuple(Overload(*o) for o in overloads))


def _build() -> dict[str, LibdeviceFunction]:
    fns: list[LibdeviceFunction] = []
    fns += [_fd(n, 1) for n in _FLOAT_UNARY]
    fns += [_fd(n, 2) for n in _FLOAT_BINARY]
    fns += [_fd(n, 3) for n in _FLOAT_TERNARY]
    fns += [_fd(n, 4) for n in _FLOAT_QUATERNARY]
    # integer and bit functions
    fns += [
        _many("clz", (("int32",), "__nv_clz", "int32"), (("int64",), "__nv_clzll", "int32")),
        _many("popc", (("int32",), "__nv_popc", "int32"), (("int64",), "__nv_popcll", "int32")),
        _many("ffs", (("int32",), "__nv_ffs", "int32"), (("int64",), "__nv_ffsll", "int32")),
        _many("brev", (("int32",), "__nv_brev", "int32"), (("int64",), "__nv_brevll", "int64")),
        _one("byte_perm", ("int32",) * 3, "__nv_byte_perm", "int32"),
        _many("mulhi", (("int32", "int32"), "__nv_mulhi", "int32"), (("uint32", "uint32"), "__nv_umulhi", "uint32"),
              (("int64", "int64"), "__nv_mul64hi", "int64"), (("uint64", "uint64"), "__nv_umul64hi", "uint64")),
        _many("mul24", (("int32", "int32"), "__nv_mul24", "int32"), (("uint32", "uint32"), "__nv_umul24", "uint32")),
        _many("sad", (("int32", "int32", "uint32"), "__nv_sad", "int32"),
              (("uint32", "uint32", "uint32"), "__nv_usad", "uint32")),
        _many("hadd", (("int32", "int32"), "__nv_hadd", "int32"), (("uint32", "uint32"), "__nv_uhadd", "uint32")),
        _many("rhadd", (("int32", "int32"), "__nv_rhadd", "int32"), (("uint32", "uint32"), "__nv_urhadd", "uint32")),
        _many("abs", (("int32",), "__nv_abs", "int32"), (("int64",), "__nv_llabs", "int64"),
              (("fp32",), "__nv_fabsf", "fp32"), (("fp64",), "__nv_fabs", "fp64")),
    ]
    # single-precision-only and double-only helpers
    fns += [
        _one("rcp64h", ("fp64",), "__nv_rcp64h", "fp64"),
        _one("saturatef", ("fp32",), "__nv_saturatef", "fp32"),
        _one("fast_dividef", ("fp32", "fp32"), "__nv_fast_fdividef", "fp32"),
        _one("fast_powf", ("fp32", "fp32"), "__nv_fast_powf", "fp32"),
        _one("rsqrt_rn", ("fp32",), "__nv_frsqrt_rn", "fp32"),
        _one("finitef", ("fp32",), "__nv_finitef", "int32", to_bool=True),
        _one("isfinited", ("fp64",), "__nv_isfinited", "int32", to_bool=True),
        _one("hiloint2double", ("int32", "int32"), "__nv_hiloint2double", "fp64"),
        _one("double2loint", ("fp64",), "__nv_double2loint", "int32"),
        _one("double2hiint", ("fp64",), "__nv_double2hiint", "int32"),
        _one("int_as_float", ("int32",), "__nv_int_as_float", "fp32"),
        _one("float_as_int", ("fp32",), "__nv_float_as_int", "int32"),
        _one("uint_as_float", ("uint32",), "__nv_uint_as_float", "fp32"),
        _one("float_as_uint", ("fp32",), "__nv_float_as_uint", "int32"),
        _one("longlong_as_double", ("int64",), "__nv_longlong_as_double", "fp64"),
        _one("double_as_longlong", ("fp64",), "__nv_double_as_longlong", "int64"),
        _one("int2double_rn", ("int32",), "__nv_int2double_rn", "fp64"),
        _one("uint2double_rn", ("uint32",), "__nv_uint2double_rn", "fp64"),
    ]
    fns += [_one(f"fast_{n}", ("fp32",), f"__nv_fast_{n}", "fp32")
            for n in ("sinf", "cosf", "log2f", "logf", "expf", "tanf", "exp10f", "log10f")]
    # float classification (int32 results; isnan/isinf become booleans as in Triton)
    fns += [
        _fd("isnan", 1, "__nv_isnanf", "__nv_isnand", "int32", "int32", to_bool=True),
        _fd("isinf", 1, "__nv_isinff", "__nv_isinfd", "int32", "int32", to_bool=True),
        _fd("signbit", 1, "__nv_signbitf", "__nv_signbitd", "int32", "int32"),
        _fd("ilogb", 1, "__nv_ilogbf", "__nv_ilogb", "int32", "int32"),
        _fd("llrint", 1, "__nv_llrintf", "__nv_llrint", "int64", "int64"),
        _fd("llround", 1, "__nv_llroundf", "__nv_llround", "int64", "int64"),
    ]
    # mixed int/float arguments
    fns += [
        _many("yn", (("int32", "fp32"), "__nv_ynf", "fp32"), (("int32", "fp64"), "__nv_yn", "fp64")),
        _many("jn", (("int32", "fp32"), "__nv_jnf", "fp32"), (("int32", "fp64"), "__nv_jn", "fp64")),
        _many("ldexp", (("fp32", "int32"), "__nv_ldexpf", "fp32"), (("fp64", "int32"), "__nv_ldexp", "fp64")),
        _many("scalbn", (("fp32", "int32"), "__nv_scalbnf", "fp32"), (("fp64", "int32"), "__nv_scalbn", "fp64")),
        _many("pow", (("fp32", "int32"), "__nv_powif", "fp32"), (("fp64", "int32"), "__nv_powi", "fp64"),
              (("fp32", "fp32"), "__nv_powf", "fp32"), (("fp64", "fp64"), "__nv_pow", "fp64")),
    ]
    # arithmetic with an explicit rounding mode
    for r in ROUNDINGS:
        fns += [
            _fd(f"fma_{r}", 3, f"__nv_fmaf_{r}", f"__nv_fma_{r}"),
            _fd(f"div_{r}", 2, f"__nv_fdiv_{r}", f"__nv_ddiv_{r}"),
            _fd(f"rcp_{r}", 1, f"__nv_frcp_{r}", f"__nv_drcp_{r}"),
            _fd(f"sqrt_{r}", 1, f"__nv_fsqrt_{r}", f"__nv_dsqrt_{r}"),
            _fd(f"add_{r}", 2, f"__nv_fadd_{r}", f"__nv_dadd_{r}"),
            _fd(f"sub_{r}", 2, f"__nv_fsub_{r}", f"__nv_dsub_{r}"),
            _fd(f"mul_{r}", 2, f"__nv_fmul_{r}", f"__nv_dmul_{r}"),
        ]
        # conversions: (name, argument, result) per rounding mode
        for name, arg, ret in (("double2float", "fp64", "fp32"), ("double2int", "fp64", "int32"),
                               ("double2uint", "fp64", "int32"), ("float2int", "fp32", "int32"),
                               ("float2uint", "fp32", "int32"), ("int2float", "int32", "fp32"),
                               ("uint2float", "uint32", "fp32"), ("float2ll", "fp32", "int64"),
                               ("float2ull", "fp32", "int64"), ("double2ll", "fp64", "int64"),
                               ("double2ull", "fp64", "int64"), ("ll2float", "int64", "fp32"),
                               ("ull2float", "uint64", "fp32"), ("ll2double", "int64", "fp64"),
                               ("ull2double", "uint64", "fp64")):
            fns.append(_one(f"{name}_{r}", (arg,), f"__nv_{name}_{r}", ret))
    table = {f.name: f for f in fns}
    assert len(table) == len(fns), "duplicate libdevice name"
    return table


LIBDEVICE: dict[str, LibdeviceFunction] = _build()

# every symbol with its argument and result dtypes (the interpreter's and the emulator's
# implementations are keyed by symbol)
SYMBOLS: dict[str, Overload] = {o.symbol: o for f in LIBDEVICE.values() for o in f.overloads}
