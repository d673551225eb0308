"""Hints apply in place, as in Triton: `tl.multiple_of(x, v)` (and max_contiguous /
max_constancy) informs the axis analysis of x itself, wherever x is used and whether or
not the hint's result is used; on a loop-carried block argument the claim holds on
every iteration and is applied at the loop's fixed point. DCE keeps such a hint while
its operand is live; the IR still prints and reads back."""
from __future__ import annotations

import numpy as np
from passes_test_utils import by_name, parse, run

from tegula.backends.interpreter import execute
from tegula.ir import parse_ir, print_ir
from tegula.ir.ops import Op
from tegula.passes import axis_info

DISCARDED = """
    kernel @k(%p: ptr<f16>, %m: i32) {
      %r = arange {start = 0, end = 64} : tile<64xi32>
      %ps = splat %p : tile<64xptr<f16>>
      %q = addptr %ps, %r : tile<64xptr<f16>>
      %v = load %q {} : tile<64xf16>
      %h = hint %q {kind = 'multiple_of', values = (16,)} : tile<64xptr<f16>>
      store %q, %v {}
      return
    }"""


def test_a_discarded_hint_informs_its_operand_everywhere():
    k = parse(DISCARDED)
    info = axis_info(k)
    q = info[by_name(k, "q")]
    # p's alignment is unknown; the claim replaces it, and the analysis' contiguity stays
    assert q.divisibility == (16,) and q.contiguity == (64,)
    assert info[by_name(k, "h")] == q


def test_dce_keeps_a_hint_on_a_live_value_and_the_text_reads_back():
    out = run(DISCARDED, ["dce"])
    assert " = hint %2 {kind = 'multiple_of', values = (16,)}" in out
    assert print_ir(parse_ir(out)) == out


def test_dce_drops_a_hint_on_a_value_nothing_else_uses():
    out = run("""
        kernel @k(%p: ptr<f16>) {
          %r = arange {start = 0, end = 64} : tile<64xi32>
          %h = hint %r {kind = 'multiple_of', values = (16,)} : tile<64xi32>
          return
        }""", ["dce"])
    assert "hint" not in out and "arange" not in out


CARRIED = """
    kernel @k(%p: ptr<f16>, %n: i32) {
      %r = arange {start = 0, end = 64} : tile<64xi32>
      %ps = splat %p : tile<64xptr<f16>>
      %ptrs = addptr %ps, %r : tile<64xptr<f16>>
      %lb = constant {value = 0} : i32
      %st = constant {value = 1} : i32
      %inc = constant {value = 64} : tile<64xi32>
      %out = for %lb, %n, %st, %ptrs : i32, i32, i32, tile<64xptr<f16>> -> tile<64xptr<f16>> {
      ^(%i: i32, %cur: tile<64xptr<f16>>):
        %h = hint %cur {kind = 'multiple_of', values = (16,)} : tile<64xptr<f16>>
        %v = load %cur {} : tile<64xf16>
        store %cur, %v {}
        %next = addptr %cur, %inc : tile<64xptr<f16>>
        yield %next
      }
      %w = load %out {} : tile<64xf16>
      store %out, %w {}
      return
    }"""


def test_a_hint_on_a_loop_carried_value_holds_on_every_iteration():
    k = parse(CARRIED)
    info = axis_info(k)
    at = lambda name: info[by_name(k, name)]  # noqa: E731
    # bound at the fixed point: join(init, yield) with the claim on top
    assert at("cur").divisibility == (16,) and at("cur").contiguity == (64,)
    # what the body computes from it keeps the claim (64 elements of 2 bytes = 128 B)
    assert at("next").divisibility == (16,) and at("next").contiguity == (64,)
    # the loop's result may be the unhinted initial value (no iteration ran): no claim
    assert at("out").divisibility == (1,) and at("out").contiguity == (64,)


def test_a_loop_carried_claim_does_not_survive_a_join_it_does_not_cover():
    # max_contiguous on the argument says nothing of divisibility: the join with the
    # unaligned initial value still decides that
    k = parse(CARRIED.replace("'multiple_of', values = (16,)", "'max_contiguous', values = (32,)"))
    info = axis_info(k)
    cur = info[by_name(k, "cur")]
    assert cur.contiguity == (32,) and cur.divisibility == (1,)


def test_a_discarded_hint_on_a_kernel_argument_stays_local_as_in_triton():
    k = parse("""
        kernel @k(%s: i32) {
          %h = hint %s {kind = 'multiple_of', values = (16,)} : i32
          %t = add %s, %s : i32
          %u = add %h, %h : i32
          return
        }""")
    info = axis_info(k)
    assert info[by_name(k, "t")].divisibility == (1,)
    assert info[by_name(k, "u")].divisibility == (16,)


def test_the_interpreter_runs_a_discarded_hint_as_nothing():
    k = parse(CARRIED)
    assert any(ins.op is Op.HINT for ins in k.walk())
    buf = np.arange(64 * 4, dtype=np.float16)
    execute(k, (1, 1, 1), [buf, 3])
    assert np.array_equal(buf, np.arange(64 * 4, dtype=np.float16))


def test_dce_drops_hints_that_only_annotate_each_other():
    out = run("""
        kernel @k(%p: ptr<f16>) {
          %r = arange {start = 0, end = 64} : tile<64xi32>
          %h1 = hint %r {kind = 'multiple_of', values = (16,)} : tile<64xi32>
          %h2 = hint %r {kind = 'max_contiguous', values = (16,)} : tile<64xi32>
          return
        }""", ["dce"])
    assert "hint" not in out and "arange" not in out


def test_a_discarded_hint_on_a_value_used_through_a_kept_hint_stays():
    # the used hint's facts start from its operand's, which the discarded claim sets
    text = """
        kernel @k(%p: ptr<f16>, %m: i32) {
          %r = arange {start = 0, end = 64} : tile<64xi32>
          %ms = splat %m : tile<64xi32>
          %o = rem %r, %ms : tile<64xi32>
          %c = hint %o {kind = 'max_contiguous', values = (64,)} : tile<64xi32>
          %d = hint %o {kind = 'multiple_of', values = (64,)} : tile<64xi32>
          %ps = splat %p : tile<64xptr<f16>>
          %q = addptr %ps, %d : tile<64xptr<f16>>
          %v = load %q {} : tile<64xf16>
          store %q, %v {}
          return
        }"""
    out = run(text, ["dce"])
    assert "'max_contiguous'" in out
    k = parse(out)
    d = next(ins for ins in k.walk() if ins.op is Op.HINT and ins.attrs.kind == "multiple_of")
    info = axis_info(k)[d.results[0]]
    assert info.contiguity == (64,) and info.divisibility == (64,)
