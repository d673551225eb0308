"""Operators: emitted IR for arithmetic, broadcasting, pointer arithmetic, casts,
comparisons, selection and shifts; and the errors users see."""
from __future__ import annotations

import pytest
from lang_helpers import make_sem, ops

import tegula.language as tl
from tegula import ir


def _last(kernel):
    return kernel.body.instrs[-1]


def test_weak_python_literals_keep_tensor_dtype():
    sem = make_sem()[0]
    x = sem.full([8], 1.0, tl.float16)
    assert (x + 1).dtype == tl.float16 and (x * 2.5).dtype == tl.float16 and (x / 2).dtype == tl.float32
    i8 = sem.full([8], 1, tl.int8)
    assert (i8 + 1).dtype == tl.int8 and (i8 + 1.0).dtype == tl.float32 and (i8 > 1000).dtype == tl.int1
    with pytest.raises(ValueError, match="Scalar 1000 is out of range for type int8"):
        i8 + 1000
    with pytest.raises(ValueError, match="unsigned tensor and a negative scalar"):
        sem.full([8], 1, tl.uint8) + (-1)


def test_scalar_literal_typing():
    sem = make_sem()[0]
    assert sem.to_tensor(1).dtype == tl.int32 and sem.to_tensor(2 ** 31).dtype == tl.uint32
    assert sem.to_tensor(2 ** 40).dtype == tl.int64 and sem.to_tensor(2 ** 63).dtype == tl.uint64
    assert sem.to_tensor(1.0).dtype == tl.float32 and sem.to_tensor(1e300).dtype == tl.float64
    assert sem.to_tensor(True).dtype == tl.int1 and sem.to_tensor(tl.constexpr(3)).dtype == tl.int32
    with pytest.raises(ValueError, match="Nonrepresentable"):
        sem.to_tensor(2 ** 64)
    with pytest.raises(TypeError, match="cannot convert"):
        sem.to_tensor("abc")


def test_broadcasting_emits_explicit_ops():
    sem, k, _ = make_sem()
    a = sem.full([4, 1], 1.0, tl.float32)
    b = sem.full([8], 2.0, tl.float32)
    c = a + b
    assert c.type == tl.block_type(tl.float32, [4, 8]) and [int(s) for s in c.shape] == [4, 8]
    assert ops(k)[-4:] == ["broadcast", "expand_dims", "broadcast", "add"]
    exp = [ins for ins in k.walk() if ins.op == ir.Op.EXPAND_DIMS][0]
    assert exp.attrs.axis == 0
    s = sem.to_tensor(3.0)
    assert (s * c).shape == c.shape and "splat" in ops(k)


def test_incompatible_shapes_message_names_both():
    sem = make_sem()[0]
    a, b = sem.arange(0, 128), sem.arange(0, 64)
    with pytest.raises(ValueError, match=r"incompatible shapes for '\+': \(128,\) and \(64,\)"):
        a + b


def test_pointer_arithmetic():
    sem, k, v = make_sem({"p": ir.PointerType(ir.F32), "n": ir.U32})
    p, n = v["p"], v["n"]
    offs = sem.arange(0, 16)
    q = p + offs
    assert q.type == tl.block_type(tl.pointer_type(tl.float32), [16])
    assert _last(k).op == ir.Op.ADDPTR
    q2 = offs + p
    assert q2.type == q.type
    r = p + n
    # unsigned offsets are zero-extended to i64 first
    assert ops(k)[-2:] == ["cast", "addptr"] and _last(k).operands[1].type == ir.I64 and r.dtype == p.dtype
    p - 4
    assert ops(k)[-3:] == ["constant", "neg", "addptr"]
    with pytest.raises(TypeError, match="cannot add pointers"):
        p + p
    with pytest.raises(TypeError, match="invalid operands"):
        p + 1.0
    with pytest.raises(TypeError, match="invalid operands"):
        p * 2
    assert (q == q).dtype == tl.int1 and (q < q).type == tl.block_type(tl.int1, [16])


