"""Dots chained through registers, for the warp placement of mma.sync (`mma.mma_warps`).

Triton gives a dot that shares data with another dot of its region (`warpsPerTileV2`:
another dot in the connected slice of ops around it, a transpose cutting the slice) its
warps along one dimension only, M when M >= N. Attention's P = softmax(Q·Kᵀ) then P·V
is the case that matters: an accumulator whose warps each hold whole rows is the next
dot's A fragment after a cast, a renaming of registers, where warps split along N too
must exchange halves of their rows through shared memory in every iteration. The slice
is the same here: the ops of one block connected by data, through any op but a
`permute`; two dots in one such group are chained.
"""
from __future__ import annotations

from ...ir.core import Instr, Kernel
from ...ir.ops import Op
from ...ir.types import shape_of


def chained_dots(kernel: Kernel) -> set[Instr]:
    """The 2-D dots of `kernel` that share a block-local data slice with another dot."""
    chained: set[Instr] = set()
    for block in kernel.body.blocks():
        dots = [ins for ins in block.instrs if ins.op is Op.DOT and len(shape_of(ins.results[0].type)) == 2]
        if len(dots) < 2:
            continue
        group = {ins: ins for ins in block.instrs}  # union-find over the block's ops

        def root(ins: Instr) -> Instr:
            while group[ins] is not ins:
                group[ins] = group[group[ins]]
                ins = group[ins]
            return ins

        for ins in block.instrs:
            if ins.op is Op.PERMUTE:
                continue
            for o in ins.operands:
                src = o.owner
                if isinstance(src, Instr) and src in group and src.op is not Op.PERMUTE:
                    group[root(src)] = root(ins)
        sizes: dict[Instr, int] = {}
        for d in dots:
            sizes[root(d)] = sizes.get(root(d), 0) + 1
        chained.update(d for d in dots if sizes[root(d)] > 1)
    return chained
