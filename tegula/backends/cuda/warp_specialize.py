"""Warp specialization of a TMA-pipelined dot loop (sm_90a): extra warps issue the
copies, the kernel's own warps only compute (Triton's `tl.range(...,
warp_specialize=True)` on Hopper).

`pipeline_loops` rewrites a loop whose `tl.range` asks for it (and whose pipelined loads
all go through TMA) with a second mbarrier per slot, `empty`, initialized for one
arrival per consumer warp. Its body then hands slots back and forth explicitly instead
of through a CTA barrier:

    mbarrier_wait full, read, phase        the copies of iteration k have landed
    ... local_load, the dots, dot_wait {pending = 1} ...
    mbarrier_arrive empty, write           this warp is done with the slot of k-1
    if k + S-1 < ub:
        mbarrier_wait empty, write, wphase every warp is done with it
        tma_load ..., write, full          the copies of iteration k + S-1

Run by every warp alike that is an ordinary pipelined loop (the arrivals and the wait
are a barrier). `split_roles` then makes the two roles two partitions of the kernel:

    (the pure scalar code before the rings, descriptors included: every warp)
    rings, full and empty mbarriers: local_alloc, mbarrier_init
    %p = warp_role {producer_warps = 4}
    if %p {   the producer: the copies and the empty waits, with only the scalar code
              and control flow they need (a copy of the rest of the kernel, pruned)
    } else {  the consumers: the rest of the kernel without the copies and the waits
    }

The producer warps are numbered after the kernel's `num_warps`, so the consumers keep
the warp ids every layout was chosen for; the lowering gives the consumers' CTA
barriers to a named barrier of their threads, TMA's issuing thread is the producer's
first, and both partitions re-size their registers (`setmaxnreg`). The producer waits
for an empty slot only when it will fill it, so its last wait precedes its last copy,
which the consumers wait for: after the loop no producer thread touches an mbarrier,
and the consumers invalidate and free the rings as before.

Everything else before the rings (tile code, loads, stores) moves into the consumers'
region: no tile value is live across the split, where ptxas would spill it around
`setmaxnreg`. The split is refused (the loop stays unsplit) when the producer would
need a tile value or the result of an op with effects (its part must be scalar code),
or a load that follows a write of the consumers'.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

from ...config import knobs
from ...ir import attrs as A
from ...ir.clone import clone_instr
from ...ir.core import Block, Instr, Kernel, Value
from ...ir.ops import MEMORY_WRITES, OP_INFO, Op
from ...ir.types import I1, TileType
from ...passes.dce import dce
from ...passes.ir_utils import has_side_effects
from .tile_loop_rings import tile_loop_of

# the producer partition: one warpgroup (setmaxnreg re-sizes whole warpgroups)
PRODUCER_WARPS = 4
WARPGROUP = 4
# registers per thread the producer keeps at least (its scalar code and TMA issue)
PRODUCER_REGISTERS = 40
REGISTER_FILE = 65536
# below this many registers per thread at entry the consumers gain from re-sizing
RESIZE_BELOW = 200


def wants_specialization(kernel: Kernel, parent: Block, loop: Instr, loads: list[Instr], capability: int,
                         num_warps: int) -> bool:
    """Whether the pipelined `loop` is to be warp-specialized: its `tl.range` asks for
    it — or it is a flattened loop nest (`passes/flatten_loops.py`) of two consumer
    warpgroups or more, whose per-iteration address code (the next tile's coordinates)
    the producer then computes instead of the consumers: measured on the H200 (session
    11, tutorial 09 at 128x256x64, 8 warps) +4 to +10% over the same flat loop unsplit,
    where an unflattened loop gains nothing (docs/performance.md) —, it is at the
    kernel's top level or directly in a top-level loop over tiles (its rings then turn
    on across tiles: `tile_loop_rings`), every load it pipelines goes through TMA, and no loop of the
    kernel is specialized yet."""
    attrs = loop.attrs
    if not isinstance(attrs, A.LoopAttrs):
        return False
    asked = attrs.warp_specialize or (attrs.flatten and num_warps >= 2 * WARPGROUP)
    top = parent is kernel.body or tile_loop_of(kernel, parent) is not None
    return (asked and capability >= 90 and knobs.warp_specialize
            and top and bool(loads) and all(ld.op is Op.DESCRIPTOR_LOAD for ld in loads)
            and not any(ins.op is Op.WARP_ROLE for ins in kernel.walk()))


def entry_registers(num_warps: int, producer_warps: int = PRODUCER_WARPS) -> int:
    """Every thread's share of the register file (a multiple of 8, at most 255)."""
    return min(255, REGISTER_FILE // (32 * (num_warps + producer_warps))) // 8 * 8


def register_budget(num_warps: int, producer_warps: int = PRODUCER_WARPS) -> Optional[tuple[int, int]]:
    """(producer, consumer) registers per thread after `setmaxnreg`, or None where the
    consumers would gain little (4 consumer warps start at 248). The warpgroups' totals
    stay exactly the CTA's entry total — CUTLASS's 40 / 232 / 232 at 168, FA3's 24 / 240
    / 240 — as totals that did not add up have been reported to hang the increase
    (NVIDIA/cutlass#2007)."""
    entry = entry_registers(num_warps, producer_warps)
    if entry >= RESIZE_BELOW or num_warps % WARPGROUP or producer_warps % WARPGROUP:
        return None
    consumers, producers = num_warps // WARPGROUP, producer_warps // WARPGROUP
    total = entry * (consumers + producers)
    consumer = min(256, (total - PRODUCER_REGISTERS * producers) // consumers // 8 * 8)
    while consumer > entry and (total - consumer * consumers) % (8 * producers):
        consumer -= 8
    producer = (total - consumer * consumers) // producers
    return (producer, consumer) if consumer > entry else None


def split_roles(kernel: Kernel, rings: list[Value], empty: Value, num_warps: int) -> bool:
    """Split `kernel` (in place) into a producer and a consumer partition at the
    specialized loop's `rings` (allocated at the top level, the first op of the loop's
    shared memory), `empty` being their empty mbarriers. Returns False, leaving the
    kernel as it was, where the split is refused (see the module docstring); the kernel
    then runs its loop unsplit, which is correct."""
    roots = _Roots(set(rings), empty)
    rings_at = rings[0].owner
    body = kernel.body.instrs
    at = body.index(rings_at)
    end = at
    while body[end].op in (Op.LOCAL_ALLOC, Op.MBARRIER_INIT):
        end += 1
    common, head = _common_part(body[:at])
    shared, rest, term = body[at:end], head + body[end:-1], body[-1]
    producer = _producer(kernel, rest, roots)
    if producer is None:
        return False
    consumer = Block(instrs=rest)
    _drop_producer_ops(consumer, roots)
    consumer.instrs.append(Instr(Op.YIELD, [], [], None, [], term.loc))
    loc = rings_at.loc
    budget = register_budget(num_warps) if knobs.warp_specialize_registers else None
    producer_registers, consumer_registers = budget or (0, 0)
    role = Instr(Op.WARP_ROLE, [], [Value(I1)],
                 A.WarpRoleAttrs(PRODUCER_WARPS, producer_registers, consumer_registers), [], loc)
    split = Instr(Op.IF, [role.results[0]], [], None, [producer, consumer], loc)
    kernel.body.instrs = common + shared + [role, split, term]
    dce(kernel)
    return True


@dataclass(frozen=True)
class _Roots:
    """What the producer runs: the copies into the specialized loop's rings and the
    waits for their empty slots (other loops' TMA copies stay with the consumers)."""

    rings: set[Value]
    empty: Value

    def __contains__(self, ins: Instr) -> bool:
        return ((ins.op is Op.TMA_LOAD and ins.operands[0] in self.rings)
                or (ins.op is Op.MBARRIER_WAIT and ins.operands[0] is self.empty))


def _common_part(prefix: list[Instr]) -> tuple[list[Instr], list[Instr]]:
    """The ops before the rings every warp runs (pure scalar code of the arguments, and
    the descriptors: what both partitions read), and the rest, which the consumers run.
    Tile values are then computed in the consumers' region only: the producer warps
    need none, and none is live across the registers' re-sizing (ptxas spills values
    live across `setmaxnreg`)."""
    common: list[Instr] = []
    head: list[Instr] = []
    moved: set[Value] = set()
    for ins in prefix:
        info = OP_INFO[ins.op]
        scalar = (info.pure or ins.op is Op.MAKE_TENSOR_DESCRIPTOR) and not ins.regions and not any(
            isinstance(r.type, TileType) for r in ins.results)
        local = all(not isinstance(v.owner, Instr) or v in moved for v in ins.operands)
        if scalar and local:
            common.append(ins)
            moved.update(ins.results)
        else:
            head.append(ins)
    return common, head


def _producer(kernel: Kernel, rest: list[Instr], roots: _Roots) -> Optional[Block]:
    """The producer's partition: a copy of `rest` that keeps the copies and the empty
    waits and what they need. Every other op with effects is dropped (one without
    results) or stands as a placeholder constant (one with results); a placeholder
    still needed after dead-code elimination, or a tile value left, refuses the split."""
    mapping: dict[Value, Value] = {}
    block = Block(instrs=[clone_instr(ins, mapping) for ins in rest])
    block.instrs.append(Instr(Op.YIELD, [], [], None, [], rest[-1].loc if rest else kernel.loc))
    placeholders: set[Instr] = set()
    _neutralize(block, roots, placeholders)
    dce(replace(kernel, body=block))
    loads = False
    for ins in block.walk():
        if ins in placeholders or any(isinstance(v.type, TileType) for v in ins.results + ins.operands):
            return None
        if has_side_effects(ins) and ins.op not in (Op.FOR, Op.IF, Op.YIELD, Op.LOAD) and ins not in roots:
            return None
        loads = loads or ins.op is Op.LOAD
    if loads and _writes_before_copies(rest, roots):
        return None  # a value it loads might be one the consumers write first
    return block


def _writes_before_copies(rest: list[Instr], roots: _Roots) -> bool:
    """Whether the consumers' part writes memory before (or in) the specialized loop."""
    for ins in rest:
        subs = list(ins.walk())
        if any(sub.op in MEMORY_WRITES for sub in subs):  # a load the producer needs must not follow one
            return True
        if any(sub in roots for sub in subs):
            return False
    return False


def _neutralize(block: Block, roots: _Roots, placeholders: set[Instr]) -> None:
    kept = []
    for ins in block.instrs:
        for region in ins.regions:
            _neutralize(region, roots, placeholders)
        info = OP_INFO[ins.op]
        effectful = not (info.pure or info.terminator or ins.regions) and ins not in roots and ins.op is not Op.LOAD
        if effectful and not ins.results:
            continue
        if effectful:
            ins = Instr(Op.CONSTANT, [], ins.results, A.ConstantAttrs(0), [], ins.loc)
            placeholders.add(ins)
        kept.append(ins)
    block.instrs = kept


def _drop_producer_ops(block: Block, roots: _Roots) -> None:
    block.instrs = [ins for ins in block.instrs if ins not in roots]
    for ins in block.instrs:
        for region in ins.regions:
            _drop_producer_ops(region, roots)
