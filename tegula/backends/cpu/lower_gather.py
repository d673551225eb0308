"""The CPU lowering of `gather` (`tl.gather`), a mixin of `lower.CpuLowering`.

A gather is a fused value, like a broadcast: element i of the result is element
`src_flat(i)` of the source, where `src_flat` is i's flat index with the coordinate
along the axis replaced by the index value (row-major: out = (o, k, j) with
o < outer, k < index length, j < inner reads source (o, index[i], j)). The source is
materialized first when it is an expensive fused value (each of its elements may be
read many times). An index outside [0, src.shape[axis]) reads source position 0 and
yields zero instead, as the interpreter does, so no index reaches past the buffer.
"""
from __future__ import annotations

import llvmlite.ir as ir

from ...ir.core import Instr
from ...ir.types import element_of, shape_of
from ..llvm.types import I64, constant
from .tiles import axis_split


class GatherOps:
    """Methods of CpuLowering (see `lower.py` for `self.b`, `self.get`, `self.fused`)."""

    def op_gather(self, ins: Instr) -> None:
        src_v, idx_v = ins.operands
        axis = ins.attrs.axis
        _outer, n_src, inner = axis_split(tuple(shape_of(src_v.type)), axis)
        n_idx = tuple(shape_of(idx_v.type))[axis]
        ie = element_of(idx_v.type)
        zero = constant(ins.result.type, 0)
        self.settle(src_v)

        def fill(i):
            b = self.b
            k = self.get(idx_v, i)
            if k.type.width < 64:
                k = b.sext(k, I64) if ie.is_signed else b.zext(k, I64)
            inside = b.icmp_unsigned("<", k, ir.Constant(I64, n_src))
            k = b.select(inside, k, ir.Constant(I64, 0))
            j = b.urem(i, ir.Constant(I64, inner)) if inner > 1 else ir.Constant(I64, 0)
            o = b.udiv(i, ir.Constant(I64, n_idx * inner))
            flat = b.add(b.add(b.mul(o, ir.Constant(I64, n_src * inner)), b.mul(k, ir.Constant(I64, inner))), j)
            return b.select(inside, self.get(src_v, flat), zero)
        self.fused(ins, fill, cost=4 + self.fused_cost(src_v) + self.fused_cost(idx_v))
