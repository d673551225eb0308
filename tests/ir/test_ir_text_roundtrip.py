"""Round trips of the IR text form: print -> parse -> print is the identity, with and
without locations, for a kernel using every op."""
from __future__ import annotations

import math

import pytest
from ir_test_kernels import SRC, build_all_ops_kernel, build_small_kernel

from tegula.ir import Op, parse_ir, print_ir, verify
from tegula.ir.core import UNKNOWN_LOC, Loc
from tegula.ir.parser import parse_literal
from tegula.ir.printer import format_literal


def test_all_ops_kernel_uses_every_op_and_verifies():
    k = build_all_ops_kernel()
    assert {ins.op for ins in k.walk()} == set(Op)
    verify(k)


@pytest.mark.parametrize("build", [build_all_ops_kernel, build_small_kernel])
@pytest.mark.parametrize("locs", [False, True])
def test_round_trip(build, locs):
    text = print_ir(build(), locs=locs)
    parsed = parse_ir(text)
    assert print_ir(parsed, locs=locs) == text
    verify(parsed)


def test_parsed_kernel_keeps_structure():
    k = build_all_ops_kernel()
    p = parse_ir(print_ir(k, locs=True))
    assert p.name == k.name
    assert p.arg_names == k.arg_names
    assert [a.type for a in p.args] == [a.type for a in k.args]
    assert [a.divisibility for a in p.arg_attrs] == [a.divisibility for a in k.arg_attrs]
    assert p.loc == k.loc
    originals, parsed = list(k.walk()), list(p.walk())
    assert [i.op for i in parsed] == [i.op for i in originals]
    for a, b in zip(originals, parsed):
        assert b.attrs == a.attrs or (a.op is Op.CONSTANT and math.isnan(a.attrs.value))
        assert [r.type for r in b.results] == [r.type for r in a.results]
        assert b.loc == a.loc
        assert all(r.owner is b for r in b.results)
        for ra, rb in zip(a.regions, b.regions):
            assert [x.type for x in rb.args] == [x.type for x in ra.args]
            assert all(x.owner is rb for x in rb.args)


def test_locs_are_printed_only_on_request():
    k = build_small_kernel()
    assert "loc(" not in print_ir(k)
    k.body.instrs[0].loc = Loc(SRC, 7, 2, 9)
    text = print_ir(k, locs=True)
    assert f'program_id {{axis = 0}} : i32 loc("{SRC}":7:3-9)' in text
    assert parse_ir(text).body.instrs[0].loc == Loc(SRC, 7, 2, 9)
    assert parse_ir(text).body.instrs[1].loc == UNKNOWN_LOC


def test_loc_file_with_quotes_and_backslashes():
    k = build_small_kernel()
    odd = 'C:\\dir\\my "kernels"\\ké.py'
    k.body.instrs[0].loc = Loc(odd, 1, 0)
    text = print_ir(k, locs=True)
    assert parse_ir(text).body.instrs[0].loc == Loc(odd, 1, 0)


@pytest.mark.parametrize("value", [
    0, -3, 2**70, 1.5, -0.0, 1e-300, float("inf"), float("-inf"), True, False, None,
    "", "it's \"quoted\"\n", (), (1,), (1, 2), ("a", (3, -4.5)), [1, 2],
])
def test_literals_round_trip(value):
    text = format_literal(value)
    back = parse_literal(text)
    assert back == value and type(back) is type(value)
    assert format_literal(back) == text


def test_nan_and_numpy_scalars():
    import numpy as np
    assert math.isnan(parse_literal(format_literal(float("nan"))))
    assert format_literal(np.float32(1.5)) == "1.5"
    assert format_literal(np.int64(7)) == "7"
    assert format_literal(np.bool_(True)) == "True"


def test_hand_written_names_comments_and_spacing_are_accepted():
    text = """
    // a hand-written kernel: names are free-form, numbering comes back on print
    kernel @k(%x: ptr<f32>, %n: i32) {
      %pid   =   program_id {axis = 0} : i32    // trailing comment
      %acc0 = constant {value = 0.0} : f32
      %zero = constant {value = 0} : i32
      %one = constant {value = 1} : i32
      %r = for %zero, %n, %one, %acc0 : i32, i32, i32, f32 -> f32 {
      ^(%iv: i32, %acc: f32):
        %s = add %acc, %acc : f32
        yield %s
      }
      return
    }
    """
    k = parse_ir(text)
    verify(k)
    printed = print_ir(k)
    assert "%4 = for %2, %n, %3, %1 : i32, i32, i32, f32 -> f32 {" in printed
    assert "  ^(%5: i32, %6: f32):" in printed
    assert print_ir(parse_ir(printed)) == printed


def test_print_block_and_instr():
    k = build_all_ops_kernel()
    red = next(i for i in k.walk() if i.op is Op.REDUCE)
    text = print_ir(red)
    assert text.splitlines()[0] == "%0 = reduce %ext.0 {axis = 0} : tile<512xf32> -> f32 {"
    assert text.splitlines()[1] == "^(%1: f32, %2: f32):"
    assert text.splitlines()[-1] == "}"
    block_text = print_ir(red.regions[0])
    assert block_text.splitlines() == ["^(%0: f32, %1: f32):", "  %2 = add %0, %1 : f32", "  yield %2"]
    with pytest.raises(TypeError, match="Kernel, Block or Instr"):
        print_ir(42)


def test_printing_is_deterministic():
    assert print_ir(build_all_ops_kernel()) == print_ir(build_all_ops_kernel())


def test_attrs_of_an_unexpected_class_round_trip_with_class_name():
    from tegula.ir import attrs as A
    k = build_small_kernel()
    k.body.instrs[1].attrs = A.AxisAttrs(1)  # a constant with the wrong attribute class
    text = print_ir(k)
    assert "constant #AxisAttrs{axis = 1} : i32" in text
    assert print_ir(parse_ir(text)) == text
