"""Shared memory and barriers as passes over `tgir` (the last two of `cuda_tgir`).

`allocate_shared_memory` gives every op that owns shared memory its byte range,
written on the op as `smem(offset, size)`:
- buffers (`local_alloc`): live from their allocation to their `local_dealloc`,
  placed first-fit: at the lowest `BUFFER_ALIGN`-aligned offset (the NVMMA swizzle is
  a function of address bits 4-9) where they overlap no live buffer. Buffers are
  mostly freed in reverse order, which makes that a stack; the holes matter where
  they are not: a warp-specialized loop's rings are allocated before the split and
  freed after their loop, under an operand the consumers staged for both dense loops
  (attention's Q), and the next loop's rings fit where the first's were;
- per-op scratch (`scratch_need`: a conversion through shared memory, a gather's
  source, the cross-warp
  part of a reduction or scan, the operands an FMA or mma.sync dot stages, an atomic's
  old values handed to the copies of its elements, a TMA store's block outside loops —
  in a loop it has a buffer of its own, `store_buffers`): live during
  its op only, placed after the live buffers (`SCRATCH_ALIGN`-aligned), at offset 0 of
  that area (a TMA store's 1024-aligned), except a reduction, which takes the bytes
  just after the latest scratch use when they are free (so softmax's max and
  sum, layer norm's mean and variance, need no barrier between the previous readers
  and the next writers) and that stays within the scratch already reserved (or
  `SMALL_SCRATCH`); and except, in a loop, any use that overlaps the latest one
  where the bytes after it are within the *headroom* (given the target's capability:
  the shared memory a CTA may take without fewer CTAs fitting on an SM,
  `occupancy.shared_memory_headroom`): consecutive uses then alternate between two
  places and need no barrier between them (fla's state loop: two conversions and four
  dots' staged B operands an iteration, 8 of its 27 barriers).
`shared_bytes(kernel)` is the total, the launch's dynamic shared memory.

`insert_barriers` puts a CTA `barrier` op where a write could overtake another
thread's access (read-after-write / write-after-read across ops):
- before a scratch use whose bytes overlap the latest scratch use (every use is
  write, barrier, read inside its own lowering, so only the latest use's readers can
  still be at work; a use of other bytes needs none, nor the first use when nothing
  touched shared memory on any path before);
- where the latest use is unknown, which is at the start of every region (a loop's
  previous iteration, the other branch) and after a region that used scratch;
- before a `local_alloc` that follows any shared-memory use or sits in a loop, and
  before every `local_dealloc` (their bytes become someone else's);
- after every `async_wait` (other threads' copies become visible; earlier reads of
  the slots the next copies overwrite are done); the scratch use after it then needs
  none;
- before a `local_store` (`stage_registers`: a register tile written into a slot,
  then a barrier inside) as before a scratch use of the buffer's bytes, and also where
  a read of those bytes since the last barrier may still be running (a `local_load`
  of the slot, a dot reading it in place — the previous iteration's).
Named barriers and async-proxy fences will be placed here too.

Both passes walk the kernel in the order the lowering emits it with one state
(`_Latest`): the byte range of the latest scratch use, unknown inside loops and after
regions that used scratch.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ...ir.core import Block, Instr, Kernel
from ...ir.ops import Op
from ...ir.types import SmemType, element_of, shape_of
from ..llvm.types import byte_size
from .convert import conversion_kind_of, through_smem_bytes
from .encode_layouts import plan_from_types
from .layout_plan import LayoutPlan
from .lower_dot import fma_dot_bytes
from .lower_gather import gather_bytes
from .lower_mma import b_operand_maps, mma_operand_bytes, operand_offsets, staged_operands
from .lower_reduce import cross_warp_bytes
from .lower_shared import BUFFER_ALIGN, buffer_bytes, read_in_place
from .mma import staged_register_b
from .occupancy import shared_memory_headroom
from .pipeline_plan import shared_capacity
from .slot_views import slot_read

# a reduction's scratch may move past the latest use (saving a barrier) while it ends
# within this many bytes, even if that grows the kernel's scratch
SMALL_SCRATCH = 1024
SCRATCH_ALIGN = 128
# the 128-byte swizzle is a function of address bits 4-9: a TMA box starts 1024-aligned
TMA_SWIZZLE_ALIGN = 1024
# the latest use when control flow makes it unknown: it may have used any byte
ANY = (0, 1 << 62)
# the latest use right after a barrier: every earlier use is done, none overlaps
CLEAR = (0, 0)


@dataclass(frozen=True)
class ScratchNeed:
    size: int
    after_latest: bool = False   # a reduction: may go just after the latest use
    align: int = 16              # of its start in shared memory (a TMA store's swizzled box: 1024)


@dataclass
class _View:
    """What the lowering's helpers read (`kernel`, `plan`), for the static questions."""

    kernel: Kernel
    plan: LayoutPlan
    num_warps: int
    capability: int = 0  # the target's: a conversion's scratch depends on it (convert.through_smem_bytes)


