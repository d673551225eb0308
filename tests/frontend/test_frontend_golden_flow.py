# ruff: noqa: E501  (golden IR lines are as long as the printer makes them)
"""Golden tile IR for loops (range, tl.range, static_range, while), early returns and
inlined @jit calls (tuple results, defaults, keywords, combine functions).

The expected IR is the printer's text form, exactly; see test_frontend_golden_basic.py.
"""
from __future__ import annotations

from frontend_test_utils import compile_ir, jit

import tegula.language as tl

SCALE = tl.constexpr(3)


@jit
def for_carried(x_ptr, y_ptr, n):
    acc = 0.0
    cnt = 0
    for i in range(0, n, 4):
        acc += i
        cnt += 1
    tl.store(x_ptr, acc)
    tl.store(y_ptr, cnt)


def test_for_range_with_loop_carried_values():
    assert compile_ir(for_carried, {"x_ptr": "*fp32", "y_ptr": "*i32", "n": "i32"}) == """\
kernel @for_carried(%x_ptr: ptr<f32>, %y_ptr: ptr<i32>, %n: i32) {
  %0 = constant {value = 0.0} : f32
  %1 = constant {value = 0} : i32
  %2 = constant {value = 0} : i32
  %3 = constant {value = 4} : i32
  %4, %5 = for %2, %n, %3, %0, %1 : i32, i32, i32, f32, i32 -> f32, i32 {
  ^(%6: i32, %7: f32, %8: i32):
    %9 = cast %6 : f32
    %10 = add %7, %9 : f32
    %11 = constant {value = 1} : i32
    %12 = add %8, %11 : i32
    yield %10, %12
  }
  store %x_ptr, %4
  store %y_ptr, %5
  return
}"""


@jit
def for_tl_range(x_ptr, n):
    acc = tl.zeros((16,), tl.float32)
    for i in tl.range(n, num_stages=2):
        acc += tl.load(x_ptr + i * 16 + tl.arange(0, 16))
    tl.store(x_ptr + tl.arange(0, 16), acc)


def test_tl_range_with_a_tile_carried():
    assert compile_ir(for_tl_range, {"x_ptr": "*fp32", "n": "i32"}) == """\
kernel @for_tl_range(%x_ptr: ptr<f32>, %n: i32) {
  %0 = constant {value = 0.0} : tile<16xf32>
  %1 = constant {value = 0} : i32
  %2 = constant {value = 1} : i32
  %3 = for %1, %n, %2, %0 {num_stages = 2} : i32, i32, i32, tile<16xf32> -> tile<16xf32> {
  ^(%4: i32, %5: tile<16xf32>):
    %6 = constant {value = 16} : i32
    %7 = mul %4, %6 : i32
    %8 = addptr %x_ptr, %7 : ptr<f32>
    %9 = arange {start = 0, end = 16} : tile<16xi32>
    %10 = splat %8 : tile<16xptr<f32>>
    %11 = addptr %10, %9 : tile<16xptr<f32>>
    %12 = load %11 : tile<16xf32>
    %13 = add %5, %12 : tile<16xf32>
    yield %13
  }
  %14 = arange {start = 0, end = 16} : tile<16xi32>
  %15 = splat %x_ptr : tile<16xptr<f32>>
  %16 = addptr %15, %14 : tile<16xptr<f32>>
  store %16, %3
  return
}"""


@jit
def for_negative_step(x_ptr):
    acc = 0
    for i in range(10, 0, -3):
        acc += i
    tl.store(x_ptr, acc)


def test_negative_constexpr_step_runs_the_mirrored_range():
    # range(10, 0, -3) = 10, 7, 4, 1: the loop runs iv = 0, 3, 6, 9 and uses 10 - iv + 0.
    assert compile_ir(for_negative_step, {"x_ptr": "*i32"}) == """\
kernel @for_negative_step(%x_ptr: ptr<i32>) {
  %0 = constant {value = 0} : i32
  %1 = constant {value = 0} : i32
  %2 = constant {value = 10} : i32
  %3 = constant {value = 3} : i32
  %4 = for %1, %2, %3, %0 : i32, i32, i32, i32 -> i32 {
  ^(%5: i32, %6: i32):
    %7 = sub %2, %5 : i32
    %8 = add %7, %1 : i32
    %9 = add %6, %8 : i32
    yield %9
  }
  store %x_ptr, %4
  return
}"""


