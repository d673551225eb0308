# ruff: noqa: E501  (golden IR lines are as long as the printer makes them)
"""Golden tile IR for assignments, branches, expressions, globals and asserts.

Each kernel sits right above its test; the expected IR is the printer's text form
(docs/internals.md), exactly. When the language layer changes what it emits for an
operation, the goldens change with it: review the new text, then update it here.
Loops and calls are in test_frontend_golden_flow.py.
"""
from __future__ import annotations

from frontend_test_utils import compile_ir, jit

import tegula.language as tl

SCALE = tl.constexpr(3)
OUT_DTYPE = tl.float16


@jit
def assign_unpack(x_ptr):
    a, b = 1, 2
    (c, _d), e = (a, b), 5
    tl.store(x_ptr, a + c + e)


def test_assignment_and_tuple_unpacking():
    assert compile_ir(assign_unpack, {"x_ptr": "*i32"}) == """\
kernel @assign_unpack(%x_ptr: ptr<i32>) {
  %0 = constant {value = 1} : i32
  %1 = constant {value = 2} : i32
  %2 = constant {value = 5} : i32
  %3 = add %0, %0 : i32
  %4 = add %3, %2 : i32
  store %x_ptr, %4
  return
}"""


@jit
def augassign(x_ptr, n):
    acc = n
    acc += 1
    acc *= 2
    acc //= 3
    acc <<= 1
    tl.store(x_ptr, acc)


def test_augmented_assignment():
    assert compile_ir(augassign, {"x_ptr": "*i32", "n": "i32"}) == """\
kernel @augassign(%x_ptr: ptr<i32>, %n: i32) {
  %0 = constant {value = 1} : i32
  %1 = add %n, %0 : i32
  %2 = constant {value = 2} : i32
  %3 = mul %1, %2 : i32
  %4 = constant {value = 3} : i32
  %5 = idiv %3, %4 : i32
  %6 = constant {value = 1} : i32
  %7 = shl %5, %6 : i32
  store %x_ptr, %7
  return
}"""


@jit
def constexpr_if(x_ptr, FLAG: tl.constexpr):
    if FLAG:
        v = 1
    else:
        v = 2.0
    tl.store(x_ptr, v)


def test_constexpr_if_compiles_only_the_taken_branch():
    assert compile_ir(constexpr_if, {"x_ptr": "*fp32"}, {"FLAG": True}) == """\
kernel @constexpr_if(%x_ptr: ptr<f32>) {
  %0 = constant {value = 1} : i32
  %1 = cast %0 : f32
  store %x_ptr, %1
  return
}"""
    assert compile_ir(constexpr_if, {"x_ptr": "*fp32"}, {"FLAG": False}) == """\
kernel @constexpr_if(%x_ptr: ptr<f32>) {
  %0 = constant {value = 2.0} : f32
  store %x_ptr, %0
  return
}"""


@jit
def tensor_if(x_ptr, y_ptr, n):
    v = 0
    w = 1.0
    if n > 0:
        v = n * 2
        w = 2.0
    else:
        v = n - 1
    tl.store(x_ptr, v)
    tl.store(y_ptr, w)


def test_tensor_if_with_results():
    # `w` is unchanged by the else-branch, which yields its value from before the if.
    assert compile_ir(tensor_if, {"x_ptr": "*i32", "y_ptr": "*fp32", "n": "i32"}) == """\
kernel @tensor_if(%x_ptr: ptr<i32>, %y_ptr: ptr<f32>, %n: i32) {
  %0 = constant {value = 0} : i32
  %1 = constant {value = 1.0} : f32
  %2 = constant {value = 0} : i32
  %3 = gt %n, %2 : i1
  %4, %5 = if %3 : i1 -> i32, f32 {
    %6 = constant {value = 2} : i32
    %7 = mul %n, %6 : i32
    %8 = constant {value = 2.0} : f32
    yield %7, %8
  } {
    %9 = constant {value = 1} : i32
    %10 = sub %n, %9 : i32
    yield %10, %1
  }
  store %x_ptr, %4
  store %y_ptr, %5
  return
}"""


@jit
def elif_chain(x_ptr, n):
    if n < 0:
        r = -1
    elif n == 0:
        r = 0
    else:
        r = 1
    tl.store(x_ptr, r)