def scratch_need(view: _View, ins: Instr) -> Optional[ScratchNeed]:
    """The scratch `ins`'s lowering uses, from its types alone (None: none)."""
    layouts = view.plan.layouts
    op = ins.op
    if op is Op.CONVERT_LAYOUT:
        src, dst = layouts[ins.operands[0]], layouts[ins.results[0]]
        if conversion_kind_of(src, dst, ins.operands[0]) != "smem":
            return None
        return ScratchNeed(through_smem_bytes(src, dst, element_of(ins.operands[0].type), view.capability))
    if op in (Op.REDUCE, Op.SCAN):
        lay = layouts.get(ins.operands[0])
        if lay is None:
            return None
        size = cross_warp_bytes(lay, ins.attrs.axis % len(lay.shape), [element_of(o.type) for o in ins.operands])
        return ScratchNeed(size, after_latest=op is Op.REDUCE) if size else None
    if op is Op.DOT:
        choice = view.plan.mma.get(ins)
        ea, eb = element_of(ins.operands[0].type), element_of(ins.operands[1].type)
        if choice is None:
            return ScratchNeed(fma_dot_bytes(shape_of(ins.operands[0].type), shape_of(ins.operands[1].type),
                                             ea, eb)[1])
        (m, kk), n = shape_of(ins.operands[0].type), shape_of(ins.operands[1].type)[1]
        if choice.version == 3:  # B from registers: stored NVMMA-swizzled (1024-aligned)
            if not staged_register_b(choice, slot_read(ins.operands[1]) is not None):
                return None
            return ScratchNeed(kk * n * choice.elem_bytes, align=TMA_SWIZZLE_ALIGN)
        sizes = mma_operand_bytes(m, kk, n, choice.elem_bytes)
        maps = [[operand_offsets(0, (m, kk), choice.elem_bytes)],
                [mp for mp, _t in b_operand_maps(kk, n, choice.elem_bytes)]]
        in_place = [_in_place(view, ins.operands[k], maps[k]) for k in (0, 1)]
        total = sum(sizes[k] for k in staged_operands(ins, choice, layouts, in_place))
        return ScratchNeed(total) if total else None
    if op is Op.GATHER:  # the whole source, at its flat indices
        return ScratchNeed(gather_bytes(ins.operands[0].type))
    if op is Op.DESCRIPTOR_STORE:  # kept for TMA (tma.tma_stores): the block, swizzled as its map says
        block = ins.operands[-1].type
        rows, cols = shape_of(block)
        return ScratchNeed(rows * cols * element_of(block).bytes, align=TMA_SWIZZLE_ALIGN)
    if op in (Op.ATOMIC_RMW, Op.ATOMIC_CAS):
        lay = layouts.get(ins.operands[0])
        duplicated = lay is None or any(b == 0 for b in lay.lane + lay.warp)
        used = any(ins.results[0] in u.operands for u in view.kernel.walk())
        if not (duplicated and used):
            return None
        numel = 1 if lay is None else lay.numel
        return ScratchNeed(numel * byte_size(element_of(ins.operands[0].type).pointee))
    return None


def _in_place(view: _View, operand, maps) -> bool:
    load = operand.owner
    if not isinstance(load, Instr) or load.op is not Op.LOCAL_LOAD:
        return False
    return read_in_place(view, load) in maps


