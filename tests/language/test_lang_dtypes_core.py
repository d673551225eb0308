"""dtypes, constexpr, the Builtin mechanism and the loop iterator classes."""
from __future__ import annotations

import inspect

import pytest

import tegula.language as tl
from tegula import ir
from tegula.errors import TegulaError
from tegula.language import dtypes


def test_dtype_names_and_predicates():
    assert str(tl.float32) == "fp32" and repr(tl.float16) == "triton.language.float16"
    assert str(tl.bfloat16) == "bf16" and str(tl.float8e4nv) == "fp8e4nv" and str(tl.float8e5) == "fp8e5"
    assert tl.int1.is_bool() and tl.int1.is_int_unsigned() and tl.int1.is_int()
    assert tl.int8.is_int_signed() and not tl.uint8.is_int_signed()
    assert tl.float16.is_fp16() and tl.bfloat16.is_bf16() and tl.float8e5.is_fp8()
    assert tl.float32.is_floating() and not tl.float32.is_int()
    assert tl.float16.fp_mantissa_width == 10 and tl.float32.primitive_bitwidth == 32
    assert tl.int64.int_bitwidth == 64 and tl.uint16.primitive_bitwidth == 16
    assert tl.float32.scalar is tl.float32 and not tl.float32.is_ptr() and not tl.float32.is_block()
    assert tl.int8.get_int_max_value() == 127 and tl.uint8.get_int_min_value() == 0


def test_dtype_equality_hash_and_constexpr():
    assert tl.dtype("fp32") == tl.float32 and hash(tl.dtype("fp32")) == hash(tl.float32)
    assert tl.float32 == tl.constexpr(tl.float32)
    assert {tl.float32: 1}[tl.dtype("fp32")] == 1
    assert tl.float32 != tl.float16 and tl.int32 != tl.uint32


def test_pointer_and_block_types():
    p = tl.pointer_type(tl.float16)
    assert p.element_ty == tl.float16 and p.is_ptr() and p.address_space == 1 and str(p) == "pointer<fp16>"
    assert p == tl.pointer_type(tl.float16) and p != tl.pointer_type(tl.float32)
    b = tl.block_type(tl.float32, [16, 8])
    assert b.shape == (16, 8) and b.scalar == tl.float32 and b.element_ty == tl.float32 and b.numel == 128
    assert b.is_block() and b.with_element_ty(tl.int1) == tl.block_type(tl.int1, [16, 8])
    with pytest.raises(ValueError, match="power of 2"):
        tl.block_type(tl.float32, [12])
    with pytest.raises(TypeError):
        tl.pointer_type(3)


def test_to_ir_and_from_ir_round_trip():
    cases = {
        tl.int1: ir.I1, tl.int8: ir.I8, tl.uint32: ir.U32, tl.float8e4nv: ir.F8E4M3, tl.float8e5: ir.F8E5M2,
        tl.bfloat16: ir.BF16, tl.float64: ir.F64,
    }
    for t, it in cases.items():
        assert t.to_ir() == it and dtypes.from_ir(it) == t
    p = tl.pointer_type(tl.int8)
    assert p.to_ir() == ir.PointerType(ir.I8) and dtypes.from_ir(p.to_ir()) == p
    b = tl.block_type(tl.pointer_type(tl.float32), [4, 2])
    assert b.to_ir() == ir.TileType((4, 2), ir.PointerType(ir.F32)) and dtypes.from_ir(b.to_ir()) == b
    assert tl.float8e4b15.to_ir() == ir.ScalarType("f8e4b15") and dtypes.from_ir(ir.ScalarType("f8e4b15")) == \
        tl.float8e4b15
    with pytest.raises(TypeError, match="fp8e4b8"):
        tl.float8e4b8.to_ir()


def test_str_to_ty_signatures():
    assert tl.str_to_ty("*fp32") == tl.pointer_type(tl.float32)
    assert tl.str_to_ty("i1") == tl.int1 and tl.str_to_ty("u64") == tl.uint64
    assert tl.str_to_ty("bf16") == tl.bfloat16
    k = tl.str_to_ty("*ki8")
    assert k.is_const() and k.element_ty == tl.int8


def test_constexpr_python_semantics():
    c = tl.constexpr(7)
    assert (c // 2).value == 3 and (c % -2).value == -1 and (-7 // tl.constexpr(2)).value == -4
    assert isinstance(c + 1, tl.constexpr) and (1 + c).value == 8 and (c * c).value == 49
    assert (c == 7).value is True and bool(c > 3) and not bool(c < 3)
    assert (c << 1).value == 14 and (~c).value == -8 and (c ** 2).value == 49
    assert int(c) == 7 and [0, 1, 2, 3, 4, 5, 6, 7][c] == 7 and repr(c) == "constexpr[7]"
    assert hash(c) == hash(7) and tl.constexpr(tl.constexpr(3)).value == 3
    assert tl.constexpr(len)([1, 2]) == 2
    assert tl.unwrap_constexpr([tl.constexpr(1), (tl.constexpr(2), 3)]) == [1, (2, 3)]
    assert tl.constexpr(tl.float32).is_floating()


def test_builtin_mechanism():
    assert isinstance(tl.load, tl.Builtin) and tl.load.__name__ == "load"
    params = list(inspect.signature(tl.load).parameters)
    assert params[:3] == ["pointer", "mask", "other"] and "sem" not in params
    assert inspect.signature(tl.dot).parameters["out_dtype"].default == tl.float32
    assert inspect.signature(tl.sum).parameters["keep_dims"].default is False
    assert tl.is_builtin(tl.exp) and tl.math.exp is tl.exp
    with pytest.raises(TegulaError, match=r"tl\.arange can only be called inside a @jit function"):
        tl.arange(0, 16)

    @tl.builtin
    def twice(sem, x, factor=2):
        """doc"""
        return x * factor

    assert twice.impl(None, 3) == 6 and twice.__doc__ == "doc"
    assert list(inspect.signature(twice).parameters) == ["x", "factor"]


def test_iterators():
    r = tl.static_range(4)
    assert (r.start, r.end, r.step) == (0, 4, 1) and r.values() == [0, 1, 2, 3]
    r = tl.static_range(tl.constexpr(2), 10, tl.constexpr(3))
    assert r.values() == [2, 5, 8]
    with pytest.raises(RuntimeError):
        iter(r)
    rr = tl.range(1, 10, 2, num_stages=3, loop_unroll_factor=2, flatten=True)
    assert (rr.start, rr.end, rr.step) == (1, 10, 2)
    assert (rr.num_stages, rr.loop_unroll_factor, rr.flatten) == (3, 2, True)
    assert tl.range(tl.constexpr(5)).end == 5 and tl.range(5).start == 0
    assert tl.condition(True, disable_licm=True).disable_licm
    assert tl.PropagateNan.ALL != tl.PropagateNan.NONE