def test_elif_chain_nests_ifs():
    # `r` is defined on every path, so it is visible after the chain.
    assert compile_ir(elif_chain, {"x_ptr": "*i32", "n": "i32"}) == """\
kernel @elif_chain(%x_ptr: ptr<i32>, %n: i32) {
  %0 = constant {value = 0} : i32
  %1 = lt %n, %0 : i1
  %2 = if %1 : i1 -> i32 {
    %3 = constant {value = -1} : i32
    yield %3
  } {
    %4 = constant {value = 0} : i32
    %5 = eq %n, %4 : i1
    %6 = if %5 : i1 -> i32 {
      %7 = constant {value = 0} : i32
      yield %7
    } {
      %8 = constant {value = 1} : i32
      yield %8
    }
    yield %6
  }
  store %x_ptr, %2
  return
}"""


@jit
def ternary(x_ptr, n, BIG: tl.constexpr):
    a = n if n > 0 else 0
    b = 7 if BIG else 8
    tl.store(x_ptr, a + b)


def test_ternary_on_tensor_and_constexpr_conditions():
    assert compile_ir(ternary, {"x_ptr": "*i32", "n": "i32"}, {"BIG": False}) == """\
kernel @ternary(%x_ptr: ptr<i32>, %n: i32) {
  %0 = constant {value = 0} : i32
  %1 = gt %n, %0 : i1
  %2 = if %1 : i1 -> i32 {
    yield %n
  } {
    %3 = constant {value = 0} : i32
    yield %3
  }
  %4 = constant {value = 8} : i32
  %5 = add %2, %4 : i32
  store %x_ptr, %5
  return
}"""


@jit
def constexpr_global(x_ptr):
    v = tl.load(x_ptr) * SCALE
    tl.store(x_ptr, v.to(OUT_DTYPE))


def test_constexpr_and_dtype_globals():
    assert compile_ir(constexpr_global, {"x_ptr": "*fp16"}) == """\
kernel @constexpr_global(%x_ptr: ptr<f16>) {
  %0 = load %x_ptr : f16
  %1 = constant {value = 3.0} : f16
  %2 = mul %0, %1 : f16
  store %x_ptr, %2
  return
}"""


@jit
def min_max_constexpr(x_ptr, A: tl.constexpr, B: tl.constexpr):
    offs = tl.arange(0, min(A, B)) + max(A, B, 2)
    tl.store(x_ptr + offs, offs)


def test_min_max_on_constexprs_are_compile_time():
    assert compile_ir(min_max_constexpr, {"x_ptr": "*i32"}, {"A": 4, "B": 8}) == """\
kernel @min_max_constexpr(%x_ptr: ptr<i32>) {
  %0 = arange {start = 0, end = 4} : tile<4xi32>
  %1 = constant {value = 8} : i32
  %2 = splat %1 : tile<4xi32>
  %3 = add %0, %2 : tile<4xi32>
  %4 = splat %x_ptr : tile<4xptr<i32>>
  %5 = addptr %4, %3 : tile<4xptr<i32>>
  store %5, %3
  return
}"""


@jit
def none_index_and_transpose(x_ptr, stride):
    rows = tl.arange(0, 4)
    cols = tl.arange(0, 8)
    ptrs = x_ptr + rows[:, None] * stride + cols[None, :]
    tile = tl.load(ptrs)
    tl.store(x_ptr + cols[:, None] * stride + rows[None, :], tile.T)


