"""Lowering of a warp-specialized kernel's partitions (`warp_specialize.split_roles`):
`warp_role` and the `if` that branches on it.

- `warp_role` is true in the producer warps, numbered after the kernel's `num_warps`
  (the consumers, whose warp ids the layouts were chosen for); the CTA has
  `num_warps + producer_warps` warps (`producer_warps(kernel)`), which the kernel's
  `.reqntid` and the launch metadata say;
- in each region of the `if`, `KernelLowering.partition` says which threads run it
  (and after it every thread meets at a CTA barrier before the kernel ends). The
  consumers' barriers are the named barrier of their threads (`bar.sync 1, consumers`:
  barrier 0 stays the CTA's), and their first thread is the one that acts alone
  (mbarrier invalidation, scalar stores). The producer's region (scalar code) runs in
  its first thread only, as CUTLASS's producer does: a thread of another producer warp
  running the loop too would not be held to the slots' hand-over (only the issuing
  thread's waits gate the consumers) and could fall two phases behind an mbarrier,
  where a parity wait never returns;
- each partition first re-sizes its registers (`setmaxnreg`, by whole warpgroups): the
  producer gives most of its registers back and the consumers take them (the kernel is
  assembled with `.maxnreg` at the registers every thread starts with, `maxnreg_of`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

import llvmlite.ir as ir

from ...ir import attrs as A
from ...ir.core import Instr, Kernel
from ...ir.ops import Op
from ..llvm.types import I32
from . import warp_specialize
from .registry import handles

if TYPE_CHECKING:
    from .lower_kernel import KernelLowering

CONSUMER_BARRIER = 1


@dataclass(frozen=True)
class Partition:
    """The threads lowering the current code: the first one's id, and their named barrier
    (index, thread count); None for the whole CTA (`bar.sync 0`). `single` says the code
    runs in the first thread alone, which has no barrier to wait at."""

    first_thread: int = 0
    barrier: Optional[tuple[int, int]] = None
    single: bool = False


def role_of(kernel: Kernel) -> Optional[A.WarpRoleAttrs]:
    return next((ins.attrs for ins in kernel.walk() if ins.op is Op.WARP_ROLE), None)


def producer_warps(kernel: Kernel) -> int:
    """The warps the kernel has beyond its `num_warps` (its producer partition's)."""
    role = role_of(kernel)
    return role.producer_warps if role is not None else 0


def maxnreg_of(kernel: Kernel, num_warps: int) -> Optional[int]:
    """The registers per thread a warp-specialized kernel that re-sizes its partitions
    is assembled with (`.maxnreg`): the register file shared by all its threads, a
    multiple of 8 (`warp_specialize.register_budget` balances the partitions around
    it). None when the kernel does not re-size."""
    role = role_of(kernel)
    if role is None or not role.consumer_registers:
        return None
    return warp_specialize.entry_registers(num_warps, role.producer_warps)


def is_role_split(ins: Instr) -> bool:
    cond = ins.operands[0].owner if ins.op is Op.IF else None
    return isinstance(cond, Instr) and cond.op is Op.WARP_ROLE


@handles(Op.WARP_ROLE)
def lower_warp_role(lw: "KernelLowering", ins: Instr) -> None:
    from .lower_kernel import Tile

    lw.vals[ins.results[0]] = Tile([lw.b.icmp_unsigned(">=", lw.warp, ir.Constant(I32, lw.num_warps))], None)


def lower_role_split(lw: "KernelLowering", ins: Instr) -> None:
    """The producer's region in its warps (its first thread alone), the consumers' in
    theirs, then every thread meets at a CTA barrier before the kernel ends."""
    from .lower_control import lower_region

    role: A.WarpRoleAttrs = ins.operands[0].owner.attrs
    b = lw.b
    fn = b.function
    producer_bb, consumer_bb, merge = (fn.append_basic_block(n) for n in ("producer", "consumers", "partitions.end"))
    b.cbranch(lw.scalar(ins.operands[0]), producer_bb, consumer_bb)
    consumers = 32 * lw.num_warps
    partitions = (
        (producer_bb, Partition(consumers, single=True), "dec", role.producer_registers),
        (consumer_bb, Partition(0, (CONSUMER_BARRIER, consumers)), "inc", role.consumer_registers),
    )
    entry = maxnreg_of(lw.kernel, lw.num_warps)
    saved = lw.partition
    for (bb, partition, action, registers), region in zip(partitions, ins.regions):
        b.position_at_end(bb)
        if registers and entry is not None and registers != entry:
            lw.dev.setmaxnreg(b, action, registers)
        if partition.single:
            alone = fn.append_basic_block("producer.thread")
            b.cbranch(b.icmp_unsigned("==", lw.tid, ir.Constant(I32, partition.first_thread)), alone, merge)
            b.position_at_end(alone)
        lw.partition = partition
        lw.push_scope()
        lower_region(lw, region)
        lw.pop_scope()
        lw.partition = saved
        b.branch(merge)
    b.position_at_end(merge)
    # The partitions join before the kernel ends (as Triton's do): no producer warp exits
    # while copies it issued may still be in flight or the consumers still run. The
    # producer's warp reconverges first (its other lanes skipped the loop).
    lw.dev.warp_sync(b)
    lw.dev.barrier(b)
