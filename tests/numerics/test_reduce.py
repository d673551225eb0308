"""Reductions and scans: every axis, fast paths and the generic region evaluation,
argmax/argmin ties, non-commutative combine functions, integer wrapping.

Integer results, max/min and order-preserving combines are exact on every backend.
Float sums depend on the summation order (numpy's, or the GPU's in-thread, shuffle-
tree and cross-warp order): they are held to `numerics_bounds.sum_bound`."""
from __future__ import annotations

import numpy as np
import pytest
from interp_test_kernels import combine_region, load, ptrs, row_major_offsets, store, tile
from numerics_backends import is_compiled, run
from numerics_bounds import assert_within, sum_bound

from tegula.ir import attrs as A
from tegula.ir.builder import Builder, new_kernel
from tegula.ir.ops import Op
from tegula.ir.types import F16, F32, I32, I64, PointerType, ScalarType
from tegula.ir.verifier import verify

SHAPE = (4, 8, 16)
NP = {"f16": np.float16, "f32": np.float32, "i32": np.int32, "i64": np.int64}


def binary(op: Op, attrs=None):
    return lambda b, a: [b.op1(op, a[0], a[1], attrs=attrs)]


def build_reduction(kind: Op, elem: ScalarType, shape, axis: int, body, reverse: bool = False):
    """out = reduce/scan(x, axis) with the combine `body`, x and out row-major."""
    out_shape = tuple(d for i, d in enumerate(shape) if i != axis) if kind is Op.REDUCE else tuple(shape)
    k = new_kernel(kind.value, [PointerType(elem), PointerType(elem)], ["x_ptr", "out_ptr"])
    x, out = k.args
    b = Builder(k.body)
    xv = load(b, ptrs(b, x, row_major_offsets(b, shape)))
    attrs = A.ReduceAttrs(axis) if kind is Op.REDUCE else A.ScanAttrs(axis, reverse)
    r = b.create(kind, [xv], attrs, regions=[combine_region([elem], body)]).result
    if out_shape:
        store(b, ptrs(b, out, row_major_offsets(b, out_shape)), r)
    else:
        store(b, out, r)
    b.create(Op.RETURN, [])
    verify(k)
    return k, out_shape


def reduce_np(kind, elem, x, axis, body, reverse=False):
    k, out_shape = build_reduction(kind, elem, x.shape, axis, body, reverse)
    out = np.zeros(out_shape or (1,), x.dtype)
    run(k, (1,), x, out)
    return out.reshape(out_shape)


def rand(elem: ScalarType, shape=SHAPE):
    rng = np.random.default_rng()
    if elem.is_int:
        info = np.iinfo(NP[elem.name])
        return rng.integers(info.min, info.max, size=shape, endpoint=True).astype(NP[elem.name])
    return rng.standard_normal(shape).astype(NP[elem.name])


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_sum_f32_every_axis(axis):
    x = rand(F32)
    got = reduce_np(Op.REDUCE, F32, x, axis, binary(Op.ADD))
    x64 = x.astype(np.float64)  # sums of these few f32 values are exact in float64
    assert_within(got, x64.sum(axis), sum_bound(x.shape[axis], np.abs(x64).sum(axis), "f32"), "sum")


@pytest.mark.parametrize("elem", [I32, I64], ids=str)
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_integer_sum_wraps(elem, axis):
    x = rand(elem)  # full-range values: sums overflow
    got = reduce_np(Op.REDUCE, elem, x, axis, binary(Op.ADD))
    ref = x.astype(object).sum(axis)
    bits = elem.bits
    wrapped = [((int(v) + 2 ** (bits - 1)) % 2 ** bits) - 2 ** (bits - 1) for v in ref.ravel()]
    np.testing.assert_array_equal(got.ravel().astype(object), np.array(wrapped, dtype=object))


@pytest.mark.parametrize("op,ref", [(Op.MAXIMUM, np.fmax), (Op.MINIMUM, np.fmin)], ids=["max", "min"])
@pytest.mark.parametrize("axis", [0, 2])
def test_max_min_ignore_nan_by_default(op, ref, axis):
    x = rand(F32)
    x[1, 2, 3] = np.nan
    got = reduce_np(Op.REDUCE, F32, x, axis, binary(op, A.NanAttrs(False)))
    np.testing.assert_array_equal(got, ref.reduce(x, axis=axis))
    got_nan = reduce_np(Op.REDUCE, F32, x, axis, binary(op, A.NanAttrs(True)))
    ref_nan = np.maximum if op is Op.MAXIMUM else np.minimum
    np.testing.assert_array_equal(got_nan, ref_nan.reduce(x, axis=axis))


