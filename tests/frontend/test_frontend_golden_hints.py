# ruff: noqa: E501  (golden IR lines are as long as the printer makes them)
"""Golden tile IR for a compiler hint whose result is discarded (Triton's grouped GEMM
tutorial: `tl.multiple_of(a_ptrs, ...)` at the top of the K loop): the frontend emits
the `hint` on the loop-carried value, the `tir_opt` passes keep it, and the axis
analysis applies it to the loop's block argument in place."""
from __future__ import annotations

from frontend_test_utils import build, compile_ir, jit

import tegula.language as tl
from tegula.ir.ops import Op
from tegula.passes import PassContext, axis_info, run_pipeline

SIG = {"a_ptr": "*fp16", "stride": "i32", "n": "i32"}


@jit
def hinted_loop(a_ptr, stride, n, BLOCK: tl.constexpr):
    ptrs = a_ptr + tl.arange(0, BLOCK) * stride
    for _ in range(n):
        tl.multiple_of(ptrs, 16)
        x = tl.load(ptrs)
        tl.store(ptrs, x + 1)
        ptrs += BLOCK


def test_a_discarded_hint_is_emitted_on_the_carried_value():
    assert compile_ir(hinted_loop, SIG, {"BLOCK": 8}) == """\
kernel @hinted_loop(%a_ptr: ptr<f16>, %stride: i32, %n: i32) {
  %0 = arange {start = 0, end = 8} : tile<8xi32>
  %1 = splat %stride : tile<8xi32>
  %2 = mul %0, %1 : tile<8xi32>
  %3 = splat %a_ptr : tile<8xptr<f16>>
  %4 = addptr %3, %2 : tile<8xptr<f16>>
  %5 = constant {value = 0} : i32
  %6 = constant {value = 1} : i32
  %7 = for %5, %n, %6, %4 : i32, i32, i32, tile<8xptr<f16>> -> tile<8xptr<f16>> {
  ^(%8: i32, %9: tile<8xptr<f16>>):
    %10 = hint %9 {kind = 'multiple_of', values = (16,)} : tile<8xptr<f16>>
    %11 = load %9 : tile<8xf16>
    %12 = constant {value = 1.0} : f16
    %13 = splat %12 : tile<8xf16>
    %14 = add %11, %13 : tile<8xf16>
    store %9, %14
    %15 = constant {value = 8} : i32
    %16 = splat %15 : tile<8xi32>
    %17 = addptr %9, %16 : tile<8xptr<f16>>
    yield %17
  }
  return
}"""


def test_the_optimised_kernel_keeps_the_hint_and_the_analysis_applies_it():
    k = run_pipeline(build(hinted_loop, SIG, {"BLOCK": 8}), "tir_opt", PassContext(verify=True))
    loop = next(ins for ins in k.walk() if ins.op is Op.FOR)
    hint = next(ins for ins in loop.regions[0].instrs if ins.op is Op.HINT)
    carried = loop.regions[0].args[1]
    assert hint.operands[0] is carried
    info = axis_info(k)
    load = next(ins for ins in loop.regions[0].instrs if ins.op is Op.LOAD)
    assert load.operands[0] is carried and info[carried].divisibility == (16,)
    assert info[loop.results[0]].divisibility == (1,)  # no claim past the loop
