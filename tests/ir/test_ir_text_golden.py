"""Golden text of a small kernel: the exact text form, character for character."""
from __future__ import annotations

import textwrap

from ir_test_kernels import build_small_kernel

from tegula.ir import parse_ir, print_ir
from tegula.ir.core import Loc

EXPECTED = textwrap.dedent("""\
    kernel @add_kernel(%x_ptr: ptr<f32> {divisibility = 16}, %y_ptr: ptr<f32> {divisibility = 16}, \
%out_ptr: ptr<f32> {divisibility = 16}, %n: i32) {
      %0 = program_id {axis = 0} : i32
      %1 = constant {value = 128} : i32
      %2 = mul %0, %1 : i32
      %3 = splat %2 : tile<128xi32>
      %4 = arange {start = 0, end = 128} : tile<128xi32>
      %5 = add %3, %4 : tile<128xi32>
      %6 = splat %n : tile<128xi32>
      %7 = lt %5, %6 : tile<128xi1>
      %8 = splat %x_ptr : tile<128xptr<f32>>
      %9 = addptr %8, %5 : tile<128xptr<f32>>
      %10 = load %9, %7 {has_mask = True} : tile<128xf32>
      %11 = splat %y_ptr : tile<128xptr<f32>>
      %12 = addptr %11, %5 : tile<128xptr<f32>>
      %13 = load %12, %7 {has_mask = True} : tile<128xf32>
      %14 = add %10, %13 : tile<128xf32>
      %15 = splat %out_ptr : tile<128xptr<f32>>
      %16 = addptr %15, %5 : tile<128xptr<f32>>
      store %16, %14, %7 {has_mask = True}
      return
    }""")


def test_golden_small_kernel():
    assert print_ir(build_small_kernel()) == EXPECTED


def test_golden_parses_back_to_itself():
    assert print_ir(parse_ir(EXPECTED)) == EXPECTED
    assert print_ir(parse_ir(EXPECTED + "\n\n")) == EXPECTED


def test_golden_with_locs():
    k = build_small_kernel()
    k.loc = Loc("/src/add.py", 4, 0)
    k.body.instrs[0].loc = Loc("/src/add.py", 6, 10, 26)
    lines = print_ir(k, locs=True).splitlines()
    assert lines[0].endswith(', %n: i32) loc("/src/add.py":4:1) {')
    assert lines[1] == '  %0 = program_id {axis = 0} : i32 loc("/src/add.py":6:11-26)'
    assert lines[2] == "  %1 = constant {value = 128} : i32"


def test_golden_regions():
    text = textwrap.dedent("""\
        kernel @loops(%n: i32, %p: i1) {
          %0 = constant {value = 0} : i32
          %1 = constant {value = 1} : i32
          %2 = constant {value = 0.0} : f32
          %3 = for %0, %n, %1, %2 : i32, i32, i32, f32 -> f32 {
          ^(%4: i32, %5: f32):
            %6 = if %p : i1 -> f32 {
              yield %5
            } {
              %7 = add %5, %5 : f32
              yield %7
            }
            yield %6
          }
          %8 = while %0 : i32 -> i32 {
          ^(%9: i32):
            %10 = lt %9, %n : i1
            condition %10, %9
          } {
          ^(%11: i32):
            %12 = add %11, %1 : i32
            yield %12
          }
          return
        }""")
    assert print_ir(parse_ir(text)) == text


def test_docs_example_is_valid_and_round_trips():
    from pathlib import Path

    from tegula.ir import verify
    doc = (Path(__file__).parents[2] / "docs" / "internals.md").read_text()
    section = doc[doc.index("### Text form"):]
    example = section[section.index("```\n") + 4:section.index("\n```", section.index("```\n"))]
    k = parse_ir(example)
    verify(k)
    assert print_ir(parse_ir(print_ir(k, locs=True)), locs=True) == example
