"""Reductions and scans: result dtypes (Triton 3.6 rules), combine regions, axis
handling, and user combine functions through the frontend's call_function hook."""
from __future__ import annotations

import pytest
from lang_helpers import make_sem, ops

import tegula.language as tl
from tegula import ir


class FakeJit:
    """Stands in for a @jit function: the stub call_function just runs its Python body."""

    _tegula_jit = True

    def __init__(self, fn):
        self.fn = fn


def call_function(fn, args):
    return fn.fn(*args)


def _reduce_instr(k):
    return [i for i in k.walk() if i.op in (ir.Op.REDUCE, ir.Op.SCAN)][-1]


@pytest.mark.parametrize("dtype,expected", [
    (tl.int8, tl.int32), (tl.int16, tl.int32), (tl.uint8, tl.uint32), (tl.int1, tl.uint32),
    (tl.int64, tl.int64), (tl.float16, tl.float16), (tl.bfloat16, tl.bfloat16), (tl.float32, tl.float32),
])
def test_sum_dtype(dtype, expected):
    sem, k, _ = make_sem()
    x = sem.full([16, 8], 0, dtype)
    s = tl.sum.impl(sem, x, 1)
    assert s.dtype == expected and s.type.shape == (16,)
    region = _reduce_instr(k).regions[0]
    assert [str(a.type) for a in region.args] == [str(expected.to_ir())] * 2
    assert [i.op for i in region.instrs] == [ir.Op.ADD, ir.Op.YIELD]
    assert tl.sum.impl(sem, x, 0, dtype=tl.float32).dtype == tl.float32


@pytest.mark.parametrize("dtype,expected", [
    (tl.float16, tl.float32), (tl.bfloat16, tl.float32), (tl.int8, tl.int32), (tl.uint8, tl.int32),
    (tl.float32, tl.float32), (tl.int64, tl.int64), (tl.uint32, tl.uint32),
])
def test_max_min_dtype(dtype, expected):
    sem, k, _ = make_sem()
    x = sem.full([32], 0, dtype)
    assert tl.max.impl(sem, x, 0).dtype == expected
    region = _reduce_instr(k).regions[0]
    assert region.instrs[0].op == ir.Op.MAXIMUM and region.instrs[0].attrs.propagate_nan is False
    assert tl.min.impl(sem, x).dtype == expected


def test_axis_none_flattens_and_keep_dims():
    sem, k, _ = make_sem()
    x = sem.full([4, 8], 1.0, tl.float32)
    s = tl.sum.impl(sem, x)
    assert s.shape == () and "reshape" in ops(k)
    assert [i for i in k.walk() if i.op == ir.Op.RESHAPE][0].attrs.can_reorder is True
    kd = tl.sum.impl(sem, x, None, keep_dims=True)
    assert kd.type.shape == (1, 1)
    kd1 = tl.max.impl(sem, x, 1, keep_dims=True)
    assert kd1.type.shape == (4, 1)
    neg = tl.sum.impl(sem, x, -1)
    assert neg.type.shape == (4,) and _reduce_instr(k).attrs.axis == 1
    with pytest.raises(ValueError, match="invalid axis 2"):
        tl.sum.impl(sem, x, 2)


def test_argmax_region_and_indices():
    sem, k, _ = make_sem()
    x = sem.full([4, 16], 0.0, tl.float16)
    idx = tl.argmax.impl(sem, x, 1)
    assert idx.dtype == tl.int32 and idx.type.shape == (4,)
    red = _reduce_instr(k)
    assert len(red.operands) == 2 and red.operands[1].type == ir.TileType((4, 16), ir.I32)
    body = [i.op.value for i in red.regions[0].instrs]
    assert body == ["gt", "eq", "lt", "and", "or", "select", "select", "yield"]
    v, i = tl.max.impl(sem, x, 0, return_indices=True)
    assert v.dtype == tl.float16 and i.dtype == tl.int32 and v.type.shape == (16,)
    tl.argmin.impl(sem, x, 0, tie_break_left=False)
    assert [i.op.value for i in _reduce_instr(k).regions[0].instrs] == ["lt", "select", "select", "yield"]
    flat = tl.argmax.impl(sem, x, None)
    assert flat.shape == ()


def test_user_combine_fn_through_call_function():
    sem, k, _ = make_sem(call_function=call_function)
    x = sem.full([8, 8], 1.0, tl.float32)

    def mul(a, b):
        return a * b

    r = tl.reduce.impl(sem, x, 0, FakeJit(mul))
    assert r.type.shape == (8,)
    assert [i.op for i in _reduce_instr(k).regions[0].instrs] == [ir.Op.MUL, ir.Op.YIELD]

    def pair(a0, a1, b0, b1):
        return a0 + b0, tl.maximum.impl(sem, a1, b1)

    y = sem.arange(0, 8)[None, :] + sem.full([8, 8], 0, tl.int32)
    s, m = tl.reduce.impl(sem, (x, y), 1, FakeJit(pair))
    assert s.dtype == tl.float32 and m.dtype == tl.int32
    r2 = tl.reduce.impl(sem, x, 1, tl.maximum)  # a builtin as combine_fn
    assert r2.type.shape == (8,)

    def bad(a, b):
        return (a + b).to(tl.float16)

    with pytest.raises(TypeError, match="returned fp16 for result 0, expected fp32"):
        tl.reduce.impl(sem, x, 0, FakeJit(bad))


def test_scans():
    sem, k, _ = make_sem(call_function=call_function)
    x = sem.full([16], 1, tl.int8)
    c = tl.cumsum.impl(sem, x, 0)
    assert c.dtype == tl.int32 and c.type.shape == (16,)
    scan = _reduce_instr(k)
    assert scan.op == ir.Op.SCAN and scan.attrs.reverse is False
    tl.cumprod.impl(sem, sem.full([16], 1.0, tl.bfloat16), 0, reverse=True)
    scan = _reduce_instr(k)
    assert scan.attrs.reverse is True and scan.operands[0].type.element == ir.F32
    s = tl.associative_scan.impl(sem, x, 0, FakeJit(lambda a, b: a ^ b))
    assert s.dtype == tl.int8


def test_xor_sum_and_reduce_or():
    sem, k, _ = make_sem()
    x = sem.full([16], 1, tl.uint16)
    assert tl.xor_sum.impl(sem, x, 0).dtype == tl.uint16
    assert tl.reduce_or.impl(sem, x, 0).dtype == tl.uint16
    with pytest.raises(TypeError, match="xor_sum only supported for integers"):
        tl.xor_sum.impl(sem, sem.full([16], 1.0, tl.float32), 0)


def test_softmax_and_tensor_methods():
    sem, k, _ = make_sem()
    x = sem.full([16], 1.0, tl.float32)
    y = tl.softmax.impl(sem, x)
    assert y.type == tl.block_type(tl.float32, [16])
    assert x.sum().shape == () and x.max(0).dtype == tl.float32 and x.argmax(0).dtype == tl.int32
    assert x.cumsum(0).shape == x.shape
