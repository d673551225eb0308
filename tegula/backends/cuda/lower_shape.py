"""Lowering of the shape ops. With linear layouts they are register renamings: the plan
gives expand_dims/reshape/permute the layout their operand's data already has, a
broadcast's operand is brought into the slice of the result layout, join interleaves
registers, split picks alternate registers."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...ir.core import Instr
from ...ir.ops import Op
from . import layouts as LY
from .linear_layout import broadcast_view, local_register_map
from .lower_shared import transposed_view
from .registry import handles

if TYPE_CHECKING:
    from .lower_kernel import KernelLowering


@handles(Op.EXPAND_DIMS, Op.RESHAPE, Op.PERMUTE)
def lower_view(lw: "KernelLowering", ins: Instr) -> None:
    r = ins.results[0]
    if ins.op is Op.PERMUTE and transposed_view(lw, ins):
        return  # a transposed view of a slot its wgmma readers read in place
    src = lw.tile(ins.operands[0])
    if src.layout is None:
        lw.define(r, src.regs * lw.plan.layouts[r].n_regs)
        return
    # the result layout is the operand's bases seen through the view: same registers
    lw.define(r, lw.operand(ins, 0))


@handles(Op.BROADCAST)
def lower_broadcast(lw: "KernelLowering", ins: Instr) -> None:
    r = ins.results[0]
    dst = lw.plan.layouts[r]
    src_l = lw.plan.required(ins, 0)
    regs = lw.operand(ins, 0)
    if src_l is None:
        lw.define(r, regs * dst.n_regs)
        return
    m = local_register_map(src_l, dst, broadcast_view(src_l.shape, dst.shape))
    assert m is not None, "the plan gives a broadcast a layout its operand reaches for free"
    lw.define(r, [regs[i] for i in m])


@handles(Op.JOIN)
def lower_join(lw: "KernelLowering", ins: Instr) -> None:
    a, b = lw.operand(ins, 0), lw.operand(ins, 1)
    lw.define(ins.results[0], [x for pair in zip(a, b) for x in pair])


@handles(Op.SPLIT)
def lower_split(lw: "KernelLowering", ins: Instr) -> None:
    src_l = lw.plan.required(ins, 0)
    regs = lw.operand(ins, 0)
    half, j = LY.split_layout(src_l)
    low = (1 << j) - 1
    for which, res in enumerate(ins.results):
        out = []
        for r in range(half.n_regs):
            src_r = (r & low) | (which << j) | ((r & ~low) << 1)
            out.append(regs[src_r])
        lw.define(res, out)
