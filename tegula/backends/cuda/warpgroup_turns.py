"""Consumer warpgroups taking turns at their dots (FlashAttention-3's ping-pong): where
the turns go in a warp-specialized loop (`take_turns`) and their lowering.

In a warp-specialized attention loop each consumer warpgroup owns 64 query rows and
runs, every iteration, its dots (S = Q·Kᵀ, O += P·V) and then a softmax that the tensor
cores have no part in. Left alone, the warpgroups drift into step: both issue their
dots at once, then both compute exponentials while the tensor cores idle. Taking turns,
warpgroup g issues its dots only after warpgroup g-1 has issued its own, so one
warpgroup's softmax runs under the other's dots:

    warpgroup_turn {step = "begin"}     the last warpgroup passes the first turn
    for ... {
        ... the slot waits ...
        warpgroup_turn {step = "wait"}  before the iteration's first dot
        ... the dots ...
        warpgroup_turn {step = "pass"}  after its last dot is issued
        ... the softmax, the waits for the dots ...
    }
    warpgroup_turn {step = "end"}       the first warpgroup takes the last turn passed

A turn is a named barrier of 256 threads per warpgroup: warpgroup g waits at barrier
`base + g` (`bar.sync`, its 128 threads) until warpgroup g-1 arrives there (`bar.arrive`,
the other 128) — a ring of N barriers for N warpgroups. Each barrier then sees as many
arrivals as waits: the first warpgroup waits once per iteration and once after the
loop, the last arrives once per iteration and once before it.

Only loops whose dots the iteration itself computes on (their results read within it:
`LoopPlan.late_waits`) take turns; a matmul's dots only accumulate, nothing runs beside
them. Between a turn's wait and its pass no op may make the consumers meet (a barrier,
an op with scratch in shared memory): the warpgroup holding the turn would wait there
for the one waiting for the turn. `drop_blocked_turns` (after the barriers are placed)
removes a loop's turns where that happens. `knobs.warpgroup_pingpong` turns it off.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import llvmlite.ir as ir

from ...config import knobs
from ...ir import attrs as A
from ...ir.core import Block, Instr, Kernel
from ...ir.ops import Op
from ..llvm.types import I32
from .registry import handles

if TYPE_CHECKING:
    from .lower_kernel import KernelLowering

WARPGROUP_THREADS = 128
# named barriers 0 (the CTA's) and 1 (the consumers', warp_partitions) are taken
FIRST_BARRIER = 2


def take_turns(parent: Block, loop: Instr, consumer_warps: int) -> bool:
    """Make the consumer warpgroups of the warp-specialized `loop` (an op of `parent`,
    the consumers' region) take turns at the dots of its body (in place). Returns
    whether it did: not with one warpgroup, without a dot at the body's top level, or
    with the knob off."""
    groups = consumer_warps // 4
    body = loop.regions[0]
    dots = [i for i, ins in enumerate(body.instrs) if ins.op is Op.DOT]
    if not knobs.warpgroup_pingpong or groups < 2 or consumer_warps % 4 or not dots:
        return False

    def turn(step: str) -> Instr:
        return Instr(Op.WARPGROUP_TURN, [], [], A.WarpgroupTurnAttrs(step, FIRST_BARRIER, groups), [], loop.loc)
    body.instrs.insert(dots[-1] + 1, turn("pass"))
    body.instrs.insert(dots[0], turn("wait"))
    at = parent.instrs.index(loop)
    parent.instrs[at:at + 1] = [turn("begin"), loop, turn("end")]
    return True


# ops that make every consumer thread meet (a barrier, or one in the op's own lowering:
# scratch in shared memory is written, then read after a barrier; a tma_store's buffer
# is handed over and written between CTA barriers)
_MEETS = (Op.BARRIER, Op.DEBUG_BARRIER, Op.LOCAL_ALLOC, Op.LOCAL_DEALLOC, Op.ASYNC_WAIT, Op.TMA_STORE)


def drop_blocked_turns(kernel: Kernel) -> int:
    """Remove the turns of every loop where the consumers must all meet between a turn's
    wait and its pass (runs after `insert_barriers`): the warpgroup holding the turn
    would wait there for one that waits for the turn, a deadlock. Such a loop runs as
    it would without turns. Returns how many loops lost theirs."""
    dropped = 0
    for block in list(kernel.body.blocks()):
        steps = {ins.attrs.step: i for i, ins in enumerate(block.instrs) if ins.op is Op.WARPGROUP_TURN}
        if "wait" not in steps:
            continue
        # a wait with no pass (hand-written tgir): checked to the block's end
        between = block.instrs[steps["wait"] + 1:steps.get("pass", len(block.instrs))]
        if any(sub.op in _MEETS or sub.smem is not None for ins in between for sub in ins.walk()):
            dropped += 1
            _remove_turns(kernel, block)
    return dropped


def _remove_turns(kernel: Kernel, body: Block) -> None:
    """Drop the turns inside `body` (a loop's) and those around its loop."""
    body.instrs = [ins for ins in body.instrs if ins.op is not Op.WARPGROUP_TURN]
    for block in kernel.body.blocks():
        for i, ins in enumerate(block.instrs):
            if ins.op is Op.FOR and ins.regions[0] is body:
                # the nearest begin before the loop and end after it (other ops may have
                # been placed in between since)
                steps = [(j, x.attrs.step) for j, x in enumerate(block.instrs) if x.op is Op.WARPGROUP_TURN]
                begin = max((j for j, step in steps if step == "begin" and j < i), default=None)
                end = min((j for j, step in steps if step == "end" and j > i), default=None)
                block.instrs = [x for j, x in enumerate(block.instrs) if j not in (begin, end)]
                return


@handles(Op.WARPGROUP_TURN)
def lower_warpgroup_turn(lw: "KernelLowering", ins: Instr) -> None:
    a: A.WarpgroupTurnAttrs = ins.attrs
    b = lw.b
    threads = 2 * WARPGROUP_THREADS  # the waiting warpgroup's and the passing one's
    group = b.udiv(lw.warp, ir.Constant(I32, 4))
    if a.step == "wait":
        lw.dev.named_barrier(b, b.add(group, ir.Constant(I32, a.barrier)), threads)
        return
    if a.step == "pass":
        nxt = b.urem(b.add(group, ir.Constant(I32, 1)), ir.Constant(I32, a.groups))
        lw.dev.named_barrier_arrive(b, b.add(nxt, ir.Constant(I32, a.barrier)), threads)
        return
    # begin: the last warpgroup passes the first turn; end: the first takes the last
    one = a.groups - 1 if a.step == "begin" else 0
    then, after = (b.function.append_basic_block(f"turn.{a.step}{n}") for n in ("", ".done"))
    b.cbranch(b.icmp_unsigned("==", group, ir.Constant(I32, one)), then, after)
    b.position_at_end(then)
    if a.step == "begin":
        lw.dev.named_barrier_arrive(b, a.barrier, threads)
    else:
        lw.dev.named_barrier(b, a.barrier, threads)
    b.branch(after)
    b.position_at_end(after)
