"""Block pointers as IR ops and `block_pointers_to_pointers` (with its cleanup,
`lower_block_pointers`): the golden text of a kernel advancing a block pointer in a
`for` loop before and after the pass (only the offset stays loop-carried, the address
code is hoisted); text round trips; translation validation on the interpreter — the
rewritten kernel computes exactly what the ops computed, on fresh random inputs with
ragged sizes — over every pattern of `block_pointer_kernels` (for, if, while, stores,
bool elements, each dimension checked alone, zero and NaN padding); out-of-bounds
reports alike before and after; and the arguments a block-pointer kernel writes."""
from __future__ import annotations

import numpy as np
import pytest
from block_pointer_kernels import CASES, inputs

from tegula.backends.interpreter import execute
from tegula.compiler import ASTSource
from tegula.errors import OutOfBoundsError
from tegula.ir import parse_ir, print_ir, verify
from tegula.ir.ops import BLOCK_POINTER_OPS
from tegula.ir.types import BlockPtrType
from tegula.passes import lower_block_pointers, read_arguments, written_arguments
from tegula.runtime.compiler import optimized_ir


def _ir(name):
    fn, sig, cx = CASES[name]
    return optimized_ir(ASTSource(fn, signature=sig, constexprs=cx))


ROW_SUMS_OPS = """\
kernel @row_sums(%x_ptr: ptr<f32>, %out_ptr: ptr<f32>, %n: i32, %stride: i32) {
  %0 = program_id {axis = 0} : i32
  %1 = mul %0, %stride : i32
  %2 = addptr %x_ptr, %1 : ptr<f32>
  %3 = cast %n : i64
  %4 = constant {value = 1} : i64
  %5 = constant {value = -16} : i32
  %6 = make_block_ptr %2, %3, %4, %5 : blockptr<16xf32, order=[0]>
  %7 = constant {value = 16} : i32
  %8 = advance %6, %7 : blockptr<16xf32, order=[0]>
  %9 = constant {value = 0.0} : tile<16xf32>
  %10 = constant {value = 0} : i32
  %11, %12 = for %10, %n, %7, %9, %8 : i32, i32, i32, tile<16xf32>, blockptr<16xf32, order=[0]> \
-> tile<16xf32>, blockptr<16xf32, order=[0]> {
  ^(%13: i32, %14: tile<16xf32>, %15: blockptr<16xf32, order=[0]>):
    %16 = block_load %15 {boundary_check = (0,)} : tile<16xf32>
    %17 = add %14, %16 : tile<16xf32>
    %18 = advance %15, %7 : blockptr<16xf32, order=[0]>
    yield %17, %18
  }
  %19 = addptr %out_ptr, %0 : ptr<f32>
  %20 = reduce %11 {axis = 0} : tile<16xf32> -> f32 {
  ^(%21: f32, %22: f32):
    %23 = add %21, %22 : f32
    yield %23
  }
  store %19, %20
  return
}"""

ROW_SUMS_POINTERS = """\
kernel @row_sums(%x_ptr: ptr<f32>, %out_ptr: ptr<f32>, %n: i32, %stride: i32) {
  %0 = program_id {axis = 0} : i32
  %1 = mul %0, %stride : i32
  %2 = addptr %x_ptr, %1 : ptr<f32>
  %3 = cast %n : i64
  %4 = constant {value = 16} : i32
  %5 = constant {value = 0} : i32
  %6 = constant {value = 0.0} : tile<16xf32>
  %7 = arange {start = 0, end = 16} : tile<16xi32>
  %8 = constant {value = 0} : tile<16xi32>
  %9 = splat %3 : tile<16xi64>
  %10 = splat %2 : tile<16xptr<f32>>
  %11, %12 = for %5, %n, %4, %6, %5 : i32, i32, i32, tile<16xf32>, i32 -> tile<16xf32>, i32 {
  ^(%13: i32, %14: tile<16xf32>, %15: i32):
    %16 = splat %15 : tile<16xi32>
    %17 = add %7, %16 : tile<16xi32>
    %18 = cast %17 : tile<16xi64>
    %19 = ge %17, %8 : tile<16xi1>
    %20 = lt %18, %9 : tile<16xi1>
    %21 = and %19, %20 : tile<16xi1>
    %22 = addptr %10, %18 : tile<16xptr<f32>>
    %23 = load %22, %21, %6 {has_mask = True, has_other = True} : tile<16xf32>
    %24 = add %14, %23 : tile<16xf32>
    %25 = add %15, %4 : i32
    yield %24, %25
  }
  %26 = addptr %out_ptr, %0 : ptr<f32>
  %27 = reduce %11 {axis = 0} : tile<16xf32> -> f32 {
  ^(%28: f32, %29: f32):
    %30 = add %28, %29 : f32
    yield %30
  }
  store %26, %27
  return
}"""


