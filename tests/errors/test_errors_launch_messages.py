"""Exact messages of launches that fail: the scalar-for-a-pointer note only where a
scalar argument really is the pointer operand, a list comprehension over range(), and a
misspelled constexpr keyword."""
# ruff: noqa: F841  (the kernels below are compiled, never run as Python)
from __future__ import annotations

import numpy as np
import pytest
from errors_test_utils import where

import tegula as triton
import tegula.language as tl
from tegula.errors import CompilationError, KernelArgumentError

NOTE = "note: in this launch"


@triton.jit
def returns_a_value(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    return tl.load(x_ptr + offs, mask=offs < n)  # E


@triton.jit
def float_plus_pointer(x_ptr, n, BLOCK: tl.constexpr):
    tl.store(x_ptr + 1.5, n)  # E


@triton.jit
def stores_through(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 1.0, mask=offs < n)  # E


@triton.jit
def list_comprehension(x_ptr, n, BLOCK: tl.constexpr):
    xs = [tl.load(x_ptr + i) for i in range(4)]  # E


def _error(kernel, *args, **kwargs) -> str:
    with pytest.raises(CompilationError) as info:
        kernel[(1,)](*args, **kwargs)
    return str(info.value)


def _x():
    return np.random.rand(16).astype(np.float32)


def test_returning_a_value_has_no_pointer_note():
    text = _error(returns_a_value, _x(), 16, BLOCK=16)
    assert text.splitlines()[0] == (
        f"{where(returns_a_value, '# E', 'return')}: error: kernel 'returns_a_value' returns a value; "
        "kernels cannot return values (store results through a pointer)")
    assert NOTE not in text


def test_float_added_to_a_pointer_has_no_pointer_note():
    text = _error(float_plus_pointer, _x(), 16, BLOCK=16)
    assert text.splitlines()[0] == (
        f"{where(float_plus_pointer, '# E', 'x_ptr + 1.5')}: error: invalid operands of type "
        "pointer<fp32> and fp32 for '+'")
    assert NOTE not in text


def test_float_passed_for_the_pointer_names_only_that_argument():
    text = _error(stores_through, 1.5, 16, BLOCK=16)
    assert text.splitlines()[0] == (
        f"{where(stores_through, '# E', 'tl.store')}: error: Unsupported ptr type <(16,), fp32> in "
        "`tl.store`: expected a pointer or a tensor of pointers")
    assert text.splitlines()[-1] == (
        "note: in this launch 'x_ptr' is a scalar (fp32, from a Python float); pass an array or "
        "tensor for an argument the kernel uses as a pointer")


def test_list_comprehension_over_range():
    text = _error(list_comprehension, _x(), 16, BLOCK=16)
    assert text.splitlines()[0] == (
        f"{where(list_comprehension, '# E', 'range(4)')}: error: list comprehensions in @jit "
        "functions can only iterate over a tuple (they are unrolled at compile time), not over "
        "range(4); use a for loop (`for i in range(4):`), or tl.static_range(...) in the loop to "
        "unroll it")


def test_misspelled_constexpr_keyword_is_named_with_a_suggestion():
    with pytest.raises(KernelArgumentError) as info:
        stores_through[(1,)](_x(), 16, BLOKC=16)
    site = where(stores_through, "def stores_through", "def").rsplit(":", 1)[0]
    assert str(info.value) == (
        f"kernel 'stores_through' ({site}): missing 'BLOCK'; unexpected keyword argument 'BLOKC' "
        "(did you mean 'BLOCK'?). Its parameters are (x_ptr, n, BLOCK: constexpr)")


@triton.jit
def where_on_ints(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.where(offs % 2, 1.0, 2.0))  # W


def test_language_warnings_name_the_kernel_line():
    x = _x()
    with pytest.warns(UserWarning) as record:
        where_on_ints[(1,)](x, BLOCK=16)
    (w,) = [r for r in record if "tl.where" in str(r.message)]
    path, line, _ = where(where_on_ints, "# W", "tl.where").rsplit(":", 2)
    assert (w.filename, w.lineno) == (path, int(line))
    assert str(w.message) == ("tl.where with a non-boolean condition is deprecated and will error out in a "
                              "future triton release. Got int32")
    np.testing.assert_array_equal(x, np.tile([2.0, 1.0], 8).astype(np.float32))