def test_division_and_modulo():
    sem, k, _ = make_sem()
    i = sem.arange(0, 8)
    q = i / 2
    assert q.dtype == tl.float32 and _last(k).op == ir.Op.FDIV and _last(k).attrs.ieee_rounding is False
    assert (i // 3).dtype == tl.int32 and _last(k).op == ir.Op.IDIV
    assert (i % 3).dtype == tl.int32 and _last(k).op == ir.Op.REM
    f = sem.full([8], 1.0, tl.float32)
    assert (f % 2.0).dtype == tl.float32
    with pytest.raises(TypeError, match="unexpected type fp32"):
        f // 2.0
    with pytest.raises(TypeError, match="different signedness"):
        i // sem.full([8], 3, tl.uint32)
    h = sem.full([8], 1.0, tl.float16)
    assert (h / h).dtype == tl.float32 and (h % h).dtype == tl.float32 and (h + h).dtype == tl.float16


def test_unary_and_bitwise():
    sem, k, _ = make_sem()
    f = sem.full([4], 1.0, tl.float32)
    assert (-f).dtype == tl.float32 and ops(k)[-2:] == ["constant", "sub"]  # 0 - x, as Triton
    i = sem.arange(0, 4)
    assert (-i).dtype == tl.int32 and _last(k).op == ir.Op.NEG
    assert (~i).dtype == tl.int32 and _last(k).op == ir.Op.NOT
    with pytest.raises(ValueError, match="unary invert"):
        ~f
    assert (i & 3).dtype == tl.int32 and (i | sem.full([4], 1, tl.int64)).dtype == tl.int64
    with pytest.raises(TypeError, match="invalid operands"):
        f & 1
    assert (i << 2).dtype == tl.int32 and _last(k).op == ir.Op.SHL
    with pytest.raises(TypeError, match=r"\*\* operator"):
        f ** 2


def test_right_shift_kind_follows_left_operand():
    sem, k, _ = make_sem()
    s = sem.full([4], -8, tl.int8)
    u = sem.full([4], 1, tl.uint32)
    r = s >> u  # promoted to uint32, but Triton shifts arithmetically because the lhs was signed
    assert r.dtype == tl.uint32
    assert ops(k)[-4:] == ["bitcast", "bitcast", "shr", "bitcast"]
    shr = [ins for ins in k.walk() if ins.op == ir.Op.SHR][-1]
    assert shr.operands[0].type.element == ir.I32
    r2 = sem.arange(0, 4) >> 1
    assert r2.dtype == tl.int32 and _last(k).op == ir.Op.SHR


def test_comparisons_and_logical():
    sem, k, _ = make_sem()
    h = sem.full([4], 1.0, tl.float16)
    c = h < 0.5  # Triton makes 0.5 an fp32 tensor first: compare in fp32
    assert c.dtype == tl.int1
    lt = _last(k)
    assert lt.op == ir.Op.LT and lt.operands[0].type.element == ir.F32
    i = sem.arange(0, 4)
    both = sem.logical_and(i > 1, i < 3)
    assert both.dtype == tl.int1 and _last(k).op == ir.Op.AND
    n = sem.not_(i)
    assert n.dtype == tl.int1
    with pytest.raises(TypeError, match="truth value"):
        bool(i)


def test_casts():
    sem, k, v = make_sem({"p": ir.PointerType(ir.F32)})
    f = sem.full([4], 1.0, tl.float32)
    h = f.to(tl.float16)
    assert h.dtype == tl.float16 and _last(k).op == ir.Op.CAST and _last(k).attrs.rounding == "rtne"
    f.to(tl.float8e5, fp_downcast_rounding="rtz")
    assert _last(k).attrs.rounding == "rtz"
    with pytest.raises(ValueError, match="only for truncating fp conversions"):
        h.to(tl.float32, fp_downcast_rounding="rtz")
    with pytest.raises(ValueError, match="Invalid rounding mode"):
        f.to(tl.float16, fp_downcast_rounding="up")
    b = f.to(tl.int1)
    assert b.dtype == tl.int1 and _last(k).op == ir.Op.NE
    assert f.to(tl.float32) is f
    bits = f.to(tl.int32, bitcast=True)
    assert bits.dtype == tl.int32 and _last(k).op == ir.Op.BITCAST
    with pytest.raises(ValueError, match="Cannot bitcast data-type of size 32 to data-type of size 16"):
        f.to(tl.int16, bitcast=True)
    p = v["p"]
    q = p.to(tl.pointer_type(tl.int8))
    assert q.dtype == tl.pointer_type(tl.int8) and _last(k).op == ir.Op.BITCAST
    assert p.to(tl.int64).dtype == tl.int64 and _last(k).op == ir.Op.PTR_TO_INT
    back = sem.to_tensor(2 ** 40).to(tl.pointer_type(tl.float32))
    assert back.dtype == tl.pointer_type(tl.float32) and _last(k).op == ir.Op.INT_TO_PTR
    with pytest.raises(TypeError, match="pointer converts to tl.int64"):
        p.to(tl.int32)


def test_where_min_max_clamp():
    sem, k, _ = make_sem()
    c = sem.arange(0, 8) < 4
    h = sem.full([8], 1.0, tl.float16)
    w = tl.where.impl(sem, c, h, 0.0)
    assert w.dtype == tl.float16 and _last(k).op == ir.Op.SELECT
    w2 = tl.where.impl(sem, c[:, None], h[None, :], 1.0)
    assert w2.type == tl.block_type(tl.float16, [8, 8])
    # tl.maximum turns Python numbers into (fp32) tensors first: no weak typing, as in Triton
    m = tl.maximum.impl(sem, h, 2.0)
    assert m.dtype == tl.float32 and _last(k).attrs.propagate_nan is False
    assert tl.maximum.impl(sem, h, h).dtype == tl.float16
    bf = sem.full([8], 1.0, tl.bfloat16)
    assert tl.minimum.impl(sem, bf, bf, tl.PropagateNan.ALL).dtype == tl.float32
    assert _last(k).attrs.propagate_nan is True
    cl = tl.clamp.impl(sem, h, h, h)
    assert cl.dtype == tl.float16 and ops(k)[-2:] == ["maximum", "minimum"]
    with pytest.raises(TypeError, match="Only floating point clamp"):
        tl.clamp.impl(sem, sem.arange(0, 8), 0, 1)
    assert tl.builtin_max.impl(sem, 3, 7).value == 7
    assert tl.builtin_min.impl(sem, h, h).dtype == tl.float16


def test_sanitize_overflow_only_in_debug():
    sem, k, _ = make_sem(debug=True)
    i = sem.arange(0, 4)
    i + i
    assert "device_assert" in ops(k)
    sem2, k2, _ = make_sem(debug=False)
    j = sem2.arange(0, 4)
    j + j
    assert "device_assert" not in ops(k2)


def test_bool_condition():
    sem, k, _ = make_sem()
    c = sem.bool_condition(sem.to_tensor(3))
    assert c.dtype == tl.int1 and _last(k).op == ir.Op.NE
    t = sem.to_tensor(True)
    assert sem.bool_condition(t) is t
    with pytest.raises(ValueError, match="condition must be a scalar"):
        sem.bool_condition(sem.arange(0, 4))
