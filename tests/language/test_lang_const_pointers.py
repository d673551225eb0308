"""`tl.const` pointers (Triton 3.6): a parameter annotated `tl.const`, or a pointer cast
to `tl.pointer_type(..., const=True)`, is read-only. Stores and atomics through it are
compile errors at the user's line; the constness is part of the type, so it survives
pointer arithmetic, loops and branches, and merging a const with a non-const pointer
under a runtime condition (an `if`, a conditional expression, a function's returns) is
a type mismatch, while a constexpr condition picks one side and is fine."""
# ruff: noqa: F821  (the kernels below are compiled by tegula, never run as Python)
from __future__ import annotations

import inspect

import numpy as np
import pytest

import tegula as triton
import tegula.language as tl
from tegula.compiler import ASTSource
from tegula.ir.types import F32, PointerType, TileType, parse_type
from tegula.runtime.triton_specialization import specialize_impl


def _line_of(fn, marker: str) -> int:
    lines, first = inspect.getsourcelines(fn.fn)
    return first + next(i for i, text in enumerate(lines) if marker in text)


def _compile_error(fn, *args, **kwargs) -> triton.CompilationError:
    with pytest.raises(triton.CompilationError) as info:
        fn[(1,)](*args, **kwargs)
    return info.value


# ---------------------------------------------------------------- the type


def test_const_pointer_type_text_and_equality():
    t = PointerType(F32, const=True)
    assert str(t) == "ptr<f32, const>" and t != PointerType(F32)
    for text in ("ptr<f32, const>", "ptr<f16, 3, const>", "tile<8xptr<f32, const>>", "ptr<ptr<i8, const>>"):
        assert str(parse_type(text)) == text
    assert parse_type("tile<8xptr<f32, const>>") == TileType((8,), t)
    assert tl.pointer_type(tl.float32, const=True).to_ir() == t
    assert str(tl.pointer_type(tl.float32, const=True)) == "const_pointer<fp32>"


def test_const_parameters_get_the_k_signature_type():
    assert specialize_impl(np.zeros(4, np.float32), is_const=True)[0] == "*kfp32"
    assert specialize_impl(np.zeros(4, np.float32))[0] == "*fp32"


@triton.jit
def _copy(in_ptr: tl.const, out, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(in_ptr + offs, mask=offs < n), mask=offs < n)


def test_reading_through_a_const_pointer(host_backend):
    x = np.random.rand(32).astype(np.float32)
    y = np.zeros_like(x)
    h = _copy[(1,)](x, y, 32, BLOCK=32)
    np.testing.assert_array_equal(y, x)
    assert h.metadata.signature["in_ptr"] == "*kfp32" and h.metadata.signature["out"] == "*fp32"
    assert "%in_ptr: ptr<f32, const>" in h.asm["tir"] and "%out: ptr<f32>" in h.asm["tir"]


def test_const_is_part_of_the_compiled_source():
    # ahead of time, `*k` in a signature makes the parameter const
    src = ASTSource(_copy, {"in_ptr": "*kfp32", "out": "*fp32", "n": "i32"}, {"BLOCK": 16})
    assert "%in_ptr: ptr<f32, const>" in triton.compile(src).asm["tir"]


# ---------------------------------------------------------------- writes are rejected


