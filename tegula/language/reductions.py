"""Reduction and scan builtins: `reduce`, `associative_scan`, `sum`, `max`, `min`,
`argmax`, `argmin`, `xor_sum`, `reduce_or`, `cumsum`, `cumprod`.

Result dtypes follow Triton 3.6's standard library:
- sum / cumsum: integers narrower than 32 bits accumulate in int32 (uint32 when
  unsigned, int1 included) unless `dtype=` is given; cumsum/cumprod widen bf16 to fp32;
- max / min: bf16 is widened to fp32; without indices, anything narrower than 32 bits
  is widened too (fp16 -> fp32, int8/uint8/int16/int1 -> int32);
- argmax / argmin (and return_indices=True) keep the value dtype (bf16 -> fp32) and
  return int32 indices; ties go to the lowest index when tie_break_left.
"""
from __future__ import annotations

from . import dtypes as T
from .constexpr import unwrap_constexpr
from .core import builtin
from .tensor import tensor

U = unwrap_constexpr


def _pick_sum_dtype(in_dtype, dtype):
    if dtype is not None:
        return T.as_dtype(dtype, "sum's dtype")
    if in_dtype.is_int_signed() and in_dtype.int_bitwidth < 32:
        return T.int32
    if in_dtype.is_int_unsigned() and in_dtype.int_bitwidth < 32:
        return T.uint32
    return None


def _input(sem, x) -> tensor:
    x = sem.to_tensor(U(x))
    return x


@builtin
def reduce(sem, input, axis, combine_fn, keep_dims=False):
    """Reduce `input` (a tensor or a tuple of tensors) along `axis` with `combine_fn`."""
    input = U(input)
    inputs = input if isinstance(input, tensor) else tuple(sem.to_tensor(U(t)) for t in input)
    return sem.reduce(inputs, U(axis), U(combine_fn), bool(U(keep_dims)))


@builtin
def associative_scan(sem, input, axis, combine_fn, reverse=False):
    """Inclusive scan of `input` (a tensor or a tuple of tensors) along `axis` with `combine_fn`."""
    input = U(input)
    inputs = input if isinstance(input, tensor) else tuple(sem.to_tensor(U(t)) for t in input)
    return sem.scan(inputs, U(axis), U(combine_fn), bool(U(reverse)))


@builtin
def sum(sem, input, axis=None, keep_dims=False, dtype=None):
    """Sum of `input` along `axis` (all elements when None)."""
    x = _input(sem, input)
    out_dtype = _pick_sum_dtype(x.dtype, U(dtype))
    if out_dtype is not None:
        x = sem.cast(x, out_dtype)
    return sem.reduce(x, U(axis), sem.combine_add(), bool(U(keep_dims)))


def _max_min(sem, input, axis, return_indices, tie_break_left, keep_dims, is_max: bool):
    x = sem.promote_bf16(_input(sem, input))
    axis, keep_dims = U(axis), bool(U(keep_dims))
    if U(return_indices):
        body = sem.combine_arg(is_max, bool(U(tie_break_left)))
        return sem.reduce_with_indices(x, axis, body, keep_dims)
    if x.dtype.primitive_bitwidth < 32:
        if x.dtype.is_floating():
            x = sem.cast(x, T.float32)
        elif x.dtype.is_int():
            x = sem.cast(x, T.int32)
        else:
            raise TypeError(f"tl.{'max' if is_max else 'min'} does not apply to {x.dtype}")
    return sem.reduce(x, axis, sem.combine_max() if is_max else sem.combine_min(), keep_dims)


@builtin
def max(sem, input, axis=None, return_indices=False, return_indices_tie_break_left=True, keep_dims=False):
    """Maximum of `input` along `axis`; with return_indices, (values, int32 indices)."""
    return _max_min(sem, input, axis, return_indices, return_indices_tie_break_left, keep_dims, True)


@builtin
def min(sem, input, axis=None, return_indices=False, return_indices_tie_break_left=True, keep_dims=False):
    """Minimum of `input` along `axis`; with return_indices, (values, int32 indices)."""
    return _max_min(sem, input, axis, return_indices, return_indices_tie_break_left, keep_dims, False)


@builtin
def argmax(sem, input, axis, tie_break_left=True, keep_dims=False):
    """int32 index of the maximum along `axis` (the first one on ties when tie_break_left)."""
    return _max_min(sem, input, axis, True, tie_break_left, keep_dims, True)[1]


@builtin
def argmin(sem, input, axis, tie_break_left=True, keep_dims=False):
    """int32 index of the minimum along `axis` (the first one on ties when tie_break_left)."""
    return _max_min(sem, input, axis, True, tie_break_left, keep_dims, False)[1]


def _int_only(x: tensor, name: str) -> None:
    if not x.dtype.is_int():
        raise TypeError(f"{name} only supported for integers, got {x.dtype}")


@builtin
def xor_sum(sem, input, axis=None, keep_dims=False):
    """Bitwise xor of `input` along `axis` (integers only)."""
    x = _input(sem, input)
    _int_only(x, "xor_sum")
    return sem.reduce(x, U(axis), sem.combine_xor(), bool(U(keep_dims)))


@builtin
def reduce_or(sem, input, axis, keep_dims=False):
    """Bitwise or of `input` along `axis` (integers only)."""
    x = _input(sem, input)
    _int_only(x, "reduce_or")
    return sem.reduce(x, U(axis), sem.combine_or(), bool(U(keep_dims)))


@builtin
def cumsum(sem, input, axis=0, reverse=False, dtype=None):
    """Inclusive prefix sum along `axis` (from the end when `reverse`)."""
    x = sem.promote_bf16(_input(sem, input))
    out_dtype = _pick_sum_dtype(x.dtype, U(dtype))
    if out_dtype is not None:
        x = sem.cast(x, out_dtype)
    return sem.scan(x, U(axis), sem.combine_add(), bool(U(reverse)))


@builtin
def cumprod(sem, input, axis=0, reverse=False):
    """Inclusive prefix product along `axis` (from the end when `reverse`)."""
    x = sem.promote_bf16(_input(sem, input))
    return sem.scan(x, U(axis), sem.combine_mul(), bool(U(reverse)))
