"""Every elementwise op over its dtypes against independent references, with fresh
random inputs, on every backend: integer ops bitwise against Python integer arithmetic
(wrapping, C division, shifts); float ops against the exact result (float64 numpy,
mpmath for math functions, Fractions for fma) — bitwise equal to the correctly rounded
value, or within the ulps `numerics_bounds` documents for that op, type and backend."""
from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np
import pytest
import torch
from interp_test_kernels import build_map_kernel
from numerics_backends import current, run
from numerics_bounds import PRECISION, assert_ulps, round_fraction, ulp_bound

from tegula.ir import attrs as A
from tegula.ir.ops import Op
from tegula.ir.types import BF16, F16, F32, F64, I1, I8, I16, I32, I64, U8, U16, U32, U64, ScalarType

INTS = [I8, I16, I32, I64, U8, U16, U32, U64]
FLOATS = [F16, BF16, F32, F64]
N = 128


def np_dtype(t: ScalarType) -> np.dtype:
    return {"bf16": np.dtype(np.uint16)}.get(t.name) or np.dtype(
        {"i1": np.bool_, "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
         "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
         "f16": np.float16, "f32": np.float32, "f64": np.float64}[t.name])


def to_bf16_bits(x32: np.ndarray) -> np.ndarray:
    return torch.from_numpy(np.ascontiguousarray(x32, np.float32)).to(torch.bfloat16).view(torch.int16) \
        .numpy().view(np.uint16)