@triton.jit
def _store_to_const(in_ptr: tl.const, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(in_ptr + offs, 1.0)  # E


@triton.jit
def _atomic_to_const(in_ptr: tl.const):
    tl.atomic_add(in_ptr, 1.0)  # E


@triton.jit
def _store_to_carried_const(in_ptr: tl.const, n, BLOCK: tl.constexpr):
    p = in_ptr
    for i in range(n):
        p += BLOCK
    tl.store(p + tl.arange(0, BLOCK), 1.0)  # E


@triton.jit
def _store_to_cast_const(out, BLOCK: tl.constexpr):
    c = out.to(tl.pointer_type(tl.float32, const=True))
    tl.store(c + tl.arange(0, BLOCK), 1.0)  # E


@pytest.mark.parametrize("kernel, args", [
    (_store_to_const, (16,)), (_atomic_to_const, ()), (_store_to_carried_const, (2, 16)),
    (_store_to_cast_const, (16,)),
], ids=["store", "atomic", "loop-carried", "cast"])
def test_writing_through_a_const_pointer_is_a_located_error(host_backend, kernel, args):
    x = np.zeros(64, np.float32)
    err = _compile_error(kernel, x, *args)
    assert err.error_message == "Cannot store to a constant pointer"
    assert err.loc.line == _line_of(kernel, "# E")
    assert str(err).split("\n")[0].endswith("error: Cannot store to a constant pointer")


@triton.jit
def _cast_away_const(in_ptr: tl.const, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    w = in_ptr.to(tl.pointer_type(tl.float32))
    tl.store(w + offs, tl.load(in_ptr + offs) * 2)


def test_a_cast_to_a_plain_pointer_may_write(host_backend):
    x = np.arange(16, dtype=np.float32)
    _cast_away_const[(1,)](x, 16)
    np.testing.assert_array_equal(x, np.arange(16, dtype=np.float32) * 2)


# ---------------------------------------------------------------- merging const and non-const


@triton.jit
def _pick(a, b, choose_b):
    if choose_b:
        return b
    else:
        return a


@triton.jit
def _merge_if(in_ptr: tl.const, out, c_in: tl.const, choose):
    if choose:  # E
        p = c_in
    else:
        p = out
    tl.store(out, tl.load(p))


@triton.jit
def _merge_ternary(in_ptr: tl.const, out, c_in: tl.const, choose):
    p = c_in if choose else out  # E
    tl.store(out, tl.load(p))


@triton.jit
def _merge_call(in_ptr: tl.const, out, c_in: tl.const, choose):
    p = _pick(out, c_in, choose)  # E
    tl.store(out, tl.load(p))


@pytest.mark.parametrize("kernel, message", [
    (_merge_if, "Mismatched type for p: ptr<f32, const> in the then-branch but ptr<f32> in the else-branch"),
    (_merge_ternary, "Ternary expression with dynamic condition has inconsistent types ptr<f32, const> and "
                     "ptr<f32>"),
    (_merge_call, "Inconsistent return types: '_pick' returns ptr<f32, const> on one path and ptr<f32> on "
                  "another"),
], ids=["if", "ternary", "call"])
def test_merging_const_and_plain_pointers_is_a_type_mismatch(host_backend, kernel, message):
    x = np.zeros(4, np.float32)
    err = _compile_error(kernel, x, x, x, 3)
    assert err.error_message.startswith(message)
    assert _line_of(kernel, "# E") in [err.loc.line] + [site.loc.line for site in err.call_chain]


@triton.jit
def _merge_static(in_ptr: tl.const, out, c_in: tl.const, CHOOSE: tl.constexpr):
    p = c_in if CHOOSE else in_ptr
    if CHOOSE:
        q = c_in
    else:
        q = in_ptr
    r = _pick(in_ptr, c_in, CHOOSE)
    offs = tl.arange(0, 8)
    tl.store(out + offs, tl.load(p + offs) + tl.load(q + offs) + tl.load(r + offs))


@triton.jit
def _merge_const_const(in_ptr: tl.const, out, c_in: tl.const, choose, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    p = tl.where(choose > 0, in_ptr, c_in)
    q = c_in if choose > 0 else in_ptr
    tl.store(out + offs, tl.load(p + offs) + tl.load(q + offs))


def test_constexpr_choices_and_const_with_const_merges_are_fine(host_backend):
    x, c = np.arange(8, dtype=np.float32), np.full(8, 10, np.float32)
    out = np.zeros(8, np.float32)
    _merge_static[(1,)](x, out, c, True)
    np.testing.assert_array_equal(out, 3 * c)
    _merge_const_const[(1,)](x, out, c, 1, 8)
    np.testing.assert_array_equal(out, x + c)


# ---------------------------------------------------------------- block pointers and descriptors


@triton.jit
def _sum_blocks(in_ptr: tl.const, out, n, BLOCK: tl.constexpr):
    bp = tl.make_block_ptr(in_ptr, (BLOCK * 4,), (1,), (0,), (BLOCK,), (0,))
    acc = tl.zeros([BLOCK], tl.float32)
    for i in range(n):
        acc += tl.load(bp)
        bp = tl.advance(bp, (BLOCK,))
    desc = tl.make_tensor_descriptor(in_ptr, [4, BLOCK], [BLOCK, 1], [1, BLOCK])
    acc += tl.reshape(desc.load([3, 0]), [BLOCK])
    tl.store(out + tl.arange(0, BLOCK), acc)


def test_block_pointers_and_descriptors_over_a_const_base(host_backend):
    # As in Triton, they are ordinary (non-const) block pointers and descriptors.
    x = np.random.rand(64).astype(np.float32)
    out = np.zeros(16, np.float32)
    _sum_blocks[(1,)](x, out, 3, 16)
    blocks = x.reshape(4, 16)
    np.testing.assert_allclose(out, blocks[0] + blocks[1] + blocks[2] + blocks[3], rtol=1e-6)
