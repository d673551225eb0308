"""What layout assignment produces (`LayoutPlan`: each tile value's layout, the layout
each instruction consumes each operand in, the vector widths and tensor-core choices)
and the facts about values it shares with the lowering (`is_tile`,
`is_rematerializable`: which values are cheap to recompute in another layout). The
assignment itself is `assign_layouts`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from ...ir.core import Instr, Value
from ...ir.ops import OP_INFO, Kind, Op
from ...ir.types import TileType
from .linear_layout import LinearLayout
from .mma import MmaChoice

Layout = Optional[LinearLayout]

# ops whose value is cheap to recompute in another layout (no memory, no reduction)
REMAT_OPS = frozenset({Op.CONSTANT, Op.ARANGE, Op.SPLAT, Op.EXPAND_DIMS, Op.BROADCAST,
                       Op.RESHAPE, Op.PERMUTE})

@dataclass
class LayoutPlan:
    num_warps: int
    layouts: dict[Value, LinearLayout] = field(default_factory=dict)
    operand_layouts: dict[Instr, list[Layout]] = field(default_factory=dict)
    vec: dict[Instr, int] = field(default_factory=dict)
    # the dimension along which each access's `vec` elements are contiguous in memory;
    # its layout may hold consecutive registers along another one (a column-major
    # operand loaded where a dot reads it), and those are not one vector
    vec_dim: dict[Instr, int] = field(default_factory=dict)
    # the tensor-core instruction of each dot computed on tensor cores
    mma: dict[Instr, MmaChoice] = field(default_factory=dict)
    # the axis analysis the layouts were chosen from; the lowering reads constancy
    # from it to compute values that are equal across registers only once
    axis: Mapping[Value, Any] = field(default_factory=dict)
    # the async copies whose 16-byte cp.async go through L1 (`copy_caching`)
    l1_copies: set[Instr] = field(default_factory=set)

    def layout(self, v: Value) -> Layout:
        return self.layouts.get(v)

    def required(self, ins: Instr, k: int) -> Layout:
        req = self.operand_layouts.get(ins)
        return req[k] if req is not None and k < len(req) else self.layouts.get(ins.operands[k])


def is_tile(v: Value) -> bool:
    return isinstance(v.type, TileType)


def is_rematerializable(v: Value, memo: Optional[dict[Value, bool]] = None) -> bool:
    """Whether `v` is computed only from scalars by sources, view ops and pure
    elementwise ops, so recomputing it in another layout costs only ALU work."""
    memo = {} if memo is None else memo
    if v in memo:
        return memo[v]
    ins = v.owner
    ok = False
    if isinstance(ins, Instr) and not ins.regions:
        info = OP_INFO[ins.op]
        if (ins.op in REMAT_OPS or (info.kind is Kind.ELEMENTWISE and info.pure) or ins.op is Op.HINT
                or ins.op is Op.CONVERT_LAYOUT):
            memo[v] = True  # provisional, for the recursion
            ok = all(not is_tile(o) or is_rematerializable(o, memo) for o in ins.operands)
    memo[v] = ok
    return ok
