"""Core builtins of `tl`: program ids, tile creation, shape operations, conversions,
memory access, selection, elementwise min/max and `dot` (Triton 3.6 names, signatures
and defaults). Each unwraps constexpr arguments and hands the work to the Semantic.
"""
from __future__ import annotations

from . import dtypes as T
from .constexpr import constexpr, unwrap_constexpr
from .core import PropagateNan, builtin
from .semantic_arith import optional_tensor
from .semantic_reduce import wrap_axis

U = unwrap_constexpr


def _shape_args(shape: tuple) -> list:
    """`f(x, 32, 32)` and `f(x, (32, 32))` both mean the shape (32, 32)."""
    shape = U(shape)
    if len(shape) == 1 and isinstance(U(shape[0]), (list, tuple)):
        shape = U(shape[0])
    return [U(s) for s in shape]


# ---------------------------------------------------------------------- programming model
@builtin
def program_id(sem, axis):
    """The id of this program instance along grid `axis` (0, 1 or 2), an int32 scalar."""
    return sem.program_id(U(axis))


@builtin
def num_programs(sem, axis):
    """The number of program instances along grid `axis` (0, 1 or 2), an int32 scalar."""
    return sem.num_programs(U(axis))


# ---------------------------------------------------------------------- creation
@builtin
def arange(sem, start, end):
    """int32 values in [start, end); `end - start` must be a power of 2."""
    return sem.arange(U(start), U(end))


@builtin
def full(sem, shape, value, dtype):
    """A tensor of `shape` (powers of 2) filled with scalar `value` of `dtype`."""
    return sem.full(_shape_args((shape,)), value, U(dtype))


# ---------------------------------------------------------------------- shapes
@builtin
def broadcast(sem, input, other):
    """`input` and `other` broadcast to their common shape."""
    return sem.broadcast_impl_value(sem.to_tensor(U(input)), sem.to_tensor(U(other)), "broadcast")


@builtin
def broadcast_to(sem, input, *shape):
    """`input` broadcast to `shape` (given as a tuple or as separate ints)."""
    shape = _shape_args(shape)
    T.validate_block_shape(shape)
    return sem.broadcast_impl_shape(sem.to_tensor(U(input)), shape)


@builtin
def expand_dims(sem, input, axis):
    """`input` with new length-1 axes at `axis` (an int or a sequence; indices into the result)."""
    input = sem.to_tensor(U(input))
    axis = U(axis)
    axes = list(axis) if isinstance(axis, (list, tuple)) else [axis]
    new_ndim = len(input.shape) + len(axes)
    axes = [wrap_axis(U(a), new_ndim) for a in axes]
    if len(set(axes)) != len(axes):
        raise ValueError(f"expand_dims received duplicate axes, normalized axes = {axes}")
    for a in sorted(axes):
        input = sem.expand_dims(input, a)
    return input


@builtin
def reshape(sem, input, *shape, can_reorder=False):
    """`input` with a new shape of the same number of elements (powers of 2)."""
    return sem.reshape(sem.to_tensor(U(input)), _shape_args(shape), bool(U(can_reorder)))


@builtin
def view(sem, input, *shape):
    """Deprecated: `reshape(input, shape, can_reorder=True)`."""
    return sem.view(sem.to_tensor(U(input)), _shape_args(shape))


@builtin
def permute(sem, input, *dims):
    """`input` with its axes reordered as `dims`."""
    return sem.permute(sem.to_tensor(U(input)), _shape_args(dims))


@builtin
def trans(sem, input, *dims):
    """Like permute; with no `dims`, swaps the last two axes."""
    return sem.trans(sem.to_tensor(U(input)), _shape_args(dims) if dims else ())


@builtin
def join(sem, a, b):
    """`a` and `b` (broadcast together) stacked along a new last axis of size 2."""
    return sem.join(U(a), U(b))


@builtin
def split(sem, a):
    """The two halves of `a` along its last axis, which must have size 2."""
    return sem.split(sem.to_tensor(U(a)))


@builtin
def cat(sem, input, other, can_reorder=False):
    """Concatenation of two 1-D tensors; the element order is unspecified (can_reorder=True)."""
    return sem.cat(sem.to_tensor(U(input)), sem.to_tensor(U(other)), bool(U(can_reorder)))


@builtin
def item(sem, input):
    """The single element of a one-element tensor, as a scalar."""
    return sem.unsplat(sem.to_tensor(U(input)))


