"""Lowering of `convert_layout`: the operand's registers rearranged into the layout of
the result type's encoding — a register renaming when each thread already holds its
elements, a recomputation in the new layout for cheap index arithmetic, else a trip
through shared-memory scratch (`convert.convert_value` decides)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...ir.core import Instr
from ...ir.ops import Op
from .registry import handles

if TYPE_CHECKING:
    from .lower_kernel import KernelLowering


@handles(Op.CONVERT_LAYOUT)
def convert_layout(lw: "KernelLowering", ins: Instr) -> None:
    src, res = ins.operands[0], ins.results[0]
    want = lw.plan.layouts[res]
    tile = lw.tile(src)
    lw.define(res, tile.regs if tile.layout == want else lw.convert(src, want))