def from_bf16_bits(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def rand_int(rng, t: ScalarType, n: int = N) -> np.ndarray:
    info = np.iinfo(np_dtype(t))
    return rng.integers(info.min, info.max, size=n, endpoint=True, dtype=np_dtype(t))


def rand_float(rng, t: ScalarType, n: int = N, positive: bool = False, scale: float = 4.0) -> np.ndarray:
    """Values of type `t` (as float64), never all zero; bf16 passed as values."""
    x = rng.standard_normal(n) * scale
    if positive:
        x = np.abs(x) + 1e-3
    if t.name == "bf16":
        return from_bf16_bits(to_bf16_bits(x.astype(np.float32))).astype(np.float64)
    return x.astype(np_dtype(t)).astype(np.float64)


def as_buffer(values: np.ndarray, t: ScalarType) -> np.ndarray:
    if t.name == "bf16":
        return to_bf16_bits(values.astype(np.float32))
    return values.astype(np_dtype(t))


def buffer_values(buf: np.ndarray, t: ScalarType) -> np.ndarray:
    if t.name == "bf16":
        return from_bf16_bits(buf).astype(np.float64)
    return buf


def round_to(x64: np.ndarray, t: ScalarType) -> np.ndarray:
    """float64 results rounded to `t` (for +-*/ the double rounding through f32 is exact)."""
    if t.name == "bf16":
        return from_bf16_bits(to_bf16_bits(x64.astype(np.float32))).astype(np.float64)
    return x64.astype(np_dtype(t)).astype(np.float64)


def run_map(op: Op, in_types, out_type, inputs, attrs=None) -> np.ndarray:
    kernel = build_map_kernel(op, in_types, out_type, attrs=attrs)
    bufs = [as_buffer(x, t) if t.is_float else x for x, t in zip(inputs, in_types)]
    out = np.zeros(N, dtype=np_dtype(out_type))
    run(kernel, (1,), *bufs, out)
    return buffer_values(out, out_type)


# ---------------------------------------------------------------- integer ops

def wrap(v: int, t: ScalarType) -> int:
    v &= (1 << t.bits) - 1
    if t.is_signed and v >= 1 << (t.bits - 1):
        v -= 1 << t.bits
    return v


def c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _shr(a: int, b: int, t: ScalarType) -> int:
    if b >= t.bits:
        return -1 if a < 0 else 0
    return a >> b  # Python's >> is arithmetic; unsigned values are non-negative


INT_REF = {
    Op.NEG: lambda a, t: wrap(-a, t),
    Op.NOT: lambda a, t: wrap(~a, t),
    Op.ABS: lambda a, t: wrap(abs(a), t),
    Op.ADD: lambda a, b, t: wrap(a + b, t),
    Op.SUB: lambda a, b, t: wrap(a - b, t),
    Op.MUL: lambda a, b, t: wrap(a * b, t),
    Op.IDIV: lambda a, b, t: wrap(c_div(a, b), t),
    Op.REM: lambda a, b, t: wrap(a - b * c_div(a, b), t),
    Op.AND: lambda a, b, t: wrap(a & b, t),
    Op.OR: lambda a, b, t: wrap(a | b, t),
    Op.XOR: lambda a, b, t: wrap(a ^ b, t),
    Op.SHL: lambda a, b, t: wrap(a << b, t) if b < t.bits else 0,
    Op.SHR: _shr,
    Op.MAXIMUM: lambda a, b, t: max(a, b),
    Op.MINIMUM: lambda a, b, t: min(a, b),
    Op.UMULHI: lambda a, b, t: wrap(((a & ((1 << t.bits) - 1)) * (b & ((1 << t.bits) - 1))) >> t.bits, t),
}
COMPARE_REF = {Op.EQ: np.equal, Op.NE: np.not_equal, Op.LT: np.less, Op.LE: np.less_equal,
               Op.GT: np.greater, Op.GE: np.greater_equal}


def int_operands(rng, op: Op, t: ScalarType, arity: int) -> list[np.ndarray]:
    xs = [rand_int(rng, t) for _ in range(arity)]
    if op in (Op.SHL, Op.SHR):
        # mostly in-range shift amounts, a few past the width
        xs[1] = rng.integers(0, t.bits + 4, size=N).astype(np_dtype(t))
    if op in (Op.IDIV, Op.REM):
        b = xs[1]
        b[b == 0] = 1
        if t.is_signed:  # MIN // -1 overflows (undefined on the GPU)
            b[(xs[0] == np.iinfo(np_dtype(t)).min) & (b == -1)] = 3
        # small divisors on half the lanes, so that quotients are not all 0 or -1
        b[: N // 2] = rng.integers(1, 20, size=N // 2).astype(np_dtype(t))
    return xs


@pytest.mark.parametrize("t", INTS, ids=str)
@pytest.mark.parametrize("op", list(INT_REF), ids=lambda o: o.value)
def test_integer_op(op: Op, t: ScalarType):
    rng = np.random.default_rng()
    arity = 1 if op in (Op.NEG, Op.NOT, Op.ABS) else 2
    xs = int_operands(rng, op, t, arity)
    got = run_map(op, [t] * arity, t, xs)
    ref = [INT_REF[op](*(int(x[i]) for x in xs), t) for i in range(N)]
    np.testing.assert_array_equal(got.astype(object), np.array(ref, dtype=object))


@pytest.mark.parametrize("t", INTS + FLOATS, ids=str)
@pytest.mark.parametrize("op", list(COMPARE_REF), ids=lambda o: o.value)
def test_comparison(op: Op, t: ScalarType):
    rng = np.random.default_rng()
    if t.is_float:
        a, b = rand_float(rng, t), rand_float(rng, t)
        b[::7] = a[::7]        # equal pairs
        a[5] = np.nan           # unordered compares: only `ne` is true
    else:
        a, b = rand_int(rng, t), rand_int(rng, t)
        b[::7] = a[::7]
    got = run_map(op, [t, t], I1, [a, b])
    np.testing.assert_array_equal(got, COMPARE_REF[op](a, b))


@pytest.mark.parametrize("t", INTS + FLOATS, ids=str)
def test_select(t: ScalarType):
    rng = np.random.default_rng()
    cond = rng.random(N) < 0.5
    a, b = (rand_float(rng, t), rand_float(rng, t)) if t.is_float else (rand_int(rng, t), rand_int(rng, t))
    got = run_map(Op.SELECT, [I1, t, t], t, [cond, a, b])
    np.testing.assert_array_equal(got, np.where(cond, a, b))


BOOL_REF = {
    Op.AND: np.logical_and, Op.OR: np.logical_or, Op.XOR: np.logical_xor,
    Op.ADD: np.logical_xor, Op.SUB: np.logical_xor, Op.MUL: np.logical_and,  # arithmetic mod 2
    Op.MAXIMUM: np.logical_or, Op.MINIMUM: np.logical_and,
}


@pytest.mark.parametrize("op", list(BOOL_REF), ids=lambda o: o.value)
def test_i1_binary_ops_are_arithmetic_mod_2(op: Op):
    rng = np.random.default_rng()
    a, b = rng.random(N) < 0.5, rng.random(N) < 0.5
    got = run_map(op, [I1, I1], I1, [a, b])
    np.testing.assert_array_equal(got, BOOL_REF[op](a, b))


@pytest.mark.parametrize("op,ref", [(Op.NOT, np.logical_not), (Op.NEG, lambda a: a)], ids=["not", "neg"])
def test_i1_unary_ops(op, ref):
    a = np.random.default_rng().random(N) < 0.5
    np.testing.assert_array_equal(run_map(op, [I1], I1, [a]), ref(a))


# ---------------------------------------------------------------- float ops

EXACT_BINARY = {Op.ADD: np.add, Op.SUB: np.subtract, Op.MUL: np.multiply, Op.DIV: np.divide,
                Op.FDIV: np.divide, Op.REM: np.fmod}


@pytest.mark.parametrize("t", FLOATS, ids=str)
@pytest.mark.parametrize("op", list(EXACT_BINARY), ids=lambda o: o.value)
def test_float_binary_op_is_correctly_rounded(op: Op, t: ScalarType):
    """Correctly rounded everywhere, except `fdiv` (ieee_rounding=False) on the GPU."""
    rng = np.random.default_rng()
    a, b = rand_float(rng, t), rand_float(rng, t)
    b[b == 0] = 1.0
    attrs = A.FDivAttrs(False) if op is Op.FDIV else None
    got = run_map(op, [t, t], t, [a, b], attrs=attrs)
    bound = ulp_bound(op.value, t.name, current())
    if bound == 0:
        # float64 results of +-*/ and fmod round to the type without double rounding
        np.testing.assert_array_equal(got, round_to(EXACT_BINARY[op](a, b), t))
    else:
        assert_ulps(got, EXACT_BINARY[op](a, b), t.name, bound, op.value)


@pytest.mark.parametrize("t", FLOATS, ids=str)
@pytest.mark.parametrize("op", [Op.MAXIMUM, Op.MINIMUM], ids=lambda o: o.value)
@pytest.mark.parametrize("propagate_nan", [False, True])
def test_float_min_max_nan_handling(op: Op, t: ScalarType, propagate_nan: bool):
    rng = np.random.default_rng()
    a, b = rand_float(rng, t), rand_float(rng, t)
    a[3], b[4], a[6], b[6] = np.nan, np.nan, np.nan, np.nan
    got = run_map(op, [t, t], t, [a, b], attrs=A.NanAttrs(propagate_nan))
    if propagate_nan:
        ref = (np.maximum if op is Op.MAXIMUM else np.minimum)(a, b)
    else:
        ref = (np.fmax if op is Op.MAXIMUM else np.fmin)(a, b)
    np.testing.assert_array_equal(got, ref)


def fma_operands(rng, t: ScalarType) -> list[np.ndarray]:
    """Random a, b, c, with the lanes that expose a second rounding: c cancelling most
    of a*b; and a*b exactly halfway between two values of the type (a = 1 + 2**-h1,
    b = 1 + 2**-h2 with h1 + h2 = p, scaled) with a c far below its last bit, so that
    the exact result lies just off the tie (rounded to float64 first, it would land on
    the tie and round to even)."""
    p = PRECISION[t.name]
    a, b, c = rand_float(rng, t), rand_float(rng, t), rand_float(rng, t)
    k = N // 4
    c[:k] = round_to(-a[:k] * b[:k], t)
    h1 = p // 2
    sa = np.exp2(rng.integers(0, 3, k).astype(np.float64)) * rng.choice([-1.0, 1.0], k)
    sb = np.exp2(rng.integers(0, 3, k).astype(np.float64))
    a[k:2 * k] = (1 + 2.0 ** -h1) * sa
    b[k:2 * k] = (1 + 2.0 ** -(p - h1)) * sb
    # below float64's last bit of a*b where the type allows (f16's smallest subnormal,
    # 2**-24, is only below float32's): a first rounding there would land on the tie
    tiny = 2.0 ** -24 if t.name == "f16" else 2.0 ** -60
    c[k:2 * k] = tiny * rng.choice([-1.0, 1.0], k)
    c[c == 0] = 2.0 ** -10
    return [a, b, c]


@pytest.mark.parametrize("t", FLOATS, ids=str)
def test_fma_rounds_once(t: ScalarType):
    rng = np.random.default_rng()
    a, b, c = fma_operands(rng, t)
    got = run_map(Op.FMA, [t, t, t], t, [a, b, c])
    exact = [Fraction(x) * Fraction(y) + Fraction(z) for x, y, z in zip(a, b, c)]
    bound = ulp_bound("fma", t.name, current())
    if bound == 0:
        np.testing.assert_array_equal(got, [round_fraction(r, t.name) for r in exact])
    else:
        assert_ulps(got, [float(r) for r in exact], t.name, bound, "fma")


# op -> (exact function of an mpmath number, positive inputs only)
MATH = {
    Op.SQRT: (mpmath.sqrt, True), Op.SQRT_RN: (mpmath.sqrt, True),
    Op.EXP: (mpmath.exp, False), Op.EXP2: (lambda v: mpmath.power(2, v), False),
    Op.LOG: (mpmath.log, True), Op.LOG2: (lambda v: mpmath.log(v, 2), True),
    Op.SIN: (mpmath.sin, False), Op.COS: (mpmath.cos, False),
    Op.RSQRT: (lambda v: 1 / mpmath.sqrt(v), True), Op.ERF: (mpmath.erf, False),
}
EXACT_UNARY = {Op.NEG: np.negative, Op.ABS: np.abs, Op.CEIL: np.ceil, Op.FLOOR: np.floor}


def exact_math(fn, x: np.ndarray) -> np.ndarray:
    """fn at each (exactly representable) input, to 100 bits, as the nearest float64."""
    with mpmath.workprec(100):
        return np.array([float(fn(mpmath.mpf(float(v)))) for v in x])


@pytest.mark.parametrize("t", FLOATS, ids=str)
@pytest.mark.parametrize("op", list(EXACT_UNARY) + list(MATH), ids=lambda o: o.value)
def test_float_unary_op(op: Op, t: ScalarType):
    positive = op in MATH and MATH[op][1]
    rng = np.random.default_rng()
    x = rand_float(rng, t, positive=positive, scale=3.0)
    if op is Op.EXP and t.name == "f16":
        x = np.clip(x, -10.0, 10.0)  # exp(11.1) overflows f16; approximations differ there
    got = run_map(op, [t], t, [x])
    exact = EXACT_UNARY[op](x) if op in EXACT_UNARY else exact_math(MATH[op][0], x)
    assert_ulps(got, exact, t.name, ulp_bound(op.value, t.name, current(), x), op.value)


def test_integer_overflow_wraps_silently():
    t = I32
    a = np.full(N, np.iinfo(np.int32).max, np.int32)
    b = np.random.default_rng().integers(1, 1000, N).astype(np.int32)
    got = run_map(Op.ADD, [t, t], t, [a, b])
    np.testing.assert_array_equal(got, (a.astype(np.int64) + b - 2 ** 32).astype(np.int32))


def test_float_division_by_zero_gives_inf_and_nan_silently():
    a = np.random.default_rng().standard_normal(N).astype(np.float32) + 5
    a[0] = 0.0
    b = np.zeros(N, np.float32)
    got = run_map(Op.DIV, [F32, F32], F32, [a, b])
    assert np.isnan(got[0]) and np.all(np.isinf(got[1:]))
