"""Shapes: tile creation (`arange`, `full`), broadcasting, and the shape operations
(expand_dims, reshape, permute, join, split, cat).

Broadcasting follows Triton: a scalar is splatted; a lower-rank tile gets leading
length-1 axes; length-1 axes stretch. Every step is an explicit IR op (SPLAT,
EXPAND_DIMS, BROADCAST) because the IR's elementwise ops need identical shapes.
"""
from __future__ import annotations

from typing import Optional, Sequence

from .. import ir
from ..ir import attrs as A
from . import dtypes as T
from .constexpr import is_power_of_two, unwrap_constexpr
from .dtypes import block_type, dtype, validate_block_shape
from .semantic_base import SemanticBase, fmt_shape, python_number
from .tensor import tensor


class ShapeMixin(SemanticBase):
    # ------------------------------------------------------------------ creation
    def program_id(self, axis: int) -> tensor:
        if axis not in (0, 1, 2):
            raise ValueError(f"program_id axis must be 0, 1, or 2 but got {axis}")
        return self.emit_tensor(ir.Op.PROGRAM_ID, attrs=A.AxisAttrs(axis))

    def num_programs(self, axis: int) -> tensor:
        if axis not in (0, 1, 2):
            raise ValueError(f"num_programs axis must be 0, 1, or 2 but got {axis}")
        return self.emit_tensor(ir.Op.NUM_PROGRAMS, attrs=A.AxisAttrs(axis))

    def arange(self, start: int, end: int) -> tensor:
        if not isinstance(start, int) or not isinstance(end, int) or isinstance(start, bool):
            raise ValueError("arange's arguments must be of type tl.constexpr")
        if start >> 32 or end >> 32:
            raise ValueError(f"arange must fit in int32, got arange({start}, {end})")
        if end <= start:
            raise ValueError(f"arange's end argument must be greater than the start argument, "
                             f"got arange({start}, {end})")
        n = end - start
        if not is_power_of_two(n):
            raise ValueError(f"arange's range must be a power of 2, got {n}")
        validate_block_shape([n])
        return self.emit_tensor(ir.Op.ARANGE, attrs=A.RangeAttrs(start, end))

    def full(self, shape: Sequence[int], value, dtype: dtype) -> tensor:
        shape = [unwrap_constexpr(s) for s in shape]
        validate_block_shape(shape)
        dtype = T.as_dtype(dtype, "tl.full's dtype")
        value = python_number(unwrap_constexpr(value))
        if isinstance(value, tensor):
            if value.type.is_block():
                raise ValueError(f"tl.full's value must be a scalar, got a tensor of shape "
                                 f"{fmt_shape(self.shape_of(value))}")
            return self.splat(self.cast(value, dtype), shape)
        return self.tile_constant(value, dtype, shape)

    # ------------------------------------------------------------------ broadcasting
    def broadcast_impl_shape(self, input: tensor, shape: Sequence[int]) -> tensor:
        shape = tuple(int(unwrap_constexpr(s)) for s in shape)
        if not input.type.is_block():
            return self.splat(input, shape)
        src = self.shape_of(input)
        if len(src) != len(shape):
            raise ValueError(f"Cannot broadcast, rank mismatch: {fmt_shape(src)}, {fmt_shape(shape)}")
        if src == shape:
            return input
        for i, d in enumerate(src):
            if shape[i] != d and d != 1:
                raise ValueError(f"Cannot broadcast, the expanded size of the tensor ({shape[i]}) must match "
                                 f"the existing size ({d}) at non-singleton dimension {i}: "
                                 f"{fmt_shape(src)}, {fmt_shape(shape)}")
        validate_block_shape(shape)
        return self.emit_tensor(ir.Op.BROADCAST, input, attrs=A.ShapeAttrs(shape),
                                type=block_type(input.dtype, list(shape)))

    def broadcast_shapes(self, shapes: Sequence[tuple[int, ...]],
                         op: Optional[str] = None) -> tuple[int, ...]:
        """The common shape of `shapes` (`()` for scalars), or a ValueError naming them."""
        rank = max((len(s) for s in shapes), default=0)
        out = [1] * rank
        for s in shapes:
            padded = (1,) * (rank - len(s)) + tuple(s)
            for i, d in enumerate(padded):
                if d == out[i] or d == 1:
                    continue
                if out[i] == 1:
                    out[i] = d
                    continue
                what = f" for '{op}'" if op else ""
                listed = " and ".join(fmt_shape(x) for x in shapes)
                raise ValueError(f"incompatible shapes{what}: {listed} (dimension {i}: {out[i]} vs {d})")
        return tuple(out)

    def broadcast_to_shape(self, x: tensor, shape: tuple[int, ...]) -> tensor:
        """Bring `x` to `shape` (already known to be compatible): splat, leading axes, stretch."""
        if not shape:
            return x
        if not x.type.is_block():
            return self.splat(x, shape)
        while len(self.shape_of(x)) < len(shape):
            x = self.expand_dims(x, 0)
        return self.broadcast_impl_shape(x, shape)

    def broadcast_tensors(self, *xs: tensor, op: Optional[str] = None) -> tuple[tensor, ...]:
        shape = self.broadcast_shapes([self.shape_of(x) for x in xs], op)
        return tuple(self.broadcast_to_shape(x, shape) for x in xs)

    def broadcast_impl_value(self, lhs: tensor, rhs: tensor,
                             op: Optional[str] = None) -> tuple[tensor, tensor]:
        return self.broadcast_tensors(lhs, rhs, op=op)

    # ------------------------------------------------------------------ shape operations
    def expand_dims(self, input: tensor, axis: int) -> tensor:
        if not input.type.is_block():
            return self.splat(input, [1])
        rank = len(self.shape_of(input))
        if not -(rank + 1) <= axis <= rank:
            raise ValueError(f"invalid axis {axis}. Expected {-(rank + 1)} <= axis < {rank + 1}")
        axis = axis if axis >= 0 else axis + rank + 1
        return self.emit_tensor(ir.Op.EXPAND_DIMS, input, attrs=A.ExpandDimsAttrs(axis))

    def reshape(self, input: tensor, dst_shape: Sequence[int], can_reorder: bool = False) -> tensor:
        dst_shape = tuple(int(unwrap_constexpr(s)) for s in dst_shape)
        if not dst_shape:
            return self.unsplat(input)
        validate_block_shape(dst_shape)
        numel = 1
        for d in dst_shape:
            numel *= d
        src = self.shape_of(input)
        if input.numel.value != numel:
            raise ValueError(f"reshape() cannot change total number of elements in tensor: "
                             f"{fmt_shape(src)} -> {fmt_shape(dst_shape)}")
        if not input.type.is_block():
            return self.splat(input, dst_shape)
        if src == dst_shape:
            return input
        return self.emit_tensor(ir.Op.RESHAPE, input, attrs=A.ShapeAttrs(dst_shape, bool(can_reorder)),
                                type=block_type(input.dtype, list(dst_shape)))

    def view(self, input: tensor, dst_shape: Sequence[int]) -> tensor:
        self.warn("view is deprecated, please use reshape with can_reorder being true.", DeprecationWarning)
        return self.reshape(input, dst_shape, can_reorder=True)

    def unsplat(self, input: tensor) -> tensor:
        """The single element of a one-element tile, as a scalar."""
        if not input.type.is_block():
            return input
        if input.numel.value != 1:
            raise ValueError(f"can only convert a single-element tensor to a scalar, got shape "
                             f"{fmt_shape(self.shape_of(input))}")
        if len(self.shape_of(input)) > 1:
            input = self.reshape(input, [1])
        # A one-element reduce is the IR's way to drop the last axis.
        (out,) = self.reduction([input], 0, lambda args: [args[0]])
        return out

    def permute(self, input: tensor, dims: Sequence[int]) -> tensor:
        dims = tuple(int(unwrap_constexpr(d)) for d in dims)
        shape = self.shape_of(input)
        if len(shape) != len(dims):
            raise ValueError(f"permute dims must have the same length as input shape: "
                             f"{fmt_shape(shape)} and dims {dims}")
        if sorted(dims) != list(range(len(dims))):
            raise ValueError(f"permute dims must be a permutation of 0, 1, ..., n-1, but were {dims}")
        if dims == tuple(range(len(dims))):
            return input
        return self.emit_tensor(ir.Op.PERMUTE, input, attrs=A.PermuteAttrs(dims))

    def trans(self, input: tensor, dims: Sequence[int] = ()) -> tensor:
        if not dims:
            n = len(self.shape_of(input))
            if n < 2:
                raise ValueError("tl.trans invoked with a 0- or 1-dimensional tensor")
            dims = list(range(n - 2)) + [n - 1, n - 2]
        return self.permute(input, dims)

    def join(self, a: tensor, b: tensor) -> tensor:
        a, b = self.to_tensor(a), self.to_tensor(b)
        if a.dtype != b.dtype:
            raise TypeError(f"join operands must have the same dtype, got {a.dtype} and {b.dtype}")
        a, b = self.broadcast_impl_value(a, b, "join")
        if not a.type.is_block():
            a, b = self.expand_dims(a, 0), self.expand_dims(b, 0)
            return self.reshape(self.emit_tensor(ir.Op.JOIN, a, b), [2])
        return self.emit_tensor(ir.Op.JOIN, a, b)

    def split(self, a: tensor) -> tuple[tensor, tensor]:
        shape = self.shape_of(a)
        if not shape or shape[-1] != 2:
            raise ValueError(f"split needs a tensor whose last dimension is 2, got shape {fmt_shape(shape)}")
        was_rank_1 = len(shape) == 1
        if was_rank_1:
            a = self.expand_dims(a, 0)
        ins = self.builder.create(ir.Op.SPLIT, [a.handle])
        lhs, rhs = (self.wrap(r) for r in ins.results)
        if was_rank_1:
            lhs, rhs = self.unsplat(lhs), self.unsplat(rhs)
        return lhs, rhs

    def cat(self, lhs: tensor, rhs: tensor, can_reorder: bool) -> tensor:
        if not can_reorder:
            raise ValueError("tl.cat is only implemented with can_reorder=True (as in Triton)")
        if len(self.shape_of(lhs)) != 1 or self.shape_of(lhs) != self.shape_of(rhs):
            raise ValueError(f"tl.cat needs two 1-D tensors of the same size, got "
                             f"{fmt_shape(self.shape_of(lhs))} and {fmt_shape(self.shape_of(rhs))}")
        # Interleaving is a valid reordering of the concatenation.
        joined = self.join(lhs, rhs)
        return self.reshape(joined, [2 * self.shape_of(lhs)[0]], can_reorder=True)