# ---------------------------------------------------------------------- conversion and selection
@builtin
def cast(sem, input, dtype, fp_downcast_rounding=None, bitcast=False):
    """`input` converted to `dtype` (reinterpreting its bits when `bitcast`)."""
    input = sem.to_tensor(U(input))
    if U(bitcast):
        return sem.bitcast(input, U(dtype))
    return sem.cast(input, U(dtype), U(fp_downcast_rounding))


@builtin
def where(sem, condition, x, y):
    """Elementwise `x` where `condition` else `y` (broadcast together)."""
    return sem.where(U(condition), U(x), U(y))


@builtin
def add(sem, x, y, sanitize_overflow=True):
    return sem.add(U(x), U(y), bool(U(sanitize_overflow)))


@builtin
def sub(sem, x, y, sanitize_overflow=True):
    return sem.sub(U(x), U(y), bool(U(sanitize_overflow)))


@builtin
def mul(sem, x, y, sanitize_overflow=True):
    return sem.mul(U(x), U(y), bool(U(sanitize_overflow)))


@builtin
def minimum(sem, x, y, propagate_nan=PropagateNan.NONE):
    """Elementwise minimum; NaN operands are ignored unless propagate_nan=PropagateNan.ALL."""
    x, y = sem.promote_bf16(U(x)), sem.promote_bf16(U(y))
    return sem.minimum(x, y, U(propagate_nan))


@builtin
def maximum(sem, x, y, propagate_nan=PropagateNan.NONE):
    """Elementwise maximum; NaN operands are ignored unless propagate_nan=PropagateNan.ALL."""
    x, y = sem.promote_bf16(U(x)), sem.promote_bf16(U(y))
    return sem.maximum(x, y, U(propagate_nan))


@builtin
def clamp(sem, x, min, max, propagate_nan=PropagateNan.NONE):
    """`x` clamped to [min, max] (floating point only)."""
    x, lo, hi = (sem.promote_bf16(U(v)) for v in (x, min, max))
    return sem.clamp(x, lo, hi, U(propagate_nan))


# ---------------------------------------------------------------------- memory
@builtin
def load(sem, pointer, mask=None, other=None, boundary_check=(), padding_option="", cache_modifier="",
         eviction_policy="", volatile=False):
    """Load from a pointer or a tensor of pointers; masked-off lanes read `other`."""
    return sem.load(U(pointer), optional_tensor(sem, mask), optional_tensor(sem, other), U(boundary_check),
                    U(padding_option), U(cache_modifier), U(eviction_policy), U(volatile))


@builtin
def store(sem, pointer, value, mask=None, boundary_check=(), cache_modifier="", eviction_policy=""):
    """Store `value` (broadcast and cast to the pointee type) where `mask` is true."""
    return sem.store(U(pointer), U(value), optional_tensor(sem, mask), U(boundary_check), U(cache_modifier),
                     U(eviction_policy))


# ---------------------------------------------------------------------- linear algebra
@builtin
def dot(sem, input, other, acc=None, input_precision=None, allow_tf32=None, max_num_imprecise_acc=None,
        out_dtype=T.float32):
    """Matrix product of 2-D tensors (or batched 3-D), accumulated into `acc` if given."""
    return sem.dot(U(input), U(other), U(acc), U(input_precision), U(allow_tf32), U(max_num_imprecise_acc),
                   U(out_dtype))


# ---------------------------------------------------------------------- Python's min()/max() in kernels
def _builtin_min_max(sem, args, propagate_nan, is_max: bool):
    args = [U(a) for a in args]
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        args = [U(a) for a in args[0]]
    if all(not hasattr(a, "handle") for a in args):
        return constexpr(max(args) if is_max else min(args))
    if len(args) < 2:
        raise ValueError(f"{'max' if is_max else 'min'} requires at least 2 values")
    fn = sem.maximum if is_max else sem.minimum
    out = args[0]
    for a in args[1:]:
        out = fn(sem.promote_bf16(out), sem.promote_bf16(a), U(propagate_nan))
    return out


@builtin
def builtin_max(sem, *args, propagate_nan=PropagateNan.NONE):
    """Python's `max(...)` inside a kernel: compile-time on constants, else tl.maximum."""
    return _builtin_min_max(sem, args, propagate_nan, True)


@builtin
def builtin_min(sem, *args, propagate_nan=PropagateNan.NONE):
    """Python's `min(...)` inside a kernel: compile-time on constants, else tl.minimum."""
    return _builtin_min_max(sem, args, propagate_nan, False)

