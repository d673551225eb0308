"""Every elementwise op over its dtypes against independent references, with fresh
random inputs: integer ops against Python integer arithmetic (wrapping, C division,
shifts), float ops against float64 numpy rounded to the type."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from interp_test_kernels import build_map_kernel, run

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
    rng = np.random.default_rng()
    a, b = rand_float(rng, t), rand_float(rng, t)
    b[b == 0] = 1.0
    attrs = A.FDivAttrs(False) if op is Op.FDIV else None
    got = run_map(op, [t, t], t, [a, b], attrs=attrs)
    np.testing.assert_array_equal(got, round_to(EXACT_BINARY[op](a, b), t))


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


@pytest.mark.parametrize("t", FLOATS, ids=str)
def test_fma_rounds_once(t: ScalarType):
    rng = np.random.default_rng()
    a, b, c = rand_float(rng, t), rand_float(rng, t), rand_float(rng, t)
    got = run_map(Op.FMA, [t, t, t], t, [a, b, c])
    if t.name == "f64":
        ref = a * b + c  # float64 reference cannot be exact here; allow an ulp
        np.testing.assert_allclose(got, ref, rtol=4e-16, atol=1e-300)
    else:
        # a*b + c in float64 is exact for f16/bf16 inputs and within double-rounding-safe
        # precision for f32, so rounding it once is the fused result.
        np.testing.assert_array_equal(got, round_to(a * b + c, t) if t.name != "bf16"
                                      else _bf16_from_f64(a * b + c))


def _bf16_from_f64(x: np.ndarray) -> np.ndarray:
    """Single rounding float64 → bf16 (nearest even) with Python fractions, no f32 hop."""
    from fractions import Fraction
    out = []
    for v in x:
        if v == 0 or not math.isfinite(v):
            out.append(v)
            continue
        e = math.frexp(abs(v))[1] - 1          # v = m * 2**e with 1 <= m < 2
        q = Fraction(abs(v)) / Fraction(2) ** (e - 7)  # 8 significant bits
        n = math.floor(q)
        rem = q - n
        if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2 == 1):
            n += 1
        out.append(math.copysign(float(n * Fraction(2) ** (e - 7)), v))
    return np.array(out)


UNARY = {
    Op.NEG: (np.negative, False, 0), Op.ABS: (np.abs, False, 0),
    Op.CEIL: (np.ceil, False, 0), Op.FLOOR: (np.floor, False, 0),
    Op.SQRT: (np.sqrt, True, 0), Op.SQRT_RN: (np.sqrt, True, 0),
    Op.EXP: (np.exp, False, 2), Op.EXP2: (np.exp2, False, 2), Op.LOG: (np.log, True, 2),
    Op.LOG2: (np.log2, True, 2), Op.SIN: (np.sin, False, 2), Op.COS: (np.cos, False, 2),
    Op.RSQRT: (lambda x: 1 / np.sqrt(x), True, 2), Op.ERF: (np.vectorize(math.erf), False, 2),
}
ULP = {"f16": 2.0 ** -10, "bf16": 2.0 ** -7, "f32": 2.0 ** -23, "f64": 2.0 ** -52}


@pytest.mark.parametrize("t", FLOATS, ids=str)
@pytest.mark.parametrize("op", list(UNARY), ids=lambda o: o.value)
def test_float_unary_op(op: Op, t: ScalarType):
    fn, positive, ulps = UNARY[op]
    rng = np.random.default_rng()
    x = rand_float(rng, t, positive=positive, scale=3.0)
    got = run_map(op, [t], t, [x])
    ref = fn(x)
    if ulps == 0 or op in (Op.SQRT, Op.SQRT_RN):
        np.testing.assert_array_equal(got, round_to(ref, t))
    else:
        # math functions: within a couple of ulps of the type (inputs are exact in it)
        np.testing.assert_allclose(got, ref, rtol=ULP[t.name] * 2 + 1e-15, atol=ULP[t.name] * 1e-3)


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
