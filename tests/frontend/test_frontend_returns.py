"""A @jit function that returns a value on some paths and falls off the end on others
(under a runtime condition) compiles, as in Triton 3.6, where the path without a
`return` gives poison: tegula gives an undefined value of the returned type and
structure, made as zeros (null pointers), so the result is deterministic."""
# ruff: noqa: F821  (the kernels below are compiled by tegula, never run as Python)
from __future__ import annotations

import numpy as np
import pytest

import tegula as triton
import tegula.language as tl


@triton.jit
def _return_poison(x):
    a = False  # a tensor (assignment makes numbers tensors), so the `if` is a runtime one
    if a:
        return x


@triton.jit
def _poison_kernel(out):
    tl.store(out, _return_poison(7))


def test_the_path_without_a_return_gives_zero(host_backend):
    # Triton's test_poison_return: the number 7 returned on one path makes the result i32
    out = np.full((), 5, np.int32)
    h = _poison_kernel[(1,)](out)
    assert int(out) == 0
    assert "store %out, " in h.asm["tir"]


@triton.jit
def _maybe_pair(x, c):
    if c > 0:
        return x * 2, x + 1


@triton.jit
def _pair_kernel(io, c):
    offs = tl.arange(0, 8)
    a, b = _maybe_pair(tl.load(io + offs), c)
    tl.store(io + offs, a + b)


def test_tuples_of_tiles(host_backend):
    x = np.arange(8, dtype=np.int32)
    io = x.copy()
    _pair_kernel[(1,)](io, 1)
    np.testing.assert_array_equal(io, 3 * x + 1)
    io = x.copy()
    _pair_kernel[(1,)](io, 0)
    np.testing.assert_array_equal(io, np.zeros(8, np.int32))


@triton.jit
def _maybe_next(p, c):
    if c > 0:
        return p + 1


@triton.jit
def _pointer_kernel(io, c):
    q = _maybe_next(io, c)  # a null pointer when c <= 0, never used then
    if c > 0:
        tl.store(q, 5)


def test_pointers(host_backend):
    io = np.zeros(4, np.int32)
    _pointer_kernel[(1,)](io, 1)
    np.testing.assert_array_equal(io, [0, 5, 0, 0])
    _pointer_kernel[(1,)](io, 0)
    np.testing.assert_array_equal(io, [0, 5, 0, 0])


@triton.jit
def _early_exit(x, c):
    if c > 0:
        if c > 5:
            return x + 100
    else:
        return x - 100


@triton.jit
def _nested_kernel(out, c):
    tl.store(out, _early_exit(tl.load(out), c))


@pytest.mark.parametrize("c, expected", [(7, 101), (3, 0), (0, -99)])
def test_nested_paths(host_backend, c, expected):
    out = np.ones((), np.int32)
    _nested_kernel[(1,)](out, c)
    assert int(out) == expected


@triton.jit
def _maybe_name(c):
    if c > 0:
        return "name"


@triton.jit
def _string_kernel(out, c):
    _maybe_name(c)


@triton.jit
def _maybe_block(p, c):
    if c > 0:
        return tl.make_block_ptr(p, (16,), (1,), (0,), (16,), (0,))


@triton.jit
def _block_kernel(out, c):
    _maybe_block(out, c)


@pytest.mark.parametrize("kernel, what", [(_string_kernel, "'_maybe_name' returns constexpr str ('name')"),
                                          (_block_kernel, "'_maybe_block' returns block_ptr")])
def test_values_that_are_not_tensors_cannot_be_left_undefined(kernel, what):
    with pytest.raises(triton.CompilationError) as info:
        kernel[(1,)](np.zeros(16, np.int32), 3)
    assert (f"{what} on some paths and nothing on others; only tensors, numbers and tuples of them can be "
            "left undefined") in str(info.value)
