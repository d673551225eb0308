"""Malformed IR text: the parser raises IRParseError naming the line, column and
problem."""
from __future__ import annotations

import textwrap

import pytest

from tegula.ir import IRParseError, parse_ir

HEAD = "kernel @k(%x: ptr<f32>, %n: i32) {\n"


def parse_body(body: str):
    return parse_ir(HEAD + textwrap.dedent(body) + "return\n}\n")


def expect_error(text: str, match: str, line: int | None = None) -> IRParseError:
    with pytest.raises(IRParseError, match=match) as info:
        parse_ir(text)
    if line is not None:
        assert info.value.line == line, str(info.value)
    return info.value


def test_error_is_a_value_error_with_line_and_caret():
    err = expect_error(HEAD + "  %0 = frobnicate %n : i32\n  return\n}", "unknown op 'frobnicate'", 2)
    assert isinstance(err, ValueError)
    assert err.col == 8
    text = str(err)
    assert text.startswith("line 2:8: unknown op 'frobnicate'")
    assert "  %0 = frobnicate %n : i32\n         ^" in text


@pytest.mark.parametrize("body, match, line", [
    ("%0 = add %n, %q : i32\n", r"use of undefined value %q", 2),
    ("%0 = add %n, %n : i32\n%0 = add %n, %n : i32\n", r"value %0 is defined twice", 3),
    ("%0 = add %n, %n : i33\n", r"bad type 'i33'", 2),
    ("%0 = add %n, %n : tile<4xf32\n", r"unbalanced '<'", 2),
    ("%0 = add %n, %n\n", r"names 1 result\(s\) but gives 0 result type", 2),
    ("%0, %1 = add %n, %n : i32\n", r"names 2 result\(s\) but gives 1", 2),
    ("%0 = program_id {axis = } : i32\n", r"bad value for attribute 'axis'", 2),
    ("%0 = program_id {axis = foo()} : i32\n", r"bad value for attribute 'axis'", 2),
    ("%0 = program_id {axis = 0, axis = 1} : i32\n", r"attribute 'axis' given twice", 2),
    ("%0 = program_id {axes = 0} : i32\n", r"bad attributes for 'program_id' \(AxisAttrs\)", 2),
    ("%0 = program_id {axis = 0 : i32\n", r"unterminated attribute value", 2),
    ("%0 = add %n, %n {x = 1} : i32\n", r"'add' takes no attributes", 2),
    ("%0 = constant #NoSuchAttrs{value = 1} : i32\n", r"unknown attribute class 'NoSuchAttrs'", 2),
    ("%0 = add %n, %n : i32 junk\n", r"expected end of line, found 'junk'", 2),
    ("%0 = add %n, %n -> i32\n", r"'add' has no regions", 2),
    ("%0 = for %n, %n, %n : i32, i32 -> i32 {\nyield\n}\n", r"3 operand\(s\) but 2 operand type", 2),
    ("%0 = for %n, %n, %n, %n : i32, i32, i32, f32 -> f32 {\n}\n", r"operand has type i32 but the type "
     r"list says f32", 2),
    ("%0 = add %n, %n : i32 loc(foo.py:1:1)\n", r"quoted file name", 2),
    ('%0 = add %n, %n : i32 loc("foo.py":1)\n', r"expected ':' after the line number", 2),
    ("for %n, %n, %n : i32, i32, i32 {\n^(%i i32):\nyield\n}\n", r"expected ':' after block "
     r"argument %i", 3),
])
def test_malformed_instructions(body, match, line):
    expect_error(HEAD + textwrap.dedent(body) + "return\n}\n", match, line)


def test_missing_closing_brace():
    expect_error(HEAD + "  return\n", r"unexpected end of text: a '}' is missing", 3)


def test_missing_kernel_keyword_and_trailing_text():
    expect_error("func @k() {\n}", r"expected 'kernel'", 1)
    expect_error("kernel @k() {\n  return\n}\nkernel @j() {\n}", r"unexpected text after the kernel", 4)


def test_bad_kernel_header():
    expect_error("kernel @k(%x ptr<f32>) {\n}", r"expected ':' after argument %x", 1)
    expect_error("kernel @k(%x: ptr<f32> {alignment = 4}) {\n}", r"bad attributes for a kernel argument", 1)
    expect_error("kernel @k(%x: i32, %x: i32) {\n}", r"value %x is defined twice", 1)
    expect_error("kernel @k(%x: i32) {\n^(%y: i32):\n  return\n}", r"arguments in the kernel header", 2)


def test_region_brace_must_end_the_line():
    # `{` followed by text on the same line is read as attributes, which 'for' lacks
    expect_error(HEAD + "for %n, %n, %n : i32, i32, i32 { yield\n}\nreturn\n}",
                 r"expected end of line", 2)