@jit
def static_unroll(x_ptr, STEP: tl.constexpr):
    acc = 0
    for i in tl.static_range(0, 8, STEP):
        acc += i * 10
    tl.store(x_ptr, acc)


def test_static_range_unrolls_with_constexpr_induction_values():
    assert compile_ir(static_unroll, {"x_ptr": "*i32"}, {"STEP": 4}) == """\
kernel @static_unroll(%x_ptr: ptr<i32>) {
  %0 = constant {value = 0} : i32
  %1 = constant {value = 0} : i32
  %2 = add %0, %1 : i32
  %3 = constant {value = 40} : i32
  %4 = add %2, %3 : i32
  store %x_ptr, %4
  return
}"""


@jit
def while_loop(x_ptr, n):
    i = 1
    while i < n:
        i = i * 2
    tl.store(x_ptr, i)


def test_while_loop():
    assert compile_ir(while_loop, {"x_ptr": "*i32", "n": "i32"}) == """\
kernel @while_loop(%x_ptr: ptr<i32>, %n: i32) {
  %0 = constant {value = 1} : i32
  %1 = while %0 : i32 -> i32 {
  ^(%2: i32):
    %3 = lt %2, %n : i1
    condition %3, %2
  } {
  ^(%4: i32):
    %5 = constant {value = 2} : i32
    %6 = mul %4, %5 : i32
    yield %6
  }
  store %x_ptr, %1
  return
}"""


@jit
def early_return(x_ptr, n):
    pid = tl.program_id(0)
    if pid >= n:
        return
    tl.store(x_ptr + pid, pid)


def test_early_return_moves_the_rest_into_the_else_branch():
    assert compile_ir(early_return, {"x_ptr": "*i32", "n": "i32"}) == """\
kernel @early_return(%x_ptr: ptr<i32>, %n: i32) {
  %0 = program_id {axis = 0} : i32
  %1 = ge %0, %n : i1
  if %1 : i1 {
    yield
  } {
    %2 = addptr %x_ptr, %0 : ptr<i32>
    store %2, %0
    yield
  }
  return
}"""


@jit
def _sum_diff(a, b, scale=2):
    return a + b, (a - b) * scale


@jit
def nested_call(x_ptr, y_ptr, n):
    s, d = _sum_diff(n, 1, scale=SCALE)
    t = _sum_diff(b=n, a=s)[0]
    tl.store(x_ptr, s + t)
    tl.store(y_ptr, d)


def test_nested_jit_calls_with_tuple_results_defaults_and_keywords():
    assert compile_ir(nested_call, {"x_ptr": "*i32", "y_ptr": "*i32", "n": "i32"}) == """\
kernel @nested_call(%x_ptr: ptr<i32>, %y_ptr: ptr<i32>, %n: i32) {
  %0 = constant {value = 1} : i32
  %1 = add %n, %0 : i32
  %2 = constant {value = 1} : i32
  %3 = sub %n, %2 : i32
  %4 = constant {value = 3} : i32
  %5 = mul %3, %4 : i32
  %6 = add %1, %n : i32
  %7 = sub %1, %n : i32
  %8 = constant {value = 2} : i32
  %9 = mul %7, %8 : i32
  %10 = add %1, %6 : i32
  store %x_ptr, %10
  store %y_ptr, %5
  return
}"""


@jit
def _add(a, b):
    return a + b


@jit
def combine_reduce(x_ptr, combine_fn: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, 8))
    tl.store(x_ptr, tl.reduce(x, 0, combine_fn))


def test_jit_function_passed_as_constexpr_combine_fn():
    assert compile_ir(combine_reduce, {"x_ptr": "*fp32"}, {"combine_fn": _add}) == """\
kernel @combine_reduce(%x_ptr: ptr<f32>) {
  %0 = arange {start = 0, end = 8} : tile<8xi32>
  %1 = splat %x_ptr : tile<8xptr<f32>>
  %2 = addptr %1, %0 : tile<8xptr<f32>>
  %3 = load %2 : tile<8xf32>
  %4 = reduce %3 {axis = 0} : tile<8xf32> -> f32 {
  ^(%5: f32, %6: f32):
    %7 = add %5, %6 : f32
    yield %7
  }
  store %x_ptr, %4
  return
}"""
