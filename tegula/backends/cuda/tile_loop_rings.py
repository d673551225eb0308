"""Rings that outlive their loop: a warp-specialized pipelined loop nested in a loop
over output tiles (a persistent kernel's `for tile in tl.range(pid, tiles, nprog)`)
keeps one set of rings for the whole kernel, its slots turning on across tiles.

`pipeline_loops` allocates such a loop's rings and mbarriers before the tile loop (and
frees them after it) instead of around the inner loop, and numbers the inner loop's
iterations over the whole program: iteration g of the program reads slot g mod S with
the full mbarrier's phase parity (g div S) & 1, and the copies of iteration g wait for
the empty slot with parity (floor((g - D) / S)) & 1 (D = S - 1 copies run ahead; the
consumers' arrival for copy g comes in their iteration g - D, and a first use of a
slot, g < D, waits on parity 1, which a fresh mbarrier has passed). The tile loop
carries the read slot and its parity from one tile's inner loop to the next; each
tile's prologue copies wait for their empty slots like the loop's own copies. The
producer partition (`warp_specialize.split_roles`) thus starts the next tile's first
copies as soon as the consumers release the slots of this tile's last iterations,
while they still run this tile's epilogue: no pipeline fill between tiles.

A tile whose inner loop has no iteration issues and consumes nothing: the count, and
with it every slot's phase, stays where it was.
"""
from __future__ import annotations

from typing import Optional

from ...ir.builder import Builder
from ...ir.core import Block, Instr, Kernel, Value
from ...ir.ops import Op
from ...ir.types import I32


def tile_loop_of(kernel: Kernel, parent: Block) -> Optional[Instr]:
    """The `for` at the kernel's top level whose body is `parent` (a loop directly in a
    tile loop), or None."""
    for ins in kernel.body.instrs:
        if ins.op is Op.FOR and ins.regions[0] is parent:
            return ins
    return None


def carry_through(loop: Instr, inits: list[Value]) -> list[Value]:
    """Add loop-carried values to `loop` (in place), starting at `inits` (defined before
    it); returns their block arguments. Their yields are added by `yield_carried`."""
    body = loop.regions[0]
    args = []
    for v in inits:
        loop.operands.append(v)
        result = Value(v.type)
        result.owner = loop
        loop.results.append(result)
        args.append(body.add_arg(v.type))
    return args


def yield_carried(loop: Instr, values: list[Value]) -> None:
    """The next iteration's values of the ones `carry_through` added last."""
    loop.regions[0].terminator.operands.extend(values)


def ring_position(b: Builder, read: Value, phase: Value, ahead: int, stages: int, distance: int
                  ) -> tuple[Value, Value]:
    """The slot of the iteration `ahead` after the one reading slot `read` in phase
    `phase` (ahead < stages), and the parity its copies' empty wait waits for. With the
    reading iteration g = q*S + read and c = g + ahead: floor((c - D) / S) = q - 1 where
    read + ahead < D (the slot's last release came a round earlier), else q (read +
    ahead - D stays below S)."""
    k = b.op1(Op.ADD, read, b.constant(ahead, I32))
    size = b.constant(stages, I32)
    slot = b.op1(Op.SELECT, b.op1(Op.GE, k, size), b.op1(Op.SUB, k, size), k)
    back = b.op1(Op.LT, k, b.constant(distance, I32))
    return slot, b.op1(Op.SELECT, back, b.op1(Op.XOR, phase, b.constant(1, I32)), phase)
