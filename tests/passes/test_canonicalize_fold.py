"""Constant folding in canonicalize: one case per elementwise op class and type class,
with expected values written out independently of the op table (C-style integer
division, wrapping, bf16/fp8 rounding, NaN handling, casts)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from tegula.ir import attrs as A
from tegula.ir.builder import Builder, new_kernel
from tegula.ir.ops import OP_INFO, Op
from tegula.ir.types import (
    BF16,
    F8E4M3,
    F8E5M2,
    F16,
    F32,
    F64,
    I1,
    I8,
    I32,
    I64,
    U8,
    U32,
    PointerType,
    TileType,
)
from tegula.ir.verifier import verify
from tegula.passes import canonicalize
from tegula.passes.ir_utils import constant_of


def fold_one(op, types, literals, attrs=None, result_type=None, shape=()):
    """Build `store %out, op(constants...)`, canonicalize, return the stored literal
    (None if it did not fold) and the result's type."""
    k = new_kernel("fold", [], [])
    b = Builder(k.body)
    if attrs is None and OP_INFO[op].attrs is not None:
        attrs = OP_INFO[op].attrs()  # the op's defaults
    vals = [b.constant(lit, TileType(shape, t) if shape else t) for lit, t in zip(literals, types)]
    rtypes = None if result_type is None else [TileType(shape, result_type) if shape else result_type]
    r = b.create(op, vals, attrs, rtypes).results[0]
    elem = r.type.element if shape else r.type
    out = k.body.add_arg(PointerType(elem), "out")
    k.arg_names.append("out")
    ptr = b.splat(out, shape) if shape else out
    b.create(Op.STORE, [ptr, r], A.StoreAttrs(), [])
    b.create(Op.RETURN, [], result_types=[])
    verify(k)
    canonicalize(k)
    verify(k)
    store = k.body.instrs[-2]
    return constant_of(store.operands[1]), store.operands[1].type


CASES = [
    # integer arithmetic wraps at the type's width
    (Op.ADD, [I32, I32], [2, 3], 5),
    (Op.ADD, [I8, I8], [127, 1], -128),
    (Op.SUB, [U8, U8], [0, 1], 255),
    (Op.MUL, [I32, I32], [65536, 65536], 0),
    (Op.MUL, [I64, I64], [1 << 40, 3], 3 << 40),
    # C-style division and remainder: truncate toward zero, sign of the dividend
    (Op.IDIV, [I32, I32], [-7, 2], -3),
    (Op.IDIV, [U32, U32], [7, 2], 3),
    (Op.REM, [I32, I32], [-7, 2], -1),
    (Op.REM, [I32, I32], [7, -2], 1),
    (Op.REM, [F32, F32], [-7.5, 2.0], -1.5),
    # bitwise and shifts
    (Op.AND, [I32, I32], [12, 10], 8),
    (Op.OR, [I32, I32], [12, 10], 14),
    (Op.XOR, [I32, I32], [12, 10], 6),
    (Op.XOR, [I1, I1], [True, True], False),
    (Op.SHL, [I32, I32], [1, 31], -(1 << 31)),
    (Op.SHL, [I32, I32], [1, 32], 0),
    (Op.SHR, [I32, I32], [-8, 1], -4),
    (Op.SHR, [U32, U32], [0x80000000, 31], 1),
    (Op.NOT, [I32], [0], -1),
    (Op.NOT, [I1], [True], False),
    (Op.NEG, [I32], [5], -5),
    (Op.NEG, [U8], [1], 255),
    (Op.ABS, [I32], [-5], 5),
    (Op.UMULHI, [I32, I32], [-1, 2], 1),
    (Op.MAXIMUM, [I32, I32], [-3, 2], 2),
    (Op.MINIMUM, [U32, U32], [3, 2], 2),
    # floats: f32 rounding, f16 overflow, narrow types rounded after the op
    (Op.ADD, [F32, F32], [0.1, 0.2], float(np.float32(0.1) + np.float32(0.2))),
    (Op.ADD, [F64, F64], [0.1, 0.2], 0.1 + 0.2),
    (Op.MUL, [F16, F16], [300.0, 300.0], math.inf),
    (Op.ADD, [BF16, BF16], [1.0, 1.0 / 512], 1.0),       # 1 + 2**-9 rounds to even in bf16
    (Op.ADD, [BF16, BF16], [1.0, 3.0 / 512], 1.0078125),  # ... and up past the half ulp
    (Op.MUL, [F8E4M3, F8E4M3], [3.0, 7.0], 20.0),         # 21: a tie between 20 and 22, to even
    (Op.SUB, [F8E5M2, F8E5M2], [0.0, 5.0], -5.0),
    (Op.DIV, [F32, F32], [1.0, 0.0], math.inf),
    (Op.DIV, [F32, F32], [1.0, 4.0], 0.25),
    (Op.FDIV, [F32, F32], [3.0, 2.0], 1.5),
    (Op.NEG, [F32], [0.0], -0.0),
    (Op.ABS, [F32], [-2.5], 2.5),
    (Op.SQRT, [F32], [2.0], float(np.sqrt(np.float32(2.0)))),
    (Op.EXP, [F32], [1.0], float(np.exp(np.float32(1.0)))),
    (Op.LOG2, [F32], [8.0], 3.0),
    (Op.FLOOR, [F32], [-1.5], -2.0),
    (Op.CEIL, [F32], [-1.5], -1.0),
    (Op.FMA, [F32, F32, F32], [2.0, 3.0, 1.0], 7.0),
    # comparisons produce i1; NaN compares unordered (ne is unordered-or-not-equal)
    (Op.LT, [I32, I32], [-1, 0], True),
    (Op.LT, [U32, U32], [0xFFFFFFFF, 0], False),
    (Op.GE, [F32, F32], [math.nan, 0.0], False),
    (Op.NE, [F32, F32], [math.nan, math.nan], True),
    (Op.EQ, [F32, F32], [-0.0, 0.0], True),
    # select with all-constant operands
    (Op.SELECT, [I1, I32, I32], [False, 1, 2], 2),
]