@pytest.mark.parametrize("op,ref", [(Op.XOR, np.bitwise_xor), (Op.AND, np.bitwise_and),
                                    (Op.OR, np.bitwise_or), (Op.MUL, np.multiply)],
                         ids=["xor", "and", "or", "mul"])
def test_integer_bitwise_and_product_reductions(op, ref):
    x = rand(I32)
    got = reduce_np(Op.REDUCE, I32, x, 1, binary(op))
    np.testing.assert_array_equal(got, ref.reduce(x, axis=1, dtype=np.int32))


def test_f16_sum_rounds_every_combine():
    """Each combine is an f16 add, rounded to f16: the interpreter's generic tree
    pairs adjacent elements level by level; any order stays within the f16 bound."""
    x = rand(F16, (64,))
    got = reduce_np(Op.REDUCE, F16, x, 0, binary(Op.ADD))
    x64 = x.astype(np.float64)
    assert_within(got, x64.sum(), sum_bound(64, np.abs(x64).sum(), "f16"), "f16 sum")
    if is_compiled():
        return
    level = x
    while level.size > 1:  # adjacent pairs, rounded to f16 at every level
        level = (level[0::2].astype(np.float32) + level[1::2]).astype(np.float16)
    assert got == level[0]


@pytest.mark.backends("interpreter", reason="tl.reduce's contract (Triton 3.6's too, triton-lang/triton#4962) is "
                      "an associative and commutative combine: the CUDA backend, like Triton's, pairs partial "
                      "results of different lanes and warps in butterfly order; the interpreter keeps operand order")
def test_non_commutative_region_keeps_operand_order():
    """combine(a, b) = b picks the last element; = a the first: only order-preserving
    pairing gives these."""
    x = rand(I32, (8, 32))
    last = reduce_np(Op.REDUCE, I32, x, 1, lambda b, a: [a[1]])
    first = reduce_np(Op.REDUCE, I32, x, 0, lambda b, a: [a[0]])
    np.testing.assert_array_equal(last, x[:, -1])
    np.testing.assert_array_equal(first, x[0])
    # associative but not commutative: "b if b != 0 else a" keeps the last non-zero
    y = np.where(np.random.default_rng().random((8, 32)) < 0.3, x, 0).astype(np.int32)

    def last_nonzero(b, a):
        nz = b.op1(Op.NE, a[1], b.constant(0, I32))
        return [b.op1(Op.SELECT, nz, a[1], a[0])]
    got = reduce_np(Op.REDUCE, I32, y, 1, last_nonzero)
    ref = [row[row != 0][-1] if (row != 0).any() else 0 for row in y]
    np.testing.assert_array_equal(got, ref)


def argmax_body(ties_lowest=True):
    """Triton's argmax combine on (value, index): larger value, ties → smaller index."""
    def body(b, a):
        v1, i1, v2, i2 = a
        gt = b.op1(Op.GT, v1, v2)
        eq = b.op1(Op.EQ, v1, v2)
        lt_idx = b.op1(Op.LT, i1, i2)
        pick1 = b.op1(Op.OR, gt, b.op1(Op.AND, eq, lt_idx))
        return [b.op1(Op.SELECT, pick1, v1, v2), b.op1(Op.SELECT, pick1, i1, i2)]
    return body


@pytest.mark.parametrize("axis", [0, 1])
def test_argmax_with_ties_picks_the_first_index(axis):
    shape = (16, 32)
    rng = np.random.default_rng()
    x = rng.integers(0, 4, shape).astype(np.float32)  # many ties
    k = new_kernel("argmax", [PointerType(F32), PointerType(I32)], ["x_ptr", "out_ptr"])
    xp, out = k.args
    b = Builder(k.body)
    xv = load(b, ptrs(b, xp, row_major_offsets(b, shape)))
    iota = b.op1(Op.ARANGE, attrs=A.RangeAttrs(0, shape[axis]))
    idx = b.broadcast(b.op1(Op.EXPAND_DIMS, iota, attrs=A.ExpandDimsAttrs(1 - axis)), shape)
    _, best = b.create(Op.REDUCE, [xv, idx], A.ReduceAttrs(axis),
                       regions=[combine_region([F32, I32], argmax_body())]).results
    n_out = shape[1 - axis]
    store(b, ptrs(b, out, b.op1(Op.ARANGE, attrs=A.RangeAttrs(0, n_out))), best)
    b.create(Op.RETURN, [])
    verify(k)
    res = np.zeros(n_out, np.int32)
    run(k, (1,), x, res)
    np.testing.assert_array_equal(res, np.argmax(x, axis=axis))


