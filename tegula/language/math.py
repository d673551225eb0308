"""`tl.math`: elementwise math builtins (also exported at `tl.` top level).

As in Triton (which follows libdevice), transcendental functions accept fp32/fp64 only:
an fp16/bf16 argument is an error telling the user to cast, not a silent upcast.
"""
from __future__ import annotations

from .. import ir
from .constexpr import unwrap_constexpr
from .core import builtin
from .tensor import tensor

U = unwrap_constexpr


def _check_dtypes(fn_name: str, allowed: tuple[str, ...], *args) -> None:
    for a in args:
        a = U(a)
        if isinstance(a, tensor) and a.dtype.name not in allowed:
            raise ValueError(f"Expected dtype {list(allowed)} but got {a.dtype.name}: tl.{fn_name} supports "
                             f"{', '.join(allowed)}; cast first, e.g. x.to(tl.float32)")


def _unary(name: str, op: ir.Op, allowed: tuple[str, ...] = ("fp32", "fp64")):
    def impl(sem, x):
        _check_dtypes(name, allowed, x)
        return sem.unary_math(op, U(x))

    impl.__name__ = name
    impl.__doc__ = f"Elementwise {name} of `x` ({' or '.join(allowed)})."
    return builtin(impl)


exp = _unary("exp", ir.Op.EXP)
exp2 = _unary("exp2", ir.Op.EXP2)
log = _unary("log", ir.Op.LOG)
log2 = _unary("log2", ir.Op.LOG2)
cos = _unary("cos", ir.Op.COS)
sin = _unary("sin", ir.Op.SIN)
sqrt = _unary("sqrt", ir.Op.SQRT)
sqrt_rn = _unary("sqrt_rn", ir.Op.SQRT_RN, ("fp32",))
rsqrt = _unary("rsqrt", ir.Op.RSQRT)
erf = _unary("erf", ir.Op.ERF)
floor = _unary("floor", ir.Op.FLOOR)
ceil = _unary("ceil", ir.Op.CEIL)


@builtin
def abs(sem, x):
    """Elementwise absolute value (the identity on unsigned integers)."""
    x = sem.to_tensor(U(x))
    if x.dtype.is_ptr():
        raise TypeError(f"tl.abs does not apply to pointers ({x.dtype})")
    if x.dtype.is_int_unsigned():
        return x
    return sem.unary_math(ir.Op.ABS, x)


@builtin
def umulhi(sem, x, y):
    """The high half of the 2N-bit product of two N-bit integers."""
    _check_dtypes("umulhi", ("int32", "int64", "uint32", "uint64"), x, y)
    return sem.umulhi(U(x), U(y))


@builtin
def fdiv(sem, x, y, ieee_rounding=False):
    """Floating-point division; `ieee_rounding=False` allows the fast approximate kind."""
    return sem.fdiv(U(x), U(y), bool(U(ieee_rounding)))


@builtin
def div_rn(sem, x, y):
    """fp32 division rounded to nearest (IEEE)."""
    _check_dtypes("div_rn", ("fp32",), x, y)
    return sem.div_rn(U(x), U(y))


@builtin
def fma(sem, x, y, z):
    """x * y + z with a single rounding."""
    return sem.fma(U(x), U(y), U(z))


__all__ = [
    "exp", "exp2", "log", "log2", "cos", "sin", "sqrt", "sqrt_rn", "rsqrt", "erf", "floor", "ceil", "abs",
    "umulhi", "fdiv", "div_rn", "fma",
]
