"""tl.load / tl.store: operands, attributes, broadcasting and Triton's checks."""
from __future__ import annotations

import pytest
from lang_helpers import make_sem, ops

import tegula.language as tl
from tegula import ir


def _kernel():
    return make_sem({"x": ir.PointerType(ir.F16), "b": ir.PointerType(ir.I1), "n": ir.I32})


def test_masked_load_with_other():
    sem, k, v = _kernel()
    offs = sem.arange(0, 64)
    mask = offs < v["n"]
    x = tl.load.impl(sem, v["x"] + offs, mask=mask, other=0.0, cache_modifier=".cg",
                     eviction_policy="evict_last")
    assert x.type == tl.block_type(tl.float16, [64])
    load = k.body.instrs[-1]
    assert load.op == ir.Op.LOAD and len(load.operands) == 3
    assert load.attrs.has_mask and load.attrs.has_other
    assert (load.attrs.cache_modifier, load.attrs.eviction_policy) == (".cg", "evict_last")
    assert load.operands[2].type == ir.TileType((64,), ir.F16)  # other cast to the element type


def test_scalar_load_and_store():
    sem, k, v = _kernel()
    x = tl.load.impl(sem, v["x"])
    assert x.dtype == tl.float16 and x.shape == ()
    tl.store.impl(sem, v["x"], 1.0)
    st = k.body.instrs[-1]
    assert st.op == ir.Op.STORE and len(st.operands) == 2 and not st.attrs.has_mask
    assert st.operands[1].type == ir.F16


def test_store_broadcasts_and_casts_value():
    sem, k, v = _kernel()
    offs = sem.arange(0, 32)[:, None] * 32 + sem.arange(0, 32)[None, :]
    ptrs = v["x"] + offs
    tl.store.impl(sem, ptrs, sem.full([32], 1.0, tl.float32), mask=offs < v["n"])
    st = k.body.instrs[-1]
    assert st.attrs.has_mask and st.operands[1].type == ir.TileType((32, 32), ir.F16)
    with pytest.raises(ValueError, match=r"incompatible shapes for 'store': \(32,\) and \(64,\)"):
        tl.store.impl(sem, v["x"] + sem.arange(0, 32), sem.full([64], 1.0, tl.float32))


def test_mask_broadcasts_pointer_like_triton():
    sem, k, v = _kernel()
    ptr = v["x"] + sem.arange(0, 16)[None, :]
    mask = sem.arange(0, 8)[:, None] < 4
    out = tl.load.impl(sem, ptr, mask=mask)
    assert out.type == tl.block_type(tl.float16, [8, 16])


def test_bool_pointers_go_through_int8():
    sem, k, v = _kernel()
    b = tl.load.impl(sem, v["b"] + sem.arange(0, 8))
    assert b.dtype == tl.int1
    assert "bitcast" in ops(k) and ops(k)[-1] == "ne"
    load = [i for i in k.walk() if i.op == ir.Op.LOAD][0]
    assert load.results[0].type == ir.TileType((8,), ir.I8)
    tl.store.impl(sem, v["b"], True)
    assert k.body.instrs[-1].operands[1].type == ir.I8


def test_load_store_errors():
    sem, k, v = _kernel()
    p = v["x"] + sem.arange(0, 8)
    with pytest.raises(ValueError, match="`other` cannot be provided without `mask`"):
        tl.load.impl(sem, p, other=0.0)
    with pytest.raises(ValueError, match="Unsupported ptr type"):
        tl.load.impl(sem, v["n"])
    with pytest.raises(ValueError, match="Cache modifier .xx not supported"):
        tl.load.impl(sem, p, cache_modifier=".xx")
    with pytest.raises(ValueError, match="Eviction policy"):
        tl.store.impl(sem, p, 0.0, eviction_policy="never")
    with pytest.raises(ValueError, match="boundary_check"):
        tl.load.impl(sem, p, boundary_check=(0,))
    with pytest.raises(ValueError, match="Mask must have boolean scalar type"):
        tl.load.impl(sem, p, mask=sem.arange(0, 8))
    with pytest.raises(ValueError, match="Value argument cannot be block type"):
        tl.store.impl(sem, v["x"], sem.full([8], 1.0, tl.float16))
    const = sem.tensor(v["x"].handle, tl.pointer_type(tl.float16, const=True))
    with pytest.raises(ValueError, match="constant pointer"):
        tl.store.impl(sem, const, 1.0)
