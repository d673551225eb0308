"""tl.atomic_*: operands, attributes, broadcasting, the float max/min split, and Triton
3.6's type checks."""
from __future__ import annotations

import pytest
from lang_helpers import make_sem

import tegula.language as tl
from tegula import ir
from tegula.ir.verifier import verify as verify_kernel


def _kernel():
    return make_sem({"f32": ir.PointerType(ir.F32), "f16": ir.PointerType(ir.F16), "i32": ir.PointerType(ir.I32),
                     "u64": ir.PointerType(ir.U64), "i16": ir.PointerType(ir.I16), "f64": ir.PointerType(ir.F64),
                     "n": ir.I32})


def verify(k):
    k.body.instrs.append(ir.Instr(ir.Op.RETURN, [], []))
    verify_kernel(k)


def _atomics(k):
    return [i for i in k.walk() if i.op in (ir.Op.ATOMIC_RMW, ir.Op.ATOMIC_CAS)]


def test_add_broadcasts_casts_and_masks():
    sem, k, v = _kernel()
    offs = sem.arange(0, 64)
    old = tl.atomic_add.impl(sem, v["f32"] + offs, 1, mask=offs < v["n"], sem="relaxed", scope="cta")
    assert old.type == tl.block_type(tl.float32, [64])
    (a,) = _atomics(k)
    assert a.attrs == ir.attrs.AtomicAttrs(kind="fadd", has_mask=True, sem="relaxed", scope="cta")
    assert a.operands[1].type == ir.TileType((64,), ir.F32)
    tl.atomic_add.impl(sem, v["i32"], 3)  # scalar pointer, no mask: integer add, default sem/scope
    b = _atomics(k)[-1]
    assert b.attrs == ir.attrs.AtomicAttrs(kind="add") and b.results[0].type == ir.I32
    verify(k)


@pytest.mark.parametrize("fn, kind", [(tl.atomic_and, "and"), (tl.atomic_or, "or"), (tl.atomic_xor, "xor"),
                                      (tl.atomic_xchg, "xchg"), (tl.atomic_max, "max"), (tl.atomic_min, "min")])
def test_integer_kinds(fn, kind):
    sem, k, v = _kernel()
    fn.impl(sem, v["u64"] + sem.arange(0, 16), 7)
    (a,) = _atomics(k)
    assert a.attrs.kind == kind and a.operands[1].type == ir.TileType((16,), ir.U64)
    verify(k)


@pytest.mark.parametrize("fn, pos_kind, neg_kind", [(tl.atomic_max, "max", "min"), (tl.atomic_min, "min", "max")])
def test_float_max_min_split_into_signed_and_unsigned(fn, pos_kind, neg_kind):
    sem, k, v = _kernel()
    offs = sem.arange(0, 32)
    old = fn.impl(sem, v["f64"] + offs, sem.full([32], -1.5, tl.float64), mask=offs < v["n"])
    assert old.type == tl.block_type(tl.float64, [32])
    pos, neg = _atomics(k)
    assert (pos.attrs.kind, pos.operands[1].type.element) == (pos_kind, ir.I64)
    assert (neg.attrs.kind, neg.operands[1].type.element) == (neg_kind, ir.U64)
    assert pos.attrs.has_mask and neg.attrs.has_mask
    verify(k)


def test_cas():
    sem, k, v = _kernel()
    old = tl.atomic_cas.impl(sem, v["i32"], 0, 1, sem="acquire")
    (a,) = _atomics(k)
    assert old.dtype == tl.int32 and a.attrs == ir.attrs.AtomicCasAttrs(sem="acquire", scope="gpu")
    tl.atomic_cas.impl(sem, v["f16"] + sem.arange(0, 8), 0.0, 1.0)  # 16-bit elements are allowed
    verify(k)


def test_tensor_methods():
    sem, k, v = _kernel()
    p = v["i32"] + sem.arange(0, 8)
    p.atomic_add(1)
    p.atomic_cas(0, 1)
    assert [a.op for a in _atomics(k)] == [ir.Op.ATOMIC_RMW, ir.Op.ATOMIC_CAS]


def test_triton_type_checks():
    sem, k, v = _kernel()
    with pytest.raises(ValueError, match="atomic_max does not support fp16"):
        tl.atomic_max.impl(sem, v["f16"], 1.0)
    with pytest.raises(ValueError, match="atomic_add does not support int16"):
        tl.atomic_add.impl(sem, v["i16"], 1)
    with pytest.raises(ValueError, match="atomic_and does not support fp32"):
        tl.atomic_and.impl(sem, v["f32"], 1.0)
    with pytest.raises(ValueError, match="Memory semantic seq_cst not supported"):
        tl.atomic_add.impl(sem, v["f32"], 1.0, sem="seq_cst")
    with pytest.raises(ValueError, match="Memory scope block not supported"):
        tl.atomic_add.impl(sem, v["f32"], 1.0, scope="block")
    with pytest.raises(ValueError, match="Pointer argument of tl.atomic_add"):
        tl.atomic_add.impl(sem, v["n"], 1)
    with pytest.raises(ValueError, match="Mask must have boolean"):
        tl.atomic_add.impl(sem, v["f32"] + sem.arange(0, 8), 1.0, mask=sem.arange(0, 8))
    with pytest.raises(ValueError, match="must be scalars"):
        tl.atomic_add.impl(sem, v["f32"], sem.full([8], 1.0, tl.float32))
    with pytest.raises(ValueError, match="atomic_cas only supports elements with width"):
        tl.atomic_cas.impl(sem, v["f32"].to(tl.pointer_type(tl.int8)), 0, 1)