@pytest.mark.parametrize("op,types,literals,expected", CASES,
                         ids=[f"{c[0].value}-{c[1][0]}-{i}" for i, c in enumerate(CASES)])
def test_fold_elementwise(op, types, literals, expected):
    got, _ = fold_one(op, types, literals)
    assert got is not None, "did not fold"
    if isinstance(expected, float) and math.isnan(expected):
        assert math.isnan(got)
    else:
        assert got == expected and type(got) is type(expected)
        if isinstance(expected, float):
            assert math.copysign(1, got) == math.copysign(1, expected)


@pytest.mark.parametrize("propagate,expected", [(True, math.nan), (False, 1.0)])
def test_fold_maximum_nan_policy(propagate, expected):
    got, _ = fold_one(Op.MAXIMUM, [F32, F32], [math.nan, 1.0], attrs=A.NanAttrs(propagate))
    assert (math.isnan(got) if math.isnan(expected) else got == expected)


@pytest.mark.parametrize("src,dst,value,expected", [
    (F32, I32, -3.7, -3),           # truncation
    (F32, I8, 1000.0, 127),         # saturation
    (F32, I32, math.nan, 0),
    (I32, F32, 16777217, 16777216.0),
    (I32, I8, 300, 44),             # wrap
    (I32, I1, 2, True),
    (I1, I32, True, 1),
    (F32, BF16, 1.0 + 2.0 ** -9, 1.0),
    (F32, F8E4M3, 1000.0, 448.0),   # e4m3 saturates to its largest finite value
    (F32, F16, 70000.0, math.inf),
    (U32, I32, 0xFFFFFFFF, -1),
])
def test_fold_cast(src, dst, value, expected):
    got, t = fold_one(Op.CAST, [src], [value], attrs=A.CastAttrs(), result_type=dst)
    assert t == dst
    assert got == expected and type(got) is type(expected)


def test_integer_division_by_zero_is_not_folded():
    got, _ = fold_one(Op.IDIV, [I32, I32], [7, 0])
    assert got is None
    got, _ = fold_one(Op.REM, [I32, I32], [7, 0])
    assert got is None


def test_fold_on_tiles_gives_tile_constant():
    got, t = fold_one(Op.MUL, [I32, I32], [6, 7], shape=(4, 8))
    assert got == 42 and t == TileType((4, 8), I32)


def test_splat_and_broadcast_of_constants_fold():
    k = new_kernel("f", [PointerType(F32)], ["out"])
    b = Builder(k.body)
    c = b.constant(1.5, F32)
    s = b.splat(c, (1, 8))
    bc = b.broadcast(s, (4, 8))
    e = b.op1(Op.EXPAND_DIMS, bc, attrs=A.ExpandDimsAttrs(0))
    r = b.op1(Op.RESHAPE, e, attrs=A.ShapeAttrs((32,)))
    p = b.splat(k.args[0], (32,))
    b.create(Op.STORE, [p, r], A.StoreAttrs(), [])
    b.create(Op.RETURN, [], result_types=[])
    canonicalize(k)
    verify(k)
    stored = k.body.instrs[-2].operands[1]
    assert constant_of(stored) == 1.5 and stored.type == TileType((32,), F32)


def test_folding_chains_to_a_fixed_point():
    # ((2 + 3) * 4) < 21 as i1, through a splat: one constant remains in use
    k = new_kernel("f", [PointerType(I1)], ["out"])
    b = Builder(k.body)
    x = b.op1(Op.ADD, b.constant(2, I32), b.constant(3, I32))
    y = b.op1(Op.MUL, x, b.constant(4, I32))
    z = b.op1(Op.LT, y, b.constant(21, I32))
    b.create(Op.STORE, [k.args[0], z], A.StoreAttrs(), [])
    b.create(Op.RETURN, [], result_types=[])
    canonicalize(k)
    assert constant_of(k.body.instrs[-2].operands[1]) is True
