"""Reductions and scans: REDUCE / SCAN ops whose combine function is a region.

A combine region has 2·n scalar arguments (the accumulated values, then the new ones)
and yields n scalars of the inputs' element types. The region body is either built here
(sum, max, argmax, ...: see `combine_*`) or comes from the kernel's own @jit function,
inlined through the frontend's `call_function` hook. `axis=None` reduces over all
elements: the inputs are first reshaped to 1-D (the order may change, which a reduction
does not observe).
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from .. import ir
from ..ir import attrs as A
from . import dtypes as T
from .constexpr import unwrap_constexpr
from .core import PropagateNan
from .semantic_base import SemanticBase, fmt_shape
from .tensor import tensor

Body = Callable[[list[tensor]], list[tensor]]


def wrap_axis(axis: int, ndim: int) -> int:
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise TypeError(f"axis must be an int, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise ValueError(f"invalid axis {axis}. Expected {-ndim} <= axis < {ndim}")
    return axis if axis >= 0 else axis + ndim


class ReduceMixin(SemanticBase):
    def _check_same_shapes(self, inputs: Sequence[tensor], what: str) -> tuple[int, ...]:
        shape = self.shape_of(inputs[0])
        for t in inputs[1:]:
            if self.shape_of(t) != shape:
                raise ValueError(f"all {what} inputs must have the same shape, got "
                                 f"{' and '.join(fmt_shape(self.shape_of(x)) for x in inputs)}")
        if not shape:
            raise ValueError(f"{what} needs a tensor of rank >= 1, got a scalar")
        return shape

    def reduction(self, inputs: Sequence[tensor], axis: Optional[int], body: Body) -> tuple[tensor, ...]:
        """REDUCE `inputs` along `axis` (None: all elements) with the region `body` builds."""
        inputs = [self.to_tensor(t) for t in inputs]
        if axis is None:
            inputs = [self.reshape(t, [t.numel.value], can_reorder=True) if t.type.is_block() else t
                      for t in inputs]
            axis = 0
        shape = self._check_same_shapes(inputs, "reduction")
        axis = wrap_axis(axis, len(shape))
        elem = [t.dtype for t in inputs]
        region = self.build_region(elem * 2, body, elem, "the reduction's combine_fn")
        ins = self.builder.create(ir.Op.REDUCE, [t.handle for t in inputs], A.ReduceAttrs(axis),
                                  regions=[region])
        return tuple(self.wrap(r) for r in ins.results)

    def associative_scan(self, inputs: Sequence[tensor], axis: int, body: Body,
                         reverse: bool) -> tuple[tensor, ...]:
        inputs = [self.to_tensor(t) for t in inputs]
        shape = self._check_same_shapes(inputs, "scan")
        axis = wrap_axis(axis, len(shape))
        elem = [t.dtype for t in inputs]
        region = self.build_region(elem * 2, body, elem, "the scan's combine_fn")
        ins = self.builder.create(ir.Op.SCAN, [t.handle for t in inputs], A.ScanAttrs(axis, bool(reverse)),
                                  regions=[region])
        return tuple(self.wrap(r) for r in ins.results)

    # ------------------------------------------------------------------ user combine functions
    def combine_fn_body(self, combine_fn: Any) -> Body:
        return lambda args: self.call_combine(combine_fn, args)

    def reduce(self, inputs: Any, axis: Any, combine: Any, keep_dims: bool = False) -> Any:
        """tl.reduce: `inputs` a tensor or a tuple of tensors; `combine` a combine function
        or an already built region body (a `Body`). Returns a tensor or a tuple like `inputs`."""
        single = isinstance(inputs, tensor)
        inputs = [inputs] if single else list(inputs)
        axis = unwrap_constexpr(axis)
        body = combine if getattr(combine, "_tegula_body", False) else self.combine_fn_body(combine)
        rank = len(self.shape_of(self.to_tensor(inputs[0])))
        if axis is not None:
            axis = wrap_axis(axis, rank)
        results = self.reduction(inputs, axis, body)
        if unwrap_constexpr(keep_dims):
            if axis is not None:
                results = tuple(self.expand_dims(r, axis) for r in results)
            else:
                expanded = []
                for r in results:
                    for _ in range(rank):
                        r = self.expand_dims(r, 0)
                    expanded.append(r)
                results = tuple(expanded)
        return results[0] if single else results

    def scan(self, inputs: Any, axis: Any, combine: Any, reverse: bool = False) -> Any:
        single = isinstance(inputs, tensor)
        inputs = [inputs] if single else list(inputs)
        body = combine if getattr(combine, "_tegula_body", False) else self.combine_fn_body(combine)
        results = self.associative_scan(inputs, unwrap_constexpr(axis), body, bool(unwrap_constexpr(reverse)))
        return results[0] if single else results

    # ------------------------------------------------------------------ built-in combine regions
    def combine_binary(self, fn: Callable[[tensor, tensor], tensor]) -> Body:
        def body(args: list[tensor]) -> list[tensor]:
            return [fn(args[0], args[1])]

        body._tegula_body = True
        return body

    def combine_add(self) -> Body:
        return self.combine_binary(lambda a, b: self.add(a, b, sanitize_overflow=False))

    def combine_mul(self) -> Body:
        return self.combine_binary(lambda a, b: self.mul(a, b, sanitize_overflow=False))

    def combine_max(self) -> Body:
        return self.combine_binary(lambda a, b: self.maximum(a, b, PropagateNan.NONE))

    def combine_min(self) -> Body:
        return self.combine_binary(lambda a, b: self.minimum(a, b, PropagateNan.NONE))

    def combine_xor(self) -> Body:
        return self.combine_binary(self.xor_)

    def combine_or(self) -> Body:
        return self.combine_binary(self.or_)

    def combine_arg(self, is_max: bool, tie_break_left: bool) -> Body:
        """(value, index) pairs, as Triton's _argmax/_argmin_combine: the accumulated pair
        wins when strictly better, or on a tie when its index is lower (tie_break_left).
        A NaN never compares better, so which pair wins follows the combine order."""

        def body(args: list[tensor]) -> list[tensor]:
            v1, i1, v2, i2 = args
            better = self.greater_than(v1, v2) if is_max else self.less_than(v1, v2)
            if tie_break_left:
                tie = self.logical_and(self.equal(v1, v2), self.less_than(i1, i2))
                better = self.logical_or(better, tie)
            return [self.where(better, v1, v2), self.where(better, i1, i2)]

        body._tegula_body = True
        return body

    def reduce_with_indices(self, input: tensor, axis: Optional[int], body: Body,
                            keep_dims: bool = False) -> tuple[tensor, tensor]:
        """(values, indices) of a (value, index) reduction along `axis` (None: all elements,
        indices into the flattened tensor)."""
        input = self.to_tensor(input)
        if axis is None:
            input = self.reshape(input, [input.numel.value])
            axis = 0
        shape = self.shape_of(input)
        if not shape:
            raise ValueError("a reduction with indices needs a tensor of rank >= 1, got a scalar")
        axis = wrap_axis(axis, len(shape))
        index = self.arange(0, shape[axis])
        if len(shape) > 1:
            for d in range(len(shape)):
                if d != axis:
                    index = self.expand_dims(index, d)
            index = self.broadcast_impl_shape(index, shape)
        values, indices = self.reduce((input, index), axis, body, keep_dims)
        return values, indices

    def promote_bf16(self, x: tensor) -> tensor:
        """Triton widens bf16 to fp32 before comparisons and most reductions."""
        x = self.to_tensor(x)
        return self.cast(x, T.float32) if x.dtype == T.bfloat16 else x