def test_golden_text_of_a_block_pointer_advanced_in_a_loop():
    kernel = _ir("row_sums")
    assert print_ir(kernel) == ROW_SUMS_OPS
    lowered = lower_block_pointers(kernel)
    # the loop carries the offset only: base, shape and stride are invariant and hoisted,
    # the advance before the loop folded into its initial offset (-16 + 16)
    assert print_ir(lowered) == ROW_SUMS_POINTERS
    assert print_ir(kernel) == ROW_SUMS_OPS  # the input is left alone


@pytest.mark.parametrize("name", sorted(CASES))
def test_text_round_trip(name):
    text = print_ir(_ir(name), locs=True)
    assert print_ir(parse_ir(text), locs=True) == text
    verify(parse_ir(text), stage="tir_opt")


def _run(kernel, grid, args):
    args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    execute(kernel, grid, args)
    return [a for a in args if isinstance(a, np.ndarray)]


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name", sorted(CASES))
def test_pass_computes_what_the_ops_compute(name, seed):
    kernel = _ir(name)
    assert {i.op for i in kernel.walk()} & BLOCK_POINTER_OPS
    lowered = lower_block_pointers(kernel)
    verify(lowered, stage="tir_opt")
    assert not {i.op for i in lowered.walk()} & BLOCK_POINTER_OPS
    assert not any(isinstance(v.type, BlockPtrType) for i in lowered.walk() for v in i.results)
    grid, args = inputs(name, np.random.default_rng(seed))
    for native, rewritten in zip(_run(kernel, grid, args), _run(lowered, grid, args)):
        np.testing.assert_array_equal(native, rewritten)
    outs = _run(kernel, grid, args)
    if name == "while":  # a reference for the loops' own meaning
        x, n = args[0], args[2]
        want = np.zeros(16, np.float64)
        for i in range(0, n, 16):
            block = x[i:i + 16]
            want[:len(block)] += block
        np.testing.assert_allclose(outs[1], want, rtol=1e-5)
    if name == "row_sums":
        n = args[2]
        np.testing.assert_allclose(outs[1], args[0].reshape(3, n).sum(axis=1), rtol=1e-5, atol=1e-5)
    if name.startswith("check"):  # unchecked dims were written past the tensor, checked ones not
        x, y, (a, b, c) = outs[0], outs[1], args[2:5]
        dims = CASES[name][2]["CHECK"]
        inside = np.ones(x.shape, bool)
        for d, size in zip(range(3), (a, b, c)):
            if d in dims:
                idx = np.arange(x.shape[d]).reshape([-1 if e == d else 1 for e in range(3)])
                inside = inside & (idx < size)
        covered = np.zeros(x.shape, bool)
        covered[:4, :8, :24] = True
        np.testing.assert_array_equal(y[inside & covered], x[inside & covered] * 2 + 1)
        assert (y[~(inside & covered)] == 0).all()


def test_out_of_bounds_is_reported_alike_before_and_after():
    """An unchecked block store reaching past its buffer (a third program where the
    output has room for two): the same located report, at the user's line."""
    kernel = _ir("pad_zero")
    lowered = lower_block_pointers(kernel)
    messages = []
    for k in (kernel, lowered):
        with pytest.raises(OutOfBoundsError) as info:
            execute(k, (3, 1, 1), [np.zeros(20, np.float32), np.zeros(32, np.float32), 10, 2])
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    assert "out-of-bounds store through pointer argument 'out_ptr'" in messages[0]
    assert "block_pointer_kernels.py" in messages[0] and "tl.store(q, v)" in messages[0]


def test_written_and_read_arguments_follow_block_pointers():
    kernel = _ir("matmul")
    assert written_arguments(kernel) == {"c_ptr"}
    assert read_arguments(kernel) == {"a_ptr", "b_ptr"}
    assert written_arguments(_ir("branch")) == {"out_ptr"}
    assert written_arguments(_ir("while")) == {"out_ptr"}