class _Latest:
    """The latest scratch use, as the lowering sees it at each point of the walk, and
    the buffer bytes read since it that threads may still be reading (a `local_store`d
    slot's reads: its next store must wait for them)."""

    def __init__(self) -> None:
        self.recent: Optional[tuple[int, int]] = None   # None: no use on any path yet
        self.reads: list[tuple[int, int]] = []
        self.uses = 0
        self.loop_depth = 0
        self.saved: list[tuple[Optional[tuple[int, int]], int, list[tuple[int, int]]]] = []

    def enter(self) -> None:
        self.saved.append((self.recent, self.uses, self.reads))
        self.recent, self.reads = ANY, []

    def leave(self) -> None:
        recent, uses, reads = self.saved.pop()
        self.recent, self.reads = (recent, reads) if self.uses == uses else (ANY, [])

    def current(self) -> Optional[tuple[int, int]]:
        return ANY if self.loop_depth and self.recent is None else self.recent

    def cleared(self, recent: Optional[tuple[int, int]]) -> None:
        """A barrier: every earlier access is done."""
        self.recent, self.reads = recent, []

    def read(self, lo: int, hi: int) -> None:
        self.reads.append((lo, hi))
        self.uses += 1

    def use(self, lo: int, hi: int) -> bool:
        """Record a scratch use of [lo, hi) (a write, a barrier, reads); returns whether
        a barrier must precede it."""
        recent = self.current()
        need = any(r[0] < hi and lo < r[1] for r in ([recent] if recent is not None else []) + self.reads)
        self.recent, self.reads = (lo, hi), []
        self.uses += 1
        return need


class _Walk:
    """Walks the kernel in lowering order, keeping `_Latest` and the live buffers."""

    def __init__(self) -> None:
        self.latest = _Latest()
        self.buffers: list[tuple[int, int]] = []     # live buffers' (offset, end)
        self.total = 0                               # bytes reserved so far

    @property
    def scratch_base(self) -> int:
        """The start of the scratch area: after the live buffers, `SCRATCH_ALIGN`-aligned
        (a conversion's 16-byte vectors, and its bank pattern as at offset 0, after an
        mbarrier buffer of 8-byte words)."""
        end = max((b[1] for b in self.buffers), default=0)
        return (end + SCRATCH_ALIGN - 1) // SCRATCH_ALIGN * SCRATCH_ALIGN

    def block(self, block: Block) -> None:
        for ins in list(block.instrs):
            self.instr(block, ins)

    def regions(self, ins: Instr) -> None:
        st = self.latest
        if ins.op is Op.FOR:
            st.loop_depth += 1
            st.enter()
            self.block(ins.regions[0])
            st.leave()
            st.loop_depth -= 1
        elif ins.op is Op.IF:
            for region in ins.regions:
                st.enter()
                self.block(region)
                st.leave()
        elif ins.op is Op.WHILE:
            st.loop_depth += 1
            for region in ins.regions:
                st.enter()
                self.block(region)
                st.leave()
            st.loop_depth -= 1
        # combine regions of reduce/scan are scalar code inside their op

    def instr(self, block: Block, ins: Instr) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