def test_reduce_of_rank_1_gives_a_scalar():
    x = rand(F32, (128,))
    got = reduce_np(Op.REDUCE, F32, x, 0, binary(Op.ADD))
    x64 = x.astype(np.float64)
    assert got.shape == ()
    assert_within(got, x64.sum(), sum_bound(128, np.abs(x64).sum(), "f32"), "sum")


# ---------------------------------------------------------------- scans

@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumsum_i32_wraps_every_axis(axis, reverse):
    x = rand(I32)
    got = reduce_np(Op.SCAN, I32, x, axis, binary(Op.ADD), reverse)
    xs = np.flip(x, axis) if reverse else x
    ref = np.cumsum(xs.astype(np.int64), axis=axis).astype(np.int32)  # wraps modulo 2**32
    np.testing.assert_array_equal(got, np.flip(ref, axis) if reverse else ref)


@pytest.mark.parametrize("op,ref", [(Op.MAXIMUM, np.fmax), (Op.MINIMUM, np.fmin)], ids=["max", "min"])
def test_cummax_cummin(op, ref):
    x = rand(F32)
    got = reduce_np(Op.SCAN, F32, x, 2, binary(op, A.NanAttrs(False)))
    np.testing.assert_array_equal(got, ref.accumulate(x, axis=2))


@pytest.mark.parametrize("reverse", [False, True])
def test_generic_scan_matches_sequential_for_exact_ops(reverse):
    """A region the fast path does not recognise (a + b + 0 in i32) runs Hillis–Steele."""
    x = rand(I32, (8, 64))

    def body(b, a):
        s = b.op1(Op.ADD, a[0], a[1])
        return [b.op1(Op.ADD, s, b.constant(0, I32))]
    got = reduce_np(Op.SCAN, I32, x, 1, body, reverse)
    xs = np.flip(x, 1) if reverse else x
    ref = np.cumsum(xs.astype(np.int64), axis=1).astype(np.int32)
    np.testing.assert_array_equal(got, np.flip(ref, 1) if reverse else ref)


def test_generic_scan_keeps_operand_order():
    """Scan with combine(a, b) = b if b != 0 else a: forward-fill of the last non-zero."""
    rng = np.random.default_rng()
    x = np.where(rng.random((4, 32)) < 0.3, rng.integers(1, 100, (4, 32)), 0).astype(np.int32)

    def last_nonzero(b, a):
        return [b.op1(Op.SELECT, b.op1(Op.NE, a[1], b.constant(0, I32)), a[1], a[0])]
    got = reduce_np(Op.SCAN, I32, x, 1, last_nonzero)
    ref = x.copy()
    for j in range(1, 32):
        ref[:, j] = np.where(x[:, j] != 0, x[:, j], ref[:, j - 1])
    np.testing.assert_array_equal(got, ref)


def test_two_operand_scan():
    """Running (max, count of elements seen) pairs."""
    shape = (64,)
    rng = np.random.default_rng()
    x = rng.standard_normal(shape).astype(np.float32)
    k = new_kernel("scan2", [PointerType(F32), PointerType(F32), PointerType(I32)], ["x", "m", "c"])
    xp, mp, cp = k.args
    b = Builder(k.body)
    offs = b.op1(Op.ARANGE, attrs=A.RangeAttrs(0, 64))
    xv = load(b, ptrs(b, xp, offs))
    ones = b.constant(1, tile(I32, 64))

    def body(rb, a):
        return [rb.op1(Op.MAXIMUM, a[0], a[2], attrs=A.NanAttrs()), rb.op1(Op.ADD, a[1], a[3])]
    m, c = b.create(Op.SCAN, [xv, ones], A.ScanAttrs(0), regions=[combine_region([F32, I32], body)]).results
    store(b, ptrs(b, mp, offs), m)
    store(b, ptrs(b, cp, offs), c)
    b.create(Op.RETURN, [])
    verify(k)
    m_out, c_out = np.zeros(64, np.float32), np.zeros(64, np.int32)
    run(k, (1,), x, m_out, c_out)
    np.testing.assert_array_equal(m_out, np.maximum.accumulate(x))
    np.testing.assert_array_equal(c_out, np.arange(1, 65))
