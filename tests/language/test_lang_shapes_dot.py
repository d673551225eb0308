"""Tile creation, shape operations and tl.dot."""
from __future__ import annotations

import pytest
from lang_helpers import make_sem, ops

import tegula.language as tl
from tegula import ir


def test_arange_and_errors():
    sem, k, _ = make_sem()
    a = tl.arange.impl(sem, 0, tl.constexpr(128))
    assert a.type == tl.block_type(tl.int32, [128]) and k.body.instrs[-1].attrs == ir.attrs.RangeAttrs(0, 128)
    assert len(a.shape) == 1 and isinstance(a.shape[0], tl.constexpr) and a.numel.value == 128
    with pytest.raises(ValueError, match="arange's range must be a power of 2, got 100"):
        tl.arange.impl(sem, 0, 100)
    with pytest.raises(ValueError, match="end argument must be greater"):
        tl.arange.impl(sem, 8, 8)
    with pytest.raises(ValueError, match="fit in int32"):
        tl.arange.impl(sem, 0, 2 ** 33)


def test_full_zeros():
    sem, k, _ = make_sem()
    z = tl.zeros.impl(sem, (16, 32), tl.float16)
    assert z.type == tl.block_type(tl.float16, [16, 32])
    c = k.body.instrs[-1]
    assert c.op == ir.Op.CONSTANT and c.attrs.value == 0.0
    assert c.results[0].type == ir.TileType((16, 32), ir.F16)
    f = tl.full.impl(sem, [8], -1, tl.uint8)
    assert f.dtype == tl.uint8 and k.body.instrs[-1].attrs.value == 255
    assert tl.full.impl(sem, (), 3, tl.int64).shape == ()
    s = tl.full.impl(sem, [4], sem.to_tensor(2.5), tl.float32)
    assert ops(k)[-2:] == ["constant", "splat"] and s.type.shape == (4,)
    assert tl.zeros_like.impl(sem, z).type == z.type
    with pytest.raises(ValueError, match="Shape element 0 must be a power of 2, got 12"):
        tl.zeros.impl(sem, (12,), tl.float32)


def test_reshape_permute_trans_expand():
    sem, k, _ = make_sem()
    x = sem.full([4, 8], 1.0, tl.float32)
    r = tl.reshape.impl(sem, x, 32)
    assert r.type.shape == (32,) and k.body.instrs[-1].attrs == ir.attrs.ShapeAttrs((32,), False)
    r2 = x.reshape((8, 4), can_reorder=True)
    assert k.body.instrs[-1].attrs.can_reorder is True and r2.type.shape == (8, 4)
    with pytest.raises(ValueError, match="cannot change total number of elements"):
        tl.reshape.impl(sem, x, 16)
    with pytest.raises(ValueError, match="must be a power of 2"):
        tl.reshape.impl(sem, x, (1, 32, 1, 1, 3))
    t = x.T
    assert t.type.shape == (8, 4) and k.body.instrs[-1].attrs.order == (1, 0)
    p = tl.permute.impl(sem, sem.full([2, 4, 8], 0, tl.int8), 2, 0, 1)
    assert p.type.shape == (8, 2, 4)
    with pytest.raises(ValueError, match="permutation"):
        tl.permute.impl(sem, x, (0, 0))
    e = tl.expand_dims.impl(sem, x, (0, -1))
    assert e.type.shape == (1, 4, 8, 1)
    assert x[None, :, None].type.shape == (1, 4, 1, 8)
    with pytest.raises(ValueError, match="unsupported tensor index"):
        x[0]
    b = tl.broadcast_to.impl(sem, sem.full([1, 8], 1.0, tl.float32), 4, 8)
    assert b.type.shape == (4, 8) and k.body.instrs[-1].op == ir.Op.BROADCAST
    with pytest.raises(ValueError, match="Cannot broadcast"):
        tl.broadcast_to.impl(sem, x, (8, 8))
    assert tl.ravel.impl(sem, x).type.shape == (32,)


