"""Math builtins (dtype checks as in Triton), standard-library helpers, and the
debug / hint builtins."""
from __future__ import annotations

import pytest
from lang_helpers import make_sem, ops

import tegula.language as tl
from tegula import ir


def test_math_ops_and_dtype_checks():
    sem, k, _ = make_sem()
    x = sem.full([8], 1.0, tl.float32)
    for fn, op in [(tl.exp, ir.Op.EXP), (tl.exp2, ir.Op.EXP2), (tl.log, ir.Op.LOG), (tl.sqrt, ir.Op.SQRT),
                   (tl.rsqrt, ir.Op.RSQRT), (tl.erf, ir.Op.ERF), (tl.floor, ir.Op.FLOOR),
                   (tl.math.ceil, ir.Op.CEIL), (tl.sin, ir.Op.SIN), (tl.cos, ir.Op.COS),
                   (tl.sqrt_rn, ir.Op.SQRT_RN), (tl.log2, ir.Op.LOG2)]:
        assert fn.impl(sem, x).dtype == tl.float32 and k.body.instrs[-1].op == op
    assert x.exp().dtype == tl.float32 and abs(x).dtype == tl.float32
    with pytest.raises(ValueError, match=r"Expected dtype \['fp32', 'fp64'\] but got fp16"):
        tl.exp.impl(sem, sem.full([8], 1.0, tl.float16))
    with pytest.raises(ValueError, match="but got fp64"):
        tl.sqrt_rn.impl(sem, sem.full([8], 1.0, tl.float64))
    u = sem.full([8], 3, tl.uint32)
    assert tl.abs.impl(sem, u) is u
    assert tl.abs.impl(sem, sem.arange(0, 8)).dtype == tl.int32 and k.body.instrs[-1].op == ir.Op.ABS
    assert tl.umulhi.impl(sem, sem.arange(0, 8), sem.arange(0, 8)).dtype == tl.int32
    with pytest.raises(ValueError, match="Expected dtype"):
        tl.umulhi.impl(sem, sem.full([8], 1, tl.int16), 3)
    assert tl.fma.impl(sem, x, x, x).dtype == tl.float32 and k.body.instrs[-1].op == ir.Op.FMA
    h = sem.full([8], 1.0, tl.float16)
    assert tl.fdiv.impl(sem, h, h).dtype == tl.float16  # no promotion in fdiv
    tl.fdiv.impl(sem, x, x, ieee_rounding=True)
    assert k.body.instrs[-1].op == ir.Op.FDIV and k.body.instrs[-1].attrs.ieee_rounding is True
    assert tl.div_rn.impl(sem, x, x).dtype == tl.float32 and k.body.instrs[-1].op == ir.Op.DIV
    with pytest.raises(TypeError, match="both operands of fdiv"):
        tl.fdiv.impl(sem, sem.arange(0, 8), x)
    assert tl.sigmoid.impl(sem, x).dtype == tl.float32


def test_cdiv_and_swizzle():
    sem, k, v = make_sem({"n": ir.I32})
    c = tl.cdiv.impl(sem, tl.constexpr(1000), 128)
    assert isinstance(c, tl.constexpr) and c.value == 8 and tl.cdiv.impl(sem, -7, 2).value == -3
    t = tl.cdiv.impl(sem, v["n"], 128)
    assert t.dtype == tl.int32 and k.body.instrs[-1].op == ir.Op.IDIV
    i, j = tl.swizzle2d.impl(sem, 5, 3, 8, 8, 2)
    assert isinstance(i, int) and (i, j) == (5, 5)  # Python arithmetic on compile-time ints
    pi, pj = tl.swizzle2d.impl(sem, v["n"], v["n"], 64, 64, 8)
    assert pi.dtype == tl.int32 and pj.dtype == tl.int32


def test_device_print_and_assert():
    sem, k, _ = make_sem(debug=False)
    x = sem.arange(0, 8)
    tl.device_print.impl(sem, "x", x, hex=True)
    pr = k.body.instrs[-1]
    assert pr.op == ir.Op.DEVICE_PRINT and pr.attrs.prefix == " x: " and pr.attrs.hex is True
    tl.device_assert.impl(sem, x < 4, "too big")
    assert "device_assert" not in ops(k)  # only emitted in debug mode
    sem, k, _ = make_sem(debug=True)
    x = sem.arange(0, 8)
    tl.device_assert.impl(sem, x < 4, "too big", mask=x > 0)
    da = k.body.instrs[-1]
    assert da.op == ir.Op.DEVICE_ASSERT and da.attrs.message == "too big"
    assert ops(k)[-3:] == ["not", "or", "device_assert"]


def test_static_assert_and_print(capsys):
    sem = make_sem()[0]
    tl.static_print.impl(sem, "BLOCK =", tl.constexpr(128))
    assert capsys.readouterr().out == "BLOCK = 128\n"
    tl.static_assert.impl(sem, tl.constexpr(True))
    with pytest.raises(AssertionError, match="static_assert failed: BLOCK too small"):
        tl.static_assert.impl(sem, tl.constexpr(64) >= 128, "BLOCK too small")
    with pytest.raises(ValueError, match="compile time"):
        tl.static_assert.impl(sem, sem.arange(0, 4) > 0)


def test_hints_assume_barrier():
    sem, k, v = make_sem({"n": ir.I32})
    offs = sem.arange(0, 64)
    h = tl.multiple_of.impl(sem, offs, [16])
    hint = k.body.instrs[-1]
    assert hint.op == ir.Op.HINT and hint.attrs == ir.attrs.HintAttrs("multiple_of", (16,))
    assert h.handle is hint.results[0] and h.type == offs.type
    tl.max_contiguous.impl(sem, h, tl.constexpr(16))
    assert k.body.instrs[-1].attrs.kind == "max_contiguous"
    tl.multiple_of.impl(sem, v["n"], 16)
    with pytest.raises(ValueError, match="does not match the length of values"):
        tl.max_constancy.impl(sem, offs, [1, 2])
    tl.assume.impl(sem, v["n"] > 0)
    tl.debug_barrier.impl(sem)
    assert ops(k)[-3:] == ["gt", "assume", "debug_barrier"]


def test_random_builtins_types():
    sem, k, v = make_sem({"seed": ir.I32})
    offs = sem.arange(0, 16)
    r = tl.rand.impl(sem, v["seed"], offs)
    assert r.type == tl.block_type(tl.float32, [16])
    assert tl.randint.impl(sem, v["seed"], offs).dtype == tl.uint32
    assert tl.randn.impl(sem, 7, offs).dtype == tl.float32
    four = tl.randint4x.impl(sem, v["seed"], offs, n_rounds=2)
    assert len(four) == 4 and all(x.dtype == tl.uint32 for x in four)
    assert "umulhi" in ops(k)
    wide = tl.randint.impl(sem, 7, sem.cast(offs, tl.int64))
    assert wide.dtype == tl.uint32