class _Allocate(_Walk):
    def __init__(self, view: _View, headroom: int = 0) -> None:
        super().__init__()
        self.view = view
        self.headroom = headroom  # total bytes a loop's scratch may reach to save barriers

    def instr(self, block: Block, ins: Instr) -> None:
        st = self.latest
        if ins.op is Op.LOCAL_ALLOC:
            t: SmemType = ins.results[0].type
            size = buffer_bytes(t)
            offset = self.first_fit(size)
            ins.smem = (offset, size)
            self.buffers.append((offset, offset + size))
            st.recent = None
            self.total = max(self.total, offset + size)
        elif ins.op is Op.LOCAL_DEALLOC:
            alloc = ins.operands[0].owner
            live = (alloc.smem[0], alloc.smem[0] + alloc.smem[1]) if alloc.smem is not None else None
            if live not in self.buffers:
                raise ValueError("a shared buffer freed twice, or before its allocation")
            self.buffers.remove(live)
            st.recent = None
        else:
            need = scratch_need(self.view, ins)
            if need is not None:
                lo = self.aligned(self.place(need), need)
                st.use(lo, lo + need.size)
                ins.smem = (self.scratch_base + lo, need.size)
                self.total = max(self.total, self.scratch_base + lo + need.size)
        self.regions(ins)

    def first_fit(self, size: int) -> int:
        """The lowest `BUFFER_ALIGN`-aligned offset where `size` bytes overlap no live
        buffer (the scratch area moves above it if it lands on top)."""
        offset = 0
        for lo, hi in sorted(self.buffers):
            if offset + size <= lo:
                break
            offset = max(offset, (hi + BUFFER_ALIGN - 1) // BUFFER_ALIGN * BUFFER_ALIGN)
        return offset

    def aligned(self, lo: int, need: ScratchNeed) -> int:
        """`lo` (relative to the scratch area) moved up to the use's alignment."""
        return -(-(self.scratch_base + lo) // need.align) * need.align - self.scratch_base

    def place(self, need: ScratchNeed) -> int:
        """Where in the scratch area (relative to its start) a use goes."""
        recent = self.latest.recent
        if recent is None or recent is ANY or self.aligned(0, need) + need.size <= recent[0]:
            return 0
        if need.after_latest:
            lo = (recent[1] + 15) // 16 * 16
            return lo if lo + need.size <= max(self.total - self.scratch_base, SMALL_SCRATCH) else 0
        if self.latest.loop_depth:
            lo = self.aligned(recent[1], need)
            if self.scratch_base + lo + need.size <= self.headroom:
                return lo
        return 0


class _Barriers(_Walk):
    def __init__(self, kernel: Kernel) -> None:
        super().__init__()
        # buffers the threads write (`local_store`): their reads are tracked
        self.stored = {ins.operands[0] for ins in kernel.walk() if ins.op is Op.LOCAL_STORE}

    def _bytes(self, buf) -> tuple[int, int]:
        lo, size = buf.owner.smem
        return lo, lo + size

    def _reads(self, ins: Instr) -> list[tuple[int, int]]:
        """The stored buffers `ins` reads: by `local_load`, or in place (a dot's operand)."""
        loads = [ins] if ins.op is Op.LOCAL_LOAD else []
        if ins.op is Op.DOT:
            loads += [o.owner for o in ins.operands if isinstance(o.owner, Instr) and o.owner.op is Op.LOCAL_LOAD]
        return [self._bytes(ld.operands[0]) for ld in loads if ld.operands[0] in self.stored]

    def instr(self, block: Block, ins: Instr) -> None:
        st = self.latest
        need = False
        if ins.op is Op.LOCAL_ALLOC:
            need = st.recent is not None or st.loop_depth > 0
            st.cleared(None)
        elif ins.op is Op.LOCAL_DEALLOC:
            need = True
            st.cleared(None)
        elif ins.op is Op.LOCAL_STORE:  # a write, its barrier, then readers: as a scratch use
            need = st.use(*self._bytes(ins.operands[0]))
        elif ins.smem is not None:
            need = st.use(ins.smem[0], ins.smem[0] + ins.smem[1])
        if need:
            _insert(block, ins, before=True)
        for lo, hi in self._reads(ins):
            st.read(lo, hi)
        if ins.op is Op.ASYNC_WAIT:
            _insert(block, ins, before=False)
            st.cleared(CLEAR)  # the next scratch use needs no barrier of its own
        self.regions(ins)


def _insert(block: Block, at: Instr, before: bool) -> None:
    i = block.instrs.index(at) + (0 if before else 1)
    block.instrs.insert(i, Instr(Op.BARRIER, [], [], loc=at.loc))


def allocate_shared_memory(kernel: Kernel, num_warps: int, capability: int = 0) -> Kernel:
    """Write every buffer's and every scratch use's byte range on its op (in place).
    With the target's `capability`, a loop's consecutive scratch uses alternate within
    the headroom (placed again once the first placement's total is known)."""
    view = _View(kernel, plan_from_types(kernel, num_warps), num_warps, capability)
    _Allocate(view).block(kernel.body)
    if capability:
        total = shared_bytes(kernel)
        headroom = shared_memory_headroom(num_warps * 32, total, capability, shared_capacity(capability))
        if headroom > total:
            _Allocate(view, headroom).block(kernel.body)
    return kernel


def insert_barriers(kernel: Kernel) -> Kernel:
    """Put the CTA barriers shared memory needs between ops (in place)."""
    _Barriers(kernel).block(kernel.body)
    return kernel


def shared_bytes(kernel: Kernel) -> int:
    """The shared memory the kernel's buffers and scratch need (its ops' `smem`)."""
    return max((ins.smem[0] + ins.smem[1] for ins in kernel.walk() if ins.smem is not None), default=0)