def test_join_split_cat_item():
    sem, k, _ = make_sem()
    a = sem.full([4, 8], 1.0, tl.float32)
    j = tl.join.impl(sem, a, a)
    assert j.type.shape == (4, 8, 2) and k.body.instrs[-1].op == ir.Op.JOIN
    lo, hi = tl.split.impl(sem, j)
    assert lo.type.shape == (4, 8) and hi.type.shape == (4, 8)
    s0, s1 = tl.split.impl(sem, tl.join.impl(sem, sem.to_tensor(1.0), sem.to_tensor(2.0)))
    assert s0.shape == () and s1.shape == ()
    with pytest.raises(ValueError, match="last dimension is 2"):
        tl.split.impl(sem, a)
    c = tl.cat.impl(sem, sem.arange(0, 8), sem.arange(0, 8), can_reorder=True)
    assert c.type.shape == (16,)
    with pytest.raises(ValueError, match="can_reorder=True"):
        tl.cat.impl(sem, sem.arange(0, 8), sem.arange(0, 8))
    one = tl.full.impl(sem, [1, 1], 7, tl.int32)
    assert one.item().shape == () and one.item().dtype == tl.int32
    inter = tl.interleave.impl(sem, a, a)
    assert inter.type.shape == (4, 16)


@pytest.mark.parametrize("a,out,expected", [
    (tl.float16, tl.float32, tl.float32), (tl.float16, tl.float16, tl.float16),
    (tl.bfloat16, tl.float32, tl.float32), (tl.float32, tl.float32, tl.float32),
    (tl.int8, tl.float32, tl.int32), (tl.float8e5, tl.float32, tl.float32),
    (tl.float64, tl.float32, tl.float64),
])
def test_dot_result_dtypes(a, out, expected):
    sem, k, _ = make_sem()
    x, y = sem.full([16, 32], 0, a), sem.full([32, 64], 0, a)
    d = tl.dot.impl(sem, x, y, out_dtype=out)
    assert d.type == tl.block_type(expected, [16, 64])
    dot = k.body.instrs[-1]
    assert dot.op == ir.Op.DOT and dot.operands[2].type == ir.TileType((16, 64), expected.to_ir())


def test_dot_options_and_errors():
    sem, k, _ = make_sem()
    x, y = sem.full([16, 16], 0.0, tl.float32), sem.full([16, 16], 0.0, tl.float32)
    tl.dot.impl(sem, x, y)
    assert k.body.instrs[-1].attrs.input_precision == "tf32"
    tl.dot.impl(sem, x, y, allow_tf32=False)
    assert k.body.instrs[-1].attrs.input_precision == "ieee"
    acc = sem.full([16, 16], 0.0, tl.float32)
    r = tl.dot.impl(sem, x, y, acc, input_precision="tf32x3")
    assert k.body.instrs[-1].operands[2] is acc.handle and r.dtype == tl.float32
    b = tl.dot.impl(sem, sem.full([2, 16, 16], 0.0, tl.float16), sem.full([2, 16, 32], 0.0, tl.float16))
    assert b.type.shape == (2, 16, 32)
    h4 = sem.full([2, 2, 16, 16], 0.0, tl.float16)
    four = tl.dot.impl(sem, h4, h4)
    assert four.type.shape == (2, 2, 16, 16)
    small = tl.dot.impl(sem, sem.full([1, 16], 0.0, tl.float16), sem.full([16, 1], 0.0, tl.float16))
    assert small.type.shape == (1, 1)  # Triton 3.6 only bounds K
    # small K, as Triton's interpreter allows (the GPU computes such dots on FMAs)
    assert tl.dot.impl(sem, sem.full([16, 8], 0.0, tl.float16), sem.full([8, 16], 0.0, tl.float16)).type.shape \
        == (16, 16)
    assert tl.dot.impl(sem, sem.full([16, 16], 0, tl.int8), sem.full([16, 16], 0, tl.int8)).dtype == tl.int32
    with pytest.raises(TypeError, match="same dtype"):
        tl.dot.impl(sem, x, sem.full([16, 16], 0.0, tl.float16))
    with pytest.raises(ValueError, match="incompatible shapes"):
        tl.dot.impl(sem, x, sem.full([32, 16], 0.0, tl.float32))
    with pytest.raises(ValueError, match="out_dtype=bfloat16 is unsupported"):
        h = sem.full([16, 16], 0, tl.float16)
        tl.dot.impl(sem, h, h, out_dtype=tl.bfloat16)
    with pytest.raises(TypeError, match="accumulator has dtype fp16"):
        tl.dot.impl(sem, x, y, sem.full([16, 16], 0.0, tl.float16))
    with pytest.raises(ValueError, match="Only one of input_precision and allow_tf32"):
        tl.dot.impl(sem, x, y, input_precision="ieee", allow_tf32=True)
