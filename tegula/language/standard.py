"""Triton's standard library (`tl.cdiv`, `tl.sigmoid`, `tl.softmax`, `tl.zeros`, ...),
written over the Semantic instead of as @jit functions.

`cdiv` on two compile-time ints is evaluated with Python semantics and gives a
constexpr; on tensors it is `(x + (div - 1)) // div` with C-style division, as in Triton.
"""
from __future__ import annotations

from .constexpr import constexpr, unwrap_constexpr
from .constexpr_function import constexpr_function
from .core import builtin
from .tensor import tensor

U = unwrap_constexpr


def _is_runtime(*xs) -> bool:
    return any(isinstance(U(x), tensor) for x in xs)


@builtin
def cdiv(sem, x, div):
    """Ceiling division of `x` by `div`."""
    x, div = U(x), U(div)
    if not _is_runtime(x, div):
        return constexpr((x + (div - 1)) // div)
    return sem.floordiv(sem.add(x, sem.sub(div, 1) if isinstance(div, tensor) else div - 1), div)


@builtin
def sigmoid(sem, x):
    """1 / (1 + exp(-x)) (fp32/fp64, as tl.exp)."""
    from .math import exp

    x = sem.to_tensor(U(x))
    return sem.truediv(1, sem.add(1, exp.impl(sem, sem.minus(x))))


@builtin
def softmax(sem, x, dim=None, keep_dims=False, ieee_rounding=False):
    """exp(x - max(x)) / sum(exp(x - max(x))) along `dim` (0 when None)."""
    from .math import exp, fdiv
    from .reductions import max as tl_max
    from .reductions import sum as tl_sum

    x = sem.to_tensor(U(x))
    dim = 0 if U(dim) is None else U(dim)
    z = sem.sub(x, tl_max.impl(sem, x, dim, keep_dims=keep_dims))
    num = exp.impl(sem, z)
    den = tl_sum.impl(sem, num, dim, keep_dims=keep_dims)
    return fdiv.impl(sem, num, den, ieee_rounding)


@builtin
def zeros(sem, shape, dtype):
    """A tensor of `shape` filled with 0 of `dtype`."""
    from .core_builtins import full

    return full.impl(sem, shape, 0, dtype)


@builtin
def zeros_like(sem, input):
    """Zeros of the shape and dtype of `input`."""
    x = sem.to_tensor(U(input))
    return sem.tile_constant(0, x.dtype, [int(s) for s in x.shape])


@builtin
def ravel(sem, x, can_reorder=False):
    """`x` flattened to 1-D."""
    x = sem.to_tensor(U(x))
    return sem.reshape(x, [x.numel.value], bool(U(can_reorder)))


@builtin
def swizzle2d(sem, i, j, size_i, size_j, size_g):
    """Row-major (i, j) of a size_i x size_j matrix -> indices that walk groups of
    `size_g` rows column by column (the grouped ordering of the matmul tutorial)."""

    def op(name, a, b):
        if not _is_runtime(a, b):
            python = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "//": lambda: a // b,
                      "%": lambda: a % b, "min": lambda: a if a < b else b}
            return python[name]()
        fns = {"+": sem.add, "-": sem.sub, "*": sem.mul, "//": sem.floordiv, "%": sem.mod, "min": sem.minimum}
        return fns[name](a, b)

    i, j, size_i, size_j, size_g = (U(v) for v in (i, j, size_i, size_j, size_g))
    ij = op("+", op("*", i, size_j), j)
    size_gj = op("*", size_g, size_j)
    group_id = op("//", ij, size_gj)
    off_i = op("*", group_id, size_g)
    size_g = op("min", op("-", size_i, off_i), size_g)
    ij = op("%", ij, size_gj)
    new_i = op("+", off_i, op("%", ij, size_g))
    new_j = op("//", ij, size_g)
    return new_i, new_j


@builtin
def interleave(sem, a, b):
    """The elements of `a` and `b` alternating along the last axis."""
    c = sem.join(U(a), U(b))
    shape = [int(s) for s in c.shape]
    if len(shape) == 1:
        return c
    return sem.reshape(c, shape[:-2] + [2 * shape[-2]])


@constexpr_function
def _log2(i: int) -> int:
    """floor(log2(i)) of a compile-time int (Triton's helper; PyTorch's Inductor uses it
    in its sort and scan kernels)."""
    log2 = 0
    n = int(i)
    while n > 1:
        n >>= 1
        log2 += 1
    return log2
