"""Loads and stores: masks, `other`, views with odd strides, typed buffers, bounds and
alignment errors (message content), overlapping stores, pointer/integer round trips.

Bounds errors: the interpreter checks every access and stops at the first failing
program, naming all its bad offsets; the CUDA backends check in checked (debug) mode,
where every program runs and the first failure recorded (by an atomic) is reported."""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from interp_test_kernels import SRC, build_vector_add, load, loc, ptrs, store, tile
from numerics_backends import is_compiled, run

from tegula.errors import KernelArgumentError, KernelRuntimeError, OutOfBoundsError
from tegula.ir import attrs as A
from tegula.ir.builder import Builder, new_kernel
from tegula.ir.ops import Op
from tegula.ir.types import BF16, F32, I1, I32, I64, PointerType
from tegula.ir.verifier import verify


def cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


@pytest.mark.parametrize("n,block", [(1000, 128), (1, 64), (4097, 1024)])
def test_vector_add_with_masks(n, block):
    rng = np.random.default_rng()
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    out = np.zeros(n, np.float32)
    run(build_vector_add(block), (cdiv(n, block),), x, y, out, n)
    np.testing.assert_array_equal(out, x + y)


def test_vector_add_bf16_buffers_of_any_16_bit_dtype():
    rng = np.random.default_rng()
    n = 300
    xt = torch.from_numpy(rng.standard_normal(n).astype(np.float32)).to(torch.bfloat16)
    yt = torch.from_numpy(rng.standard_normal(n).astype(np.float32)).to(torch.bfloat16)
    x = xt.view(torch.int16).numpy()                      # int16
    y = yt.view(torch.int16).numpy().view(np.uint16)      # uint16
    out = np.zeros(n, np.int16)
    run(build_vector_add(128, BF16), (3,), x, y, out, n)
    np.testing.assert_array_equal(out, (xt + yt).view(torch.int16).numpy())


def _strided_copy_kernel():
    """out[i] = x[i * stride] for i < n."""
    k = new_kernel("strided", [PointerType(F32), PointerType(F32), I32, I32],
                   ["x_ptr", "out_ptr", "stride", "n"])
    x, out, stride, n = k.args
    b = Builder(k.body)
    b.loc = loc(40)
    offs = b.op1(Op.ARANGE, attrs=A.RangeAttrs(0, 64))
    mask = b.op1(Op.LT, offs, b.splat(n, (64,)))
    src = b.op1(Op.MUL, offs, b.splat(stride, (64,)))
    store(b, ptrs(b, out, offs), load(b, ptrs(b, x, src), mask), mask)
    b.create(Op.RETURN, [])
    verify(k)
    return k


