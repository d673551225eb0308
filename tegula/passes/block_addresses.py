"""The address code of a block of a strided tensor, shared by the rewrites of tensor
descriptors and block pointers into pointers (`descriptors_to_pointers`,
`block_pointers_to_pointers`): in the instruction order the frontend emitted it before
either was an op, so both rewrites reproduce its text exactly.

    idx_d   = offset_d + arange(block_d)                    (i32, expanded to rank n)
    ptrs    = base + sum_d i64(idx_d) * stride_d            (broadcast to the block)
    inside  = AND over the checked dims d of (idx_d >= 0 and i64(idx_d) < shape_d)
"""
from __future__ import annotations

from typing import Optional, Sequence

from ..ir import attrs as A
from ..ir.builder import Builder
from ..ir.core import Value
from ..ir.ops import Op
from ..ir.types import I32, I64, shape_of


def _broadcast(b: Builder, v: Value, shape: tuple[int, ...]) -> Value:
    return v if shape_of(v.type) == shape else b.broadcast(v, shape)


def _combine(b: Builder, op: Op, x: Optional[Value], y: Value) -> Value:
    """`x op y` with both broadcast to their common shape (y alone when x is None)."""
    if x is None:
        return y
    shape = tuple(max(p, q) for p, q in zip(shape_of(x.type), shape_of(y.type)))
    return b.op1(op, _broadcast(b, x, shape), _broadcast(b, y, shape))


def block_addresses(b: Builder, block: tuple[int, ...], base: Value, shape64: Sequence[Value],
                    strides: Sequence[Value], offsets: Sequence[Value],
                    checked: Sequence[int]) -> tuple[Value, Optional[Value]]:
    """The pointers of the block at `offsets` (i32 scalars) of the tensor at `base` with
    `shape64` (i64) and `strides` (i64), and its inside mask along the `checked`
    dimensions (None when none is checked)."""
    rank = len(block)
    addr: Optional[Value] = None
    inside: Optional[Value] = None
    for d, size in enumerate(block):
        idx = b.op1(Op.ADD, b.op1(Op.ARANGE, attrs=A.RangeAttrs(0, size)), b.splat(offsets[d], (size,)))
        for _ in range(d):
            idx = b.op1(Op.EXPAND_DIMS, idx, attrs=A.ExpandDimsAttrs(0))
        for _ in range(rank - 1 - d):  # a new last axis
            idx = b.op1(Op.EXPAND_DIMS, idx, attrs=A.ExpandDimsAttrs(len(shape_of(idx.type))))
        dims = shape_of(idx.type)
        wide = b.cast(idx, I64)
        addr = _combine(b, Op.ADD, addr, b.op1(Op.MUL, wide, b.splat(strides[d], dims)))
        if d in checked:
            nonneg = b.op1(Op.GE, idx, b.splat(b.constant(0, I32), dims))
            below = b.op1(Op.LT, wide, b.splat(shape64[d], dims))
            inside = _combine(b, Op.AND, inside, b.op1(Op.AND, nonneg, below))
    addr = _broadcast(b, addr, block)
    if inside is not None:
        inside = _broadcast(b, inside, block)
    return b.op1(Op.ADDPTR, b.splat(base, block), addr), inside