def test_none_indexing_and_transpose():
    assert compile_ir(none_index_and_transpose, {"x_ptr": "*fp32", "stride": "i32"}) == """\
kernel @none_index_and_transpose(%x_ptr: ptr<f32>, %stride: i32) {
  %0 = arange {start = 0, end = 4} : tile<4xi32>
  %1 = arange {start = 0, end = 8} : tile<8xi32>
  %2 = expand_dims %0 {axis = 1} : tile<4x1xi32>
  %3 = splat %stride : tile<4x1xi32>
  %4 = mul %2, %3 : tile<4x1xi32>
  %5 = splat %x_ptr : tile<4x1xptr<f32>>
  %6 = addptr %5, %4 : tile<4x1xptr<f32>>
  %7 = expand_dims %1 {axis = 0} : tile<1x8xi32>
  %8 = broadcast %6 {shape = (4, 8)} : tile<4x8xptr<f32>>
  %9 = broadcast %7 {shape = (4, 8)} : tile<4x8xi32>
  %10 = addptr %8, %9 : tile<4x8xptr<f32>>
  %11 = load %10 : tile<4x8xf32>
  %12 = expand_dims %1 {axis = 1} : tile<8x1xi32>
  %13 = splat %stride : tile<8x1xi32>
  %14 = mul %12, %13 : tile<8x1xi32>
  %15 = splat %x_ptr : tile<8x1xptr<f32>>
  %16 = addptr %15, %14 : tile<8x1xptr<f32>>
  %17 = expand_dims %0 {axis = 0} : tile<1x4xi32>
  %18 = broadcast %16 {shape = (8, 4)} : tile<8x4xptr<f32>>
  %19 = broadcast %17 {shape = (8, 4)} : tile<8x4xi32>
  %20 = addptr %18, %19 : tile<8x4xptr<f32>>
  %21 = permute %11 {order = (1, 0)} : tile<8x4xf32>
  store %20, %21
  return
}"""


@jit
def pointer_arith(x_ptr, y_ptr, n):
    pid = tl.program_id(0)
    p = x_ptr + pid * n
    q = y_ptr + pid
    tl.store(q, tl.load(p + 1))


def test_scalar_pointer_arithmetic():
    assert compile_ir(pointer_arith, {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"}) == """\
kernel @pointer_arith(%x_ptr: ptr<f32>, %y_ptr: ptr<f32>, %n: i32) {
  %0 = program_id {axis = 0} : i32
  %1 = mul %0, %n : i32
  %2 = addptr %x_ptr, %1 : ptr<f32>
  %3 = addptr %y_ptr, %0 : ptr<f32>
  %4 = constant {value = 1} : i32
  %5 = addptr %2, %4 : ptr<f32>
  %6 = load %5 : f32
  store %3, %6
  return
}"""


@jit
def with_assert(x_ptr, n):
    assert n > 0, f"n must be positive (block {SCALE})"
    assert n < 100
    tl.store(x_ptr, n)


def test_assert_is_a_device_assert_only_in_debug_mode():
    sig = {"x_ptr": "*i32", "n": "i32"}
    assert compile_ir(with_assert, sig, debug=True) == """\
kernel @with_assert(%x_ptr: ptr<i32>, %n: i32) {
  %0 = constant {value = 0} : i32
  %1 = gt %n, %0 : i1
  device_assert %1 {message = 'n must be positive (block 3)'}
  %2 = constant {value = 100} : i32
  %3 = lt %n, %2 : i1
  device_assert %3 {message = 'n < 100'}
  store %x_ptr, %n
  return
}"""
    assert compile_ir(with_assert, sig, debug=False) == """\
kernel @with_assert(%x_ptr: ptr<i32>, %n: i32) {
  store %x_ptr, %n
  return
}"""


@jit
def bool_ops(x_ptr, n, M: tl.constexpr):
    ok = M is not None and M > 2
    c = (n > 0) and (n < 10) or not ok
    r = 0 < n < 5
    tl.store(x_ptr, c & r)


def test_and_or_not_is_and_comparison_chains():
    # `M is not None` is False, so `M > 2` is never evaluated (it would fail on None).
    assert compile_ir(bool_ops, {"x_ptr": "*i1", "n": "i32"}, {"M": None}) == """\
kernel @bool_ops(%x_ptr: ptr<i1>, %n: i32) {
  %0 = constant {value = False} : i1
  %1 = constant {value = 0} : i32
  %2 = gt %n, %1 : i1
  %3 = constant {value = 10} : i32
  %4 = lt %n, %3 : i1
  %5 = and %2, %4 : i1
  %6 = not %0 : i1
  %7 = or %5, %6 : i1
  %8 = constant {value = 0} : i32
  %9 = gt %n, %8 : i1
  %10 = constant {value = 5} : i32
  %11 = lt %n, %10 : i1
  %12 = and %9, %11 : i1
  %13 = and %7, %12 : i1
  %14 = bitcast %x_ptr : ptr<i8>
  %15 = cast %13 : i8
  store %14, %15
  return
}"""