@pytest.mark.parametrize("step", [2, -1, -3])
def test_non_contiguous_and_negative_stride_views(step):
    base = np.random.default_rng().standard_normal(200).astype(np.float32)
    view = base[::step]
    n = min(view.size, 64)
    out = np.zeros(64, np.float32)
    run(_strided_copy_kernel(), (1,), view, out, view.strides[0] // 4, n)
    np.testing.assert_array_equal(out[:n], view[:n])


def test_masked_lanes_read_zero_or_other():
    k = new_kernel("other", [PointerType(F32), PointerType(F32), PointerType(F32), I32],
                   ["x_ptr", "o1", "o2", "n"])
    x, o1, o2, n = k.args
    b = Builder(k.body)
    offs = b.op1(Op.ARANGE, attrs=A.RangeAttrs(0, 128))
    mask = b.op1(Op.LT, offs, b.splat(n, (128,)))
    store(b, ptrs(b, o1, offs), load(b, ptrs(b, x, offs), mask))
    other = b.constant(-7.5, tile(F32, 128))
    store(b, ptrs(b, o2, offs), load(b, ptrs(b, x, offs), mask, other))
    b.create(Op.RETURN, [])
    verify(k)
    x_arr = np.random.default_rng().standard_normal(100).astype(np.float32)
    r1, r2 = np.full(128, 9.0, np.float32), np.full(128, 9.0, np.float32)
    run(k, (1,), x_arr, r1, r2, 100)
    np.testing.assert_array_equal(r1, np.concatenate([x_arr, np.zeros(28, np.float32)]))
    np.testing.assert_array_equal(r2, np.concatenate([x_arr, np.full(28, -7.5, np.float32)]))


# ---------------------------------------------------------------- out-of-bounds errors

def reported_offset(err: Exception) -> int:
    """The element offset a compiled backend's checked mode reports."""
    return int(re.search(r"element offset (-?\d+)", str(err)).group(1))


def test_out_of_bounds_load_names_pointer_offsets_size_pid_and_line():
    n_real = 1000
    x = np.random.default_rng().standard_normal(n_real).astype(np.float32)
    y = np.ones(2048, np.float32)
    out = np.zeros(2048, np.float32)
    with pytest.raises(OutOfBoundsError) as info:
        # n is larger than x: programs 7.. (elements 896..) read past x's end
        run(build_vector_add(128), (16,), x, y, out, 2048, debug=is_compiled())
    err = info.value
    text = str(err)
    assert err.loc.file == SRC and err.loc.line == 5
    assert "load" in text and "'x_ptr'" in text
    if is_compiled():
        # programs 7..15 all fail; whichever recorded first is reported
        assert err.pid[1:] == (0, 0) and 7 <= err.pid[0] < 16
        offset = reported_offset(err)
        assert n_real <= offset < 2048 and offset // 128 == err.pid[0]
        np.testing.assert_array_equal(out[:896], x[:896] + 1)  # the good programs ran
        return
    assert err.pid == (7, 0, 0)
    assert "1000 elements" in text
    assert "[1000, 1001, 1002, 1003, 1004, 1005, 1006, 1007, ...]" in text
    assert "24 of 128" in text
    assert "(7, 0, 0)" in text and f"{SRC}:5:" in text
    assert "first at tile index (104,)" in text
    # programs before the faulty one ran; nothing after it did
    np.testing.assert_array_equal(out[:896], x[:896] + 1)
    assert not out[1024:].any()


def test_out_of_bounds_store_names_the_output_argument():
    x = np.random.default_rng().standard_normal(256).astype(np.float32)
    out = np.zeros(200, np.float32)
    with pytest.raises(OutOfBoundsError) as info:
        run(build_vector_add(128), (2,), x, x, out, 256, debug=is_compiled())
    text = str(info.value)
    assert info.value.pid == (1, 0, 0) and info.value.loc.line == 7
    assert "store" in text and "'out_ptr'" in text
    if is_compiled():
        assert 200 <= reported_offset(info.value) < 256
        return
    assert "200 elements" in text
    assert "[200, 201" in text and "56 of 128" in text


def test_negative_offsets_are_out_of_bounds():
    view = np.random.default_rng().standard_normal(64).astype(np.float32)
    out = np.zeros(64, np.float32)
    with pytest.raises(OutOfBoundsError) as info:
        run(_strided_copy_kernel(), (1,), view, out, -1, 64, debug=is_compiled())
    if is_compiled():
        assert -63 <= reported_offset(info.value) <= -1
        return
    assert "[-1, -2, -3" in str(info.value) and "63 of 64" in str(info.value)


def test_masked_off_lanes_are_never_checked():
    x = np.random.default_rng().standard_normal(10).astype(np.float32)
    out = np.zeros(10, np.float32)
    run(build_vector_add(1024), (1,), x, x, out, 10, debug=True)
    np.testing.assert_array_equal(out, 2 * x)


@pytest.mark.backends("interpreter", reason="misalignment is the interpreter's diagnosis; on the GPU it is a "
                      "sticky 'misaligned address' error that would poison the context for every later test")
def test_misaligned_access_is_a_clear_error():
    """A f32 pointer moved by 2 bytes through ptr_to_int / int_to_ptr."""
    k = new_kernel("misaligned", [PointerType(F32), PointerType(F32)], ["x_ptr", "out_ptr"])
    x, out = k.args
    b = Builder(k.body)
    b.loc = loc(50)
    addr = b.op1(Op.PTR_TO_INT, x, type=I64)
    bad = b.op1(Op.INT_TO_PTR, b.op1(Op.ADD, addr, b.constant(2, I64)), type=PointerType(F32))
    offs = b.op1(Op.ARANGE, attrs=A.RangeAttrs(0, 16))
    b.loc = loc(51)
    store(b, ptrs(b, out, offs), load(b, ptrs(b, bad, offs)))
    b.create(Op.RETURN, [])
    verify(k)
    with pytest.raises(KernelRuntimeError) as info:
        run(k, (1,), np.zeros(32, np.float32), np.zeros(16, np.float32))
    assert not isinstance(info.value, OutOfBoundsError)
    assert "misaligned load" in str(info.value) and "'x_ptr'" in str(info.value)
    assert info.value.loc.line == 51


def test_ptr_to_int_round_trip_and_alignment_is_real():
    k = new_kernel("addr", [PointerType(F32), PointerType(I64), PointerType(F32)],
                   ["x_ptr", "a_ptr", "out_ptr"])
    x, a, out = k.args
    b = Builder(k.body)
    offs = b.op1(Op.ARANGE, attrs=A.RangeAttrs(0, 8))
    xp = ptrs(b, x, offs)
    ints = b.op1(Op.PTR_TO_INT, xp, type=tile(I64, 8))
    store(b, ptrs(b, a, offs), ints)
    back = b.op1(Op.INT_TO_PTR, ints, type=tile(PointerType(F32), 8))
    store(b, ptrs(b, out, offs), load(b, back))
    b.create(Op.RETURN, [])
    verify(k)
    base = np.random.default_rng().standard_normal(40).astype(np.float32)
    x_arr = base[3:]  # 12 bytes into an aligned allocation: address % 16 == 12 (mod 16 of base)
    addrs, out_arr = np.zeros(8, np.int64), np.zeros(8, np.float32)
    run(k, (1,), x_arr, addrs, out_arr)
    np.testing.assert_array_equal(out_arr, x_arr[:8])
    np.testing.assert_array_equal(np.diff(addrs), 4)
    assert addrs[0] % 16 == x_arr.ctypes.data % 16


def test_overlapping_stores_last_writer_in_flat_order_wins():
    k = new_kernel("overlap", [PointerType(I32), PointerType(I32)], ["v_ptr", "out_ptr"])
    v, out = k.args
    b = Builder(k.body)
    offs = b.op1(Op.ARANGE, attrs=A.RangeAttrs(0, 64))
    vals = load(b, ptrs(b, v, offs))
    # lanes 4j..4j+3 all store to out[15 - j]: decreasing addresses, duplicates
    group = b.op1(Op.IDIV, offs, b.splat(b.constant(4, I32), (64,)))
    dst = b.op1(Op.SUB, b.splat(b.constant(15, I32), (64,)), group)
    store(b, ptrs(b, out, dst), vals)
    b.create(Op.RETURN, [])
    verify(k)
    vals_arr = np.random.default_rng().integers(-1000, 1000, 64).astype(np.int32)
    res = np.zeros(16, np.int32)
    run(k, (1,), vals_arr, res)
    if is_compiled():
        # the four stores to one address come from different threads: one of them wins
        groups = vals_arr.reshape(16, 4)[::-1]
        assert all(r in g for r, g in zip(res, groups))
        return
    np.testing.assert_array_equal(res, vals_arr[3::4][::-1])


@pytest.mark.backends("interpreter", reason="a read-only numpy array is an argument check of the interpreter; "
                      "GPU memory has no such flag")
def test_store_to_read_only_array_is_an_error():
    x = np.random.default_rng().standard_normal(128).astype(np.float32)
    out = np.zeros(128, np.float32)
    out.flags.writeable = False
    with pytest.raises(KernelRuntimeError, match="read-only"):
        run(build_vector_add(128), (1,), x, x, out, 128)


def test_select_between_pointers_into_different_buffers():
    k = new_kernel("pick", [PointerType(F32), PointerType(F32), PointerType(F32)],
                   ["a_ptr", "b_ptr", "out_ptr"])
    a, bb, out = k.args
    b = Builder(k.body)
    offs = b.op1(Op.ARANGE, attrs=A.RangeAttrs(0, 32))
    ones = b.splat(b.constant(1, I32), (32,))
    odd = b.op1(Op.EQ, b.op1(Op.AND, offs, ones), ones)
    p = b.op1(Op.SELECT, odd, ptrs(b, a, offs), ptrs(b, bb, offs))
    store(b, ptrs(b, out, offs), load(b, p))
    # and store through the mixed pointer tile: odd lanes into a, even into b
    store(b, p, b.constant(0.5, tile(F32, 32)))
    b.create(Op.RETURN, [])
    verify(k)
    rng = np.random.default_rng()
    a_arr, b_arr = rng.standard_normal(32).astype(np.float32), rng.standard_normal(32).astype(np.float32)
    res = np.zeros(32, np.float32)
    expected = np.where(np.arange(32) % 2 == 1, a_arr, b_arr)
    run(k, (1,), a_arr, b_arr, res)
    np.testing.assert_array_equal(res, expected)
    assert np.all(a_arr[1::2] == 0.5) and np.all(b_arr[0::2] == 0.5)
    assert np.all(a_arr[0::2] != 0.5)


@pytest.mark.backends("interpreter", reason="argument checks of the interpreter's `execute`; the CUDA launcher "
                      "takes integers as raw device addresses (Triton's convention)")
def test_pointer_argument_must_be_an_array():
    with pytest.raises(KernelArgumentError, match="x_ptr"):
        run(build_vector_add(128), (1,), 5, np.zeros(4, np.float32), np.zeros(4, np.float32), 4)
    with pytest.raises(KernelArgumentError, match="takes 4 arguments"):
        run(build_vector_add(128), (1,), np.zeros(4, np.float32))


def test_i1_memory_is_one_byte_per_element():
    k = new_kernel("bools", [PointerType(I1), PointerType(I1)], ["x_ptr", "out_ptr"])
    x, out = k.args
    b = Builder(k.body)
    offs = b.op1(Op.ARANGE, attrs=A.RangeAttrs(0, 16))
    store(b, ptrs(b, out, offs), b.op1(Op.NOT, load(b, ptrs(b, x, offs))))
    b.create(Op.RETURN, [])
    verify(k)
    flags = np.random.default_rng().random(16) < 0.5
    res = np.zeros(16, np.bool_)
    run(k, (1,), flags, res)
    np.testing.assert_array_equal(res, ~flags)


def test_scalar_masked_load_and_store_with_bf16_scalar_argument():
    k = new_kernel("scalar", [PointerType(BF16), PointerType(BF16), BF16, I1], ["x_ptr", "y_ptr", "s", "m"])
    x, y, s, m = k.args
    b = Builder(k.body)
    total = b.op1(Op.ADD, load(b, x, m), s)  # rank-0 bf16 arithmetic, rounded
    store(b, y, total, m)
    b.create(Op.RETURN, [])
    verify(k)
    rng = np.random.default_rng()
    xv, sv = float(rng.uniform(1, 2)), float(rng.uniform(0, 1e-2))
    xt = torch.tensor([xv]).to(torch.bfloat16)
    x_arr = xt.view(torch.int16).numpy()
    y_arr = np.zeros(1, np.int16)
    run(k, (1,), x_arr, y_arr, sv, False)
    assert y_arr[0] == 0                                  # masked off: no store
    run(k, (1,), x_arr, y_arr, sv, True)
    expected = (xt.float() + torch.tensor([sv]).to(torch.bfloat16).float()).to(torch.bfloat16)
    assert y_arr[0] == expected.view(torch.int16).item()


def test_pointers_stored_to_memory_and_loaded_back():
    """A table of pointers (ptr<ptr<f32>>) written by the kernel and read back."""
    k = new_kernel("table", [PointerType(F32), PointerType(PointerType(F32)), PointerType(F32)],
                   ["x_ptr", "table_ptr", "out_ptr"])
    x, table, out = k.args
    b = Builder(k.body)
    offs = b.op1(Op.ARANGE, attrs=A.RangeAttrs(0, 16))
    rev = b.op1(Op.SUB, b.splat(b.constant(15, I32), (16,)), offs)
    store(b, ptrs(b, table, offs), ptrs(b, x, rev))
    loaded = load(b, ptrs(b, table, offs))
    store(b, ptrs(b, out, offs), load(b, loaded))
    b.create(Op.RETURN, [])
    verify(k)
    x_arr = np.random.default_rng().standard_normal(16).astype(np.float32)
    tab, res = np.zeros(16, np.uint64), np.zeros(16, np.float32)
    run(k, (1,), x_arr, tab, res)
    np.testing.assert_array_equal(res, x_arr[::-1])
    assert np.all(np.diff(tab.astype(np.int64)) == -4)


@pytest.mark.backends("interpreter", reason="checked mode bounds pointers derived from arguments, not pointers "
                      "loaded from memory; a null load on the GPU is a sticky illegal-address error")
def test_load_through_null_pointer_is_out_of_bounds():
    k = new_kernel("null", [PointerType(PointerType(F32)), PointerType(F32)], ["table_ptr", "out_ptr"])
    table, out = k.args
    b = Builder(k.body)
    b.loc = loc(45)
    store(b, out, load(b, load(b, table)))
    b.create(Op.RETURN, [])
    verify(k)
    with pytest.raises(OutOfBoundsError, match=r"no argument buffer \(addresses \[0x0\]\)") as info:
        run(k, (1,), np.zeros(1, np.uint64), np.zeros(1, np.float32))
    assert info.value.loc.line == 45


def test_empty_buffer_with_every_lane_masked():
    x = np.zeros(0, np.float32)
    out = np.zeros(0, np.float32)
    run(build_vector_add(128), (1,), x, x, out, 0)
    with pytest.raises(OutOfBoundsError) as info:
        run(build_vector_add(128), (1,), x, x, out, 1, debug=is_compiled())
    if is_compiled():
        assert reported_offset(info.value) == 0 and "'x_ptr'" in str(info.value)
    else:
        assert "buffer of 0 elements" in str(info.value)
