"""The verifier's block-pointer rules (`ir.verifier_block_pointers`): the four ops'
operand and result types, boundary_check and padding attributes, the `blockptr` type
itself, and where block pointers may flow (through `for` / `if` / `while`, but never
as kernel arguments or into other ops)."""
from __future__ import annotations

import textwrap

import pytest

from tegula.ir import parse_ir, verify
from tegula.ir.verifier import VerificationError

HEAD = "kernel @b(%x: ptr<f16>, %i: ptr<i32>, %n: i64, %o: i32, %t: tile<16x32xf16>, %c: i1) {\n"
MAKE = "%p = make_block_ptr %x, %n, %n, %n, %n, %o, %o : blockptr<16x32xf16, order=[1,0]>\n"


def check(body: str) -> None:
    verify(parse_ir(HEAD + textwrap.dedent(body) + "return\n}\n"))


def fails(body: str, match: str) -> None:
    with pytest.raises(VerificationError, match=match):
        check(body)


def test_well_formed_ops_and_regions_verify():
    check(MAKE + """\
        %q = advance %p, %o, %o : blockptr<16x32xf16, order=[1,0]>
        %v = block_load %q {boundary_check = (0, 1), padding = 'nan'} : tile<16x32xf16>
        block_store %q, %v {boundary_check = (1,)}
        %r = if %c : i1 -> blockptr<16x32xf16, order=[1,0]> {
          yield %p
        } {
          yield %q
        }
        %z = constant {value = 0} : i32
        %s, %u = for %z, %o, %o, %r, %t : i32, i32, i32, blockptr<16x32xf16, order=[1,0]>, tile<16x32xf16> \
-> blockptr<16x32xf16, order=[1,0]>, tile<16x32xf16> {
        ^(%k: i32, %a: blockptr<16x32xf16, order=[1,0]>, %acc: tile<16x32xf16>):
          %w = block_load %a : tile<16x32xf16>
          %b = advance %a, %z, %o : blockptr<16x32xf16, order=[1,0]>
          yield %b, %w
        }
        %e = while %s : blockptr<16x32xf16, order=[1,0]> -> blockptr<16x32xf16, order=[1,0]> {
        ^(%bw: blockptr<16x32xf16, order=[1,0]>):
          condition %c, %bw
        } {
        ^(%ba: blockptr<16x32xf16, order=[1,0]>):
          yield %ba
        }
        block_store %e, %u
        """)


@pytest.mark.parametrize("body, match", [
    ("%p = make_block_ptr %x, %n, %n, %n, %o, %o : blockptr<16x32xf16, order=[1,0]>\n",
     r"takes \(base, shape..., strides..., offsets...\)"),
    ("%p = make_block_ptr %x, %n, %n, %n, %n, %n, %o : blockptr<16x32xf16, order=[1,0]>\n",
     r"\(ptr<f16>, i64, i64, i64, i64, i32, i32\), got"),
    ("%p = make_block_ptr %i, %n, %n, %n, %n, %o, %o : blockptr<16x32xf16, order=[1,0]>\n",
     r"takes \(base, shape"),
    ("%p = make_block_ptr %x, %n, %n, %n, %n, %o, %o : blockptr<16x24xf16, order=[1,0]>\n",
     "power-of-two dimensions"),
    ("%p = make_block_ptr %x, %n, %n, %n, %n, %o, %o : blockptr<16x32xf16, order=[1,1]>\n",
     "order is a permutation"),
    (MAKE + "%q = advance %p, %o : blockptr<16x32xf16, order=[1,0]>\n", r"takes \(block pointer, deltas...\)"),
    (MAKE + "%q = advance %p, %o, %o : blockptr<16x32xf16, order=[0,1]>\n", "should have result types"),
    (MAKE + "%v = block_load %p {boundary_check = (2,)} : tile<16x32xf16>\n", "boundary_check"),
    (MAKE + "%v = block_load %p {boundary_check = (1, 0)} : tile<16x32xf16>\n", "distinct sorted"),
    (MAKE + "%v = block_load %p : tile<16x16xf16>\n", "should have result types"),
    (MAKE + "block_store %p, %x\n", "stores a tile<16x32xf16>"),
    (MAKE + "%v = load %p : f16\n", "cannot take the block pointer"),
    ("%v = block_load %t : tile<16x32xf16>\n", "takes a block pointer first"),
])
def test_malformed_block_pointer_ops_are_rejected(body, match):
    fails(body, match)


def test_nan_padding_needs_float_elements():
    with pytest.raises(VerificationError, match="padding is 'zero', or 'nan' for float"):
        verify(parse_ir("""kernel @b(%i: ptr<i32>, %n: i64, %o: i32) {
            %p = make_block_ptr %i, %n, %n, %o : blockptr<16xi32, order=[0]>
            %v = block_load %p {boundary_check = (0,), padding = 'nan'} : tile<16xi32>
            return
            }"""))


def test_block_pointers_are_not_kernel_arguments():
    with pytest.raises(VerificationError, match="block pointers are made in the kernel"):
        verify(parse_ir("kernel @b(%p: blockptr<16xf32, order=[0]>) {\nreturn\n}"))


def test_bad_blockptr_type_text_is_a_parse_error():
    from tegula.ir.types import parse_type
    for text in ("blockptr<16xf32>", "blockptr<16xf32, order=(0)>", "blockptr<16xf32, #blocked, order=[0]>"):
        with pytest.raises(ValueError):
            parse_type(text)
