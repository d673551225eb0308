"""Lowering of the TMA ops of `tgir` (sm_90a): `make_tensor_descriptor` (the tensor map
the launcher passes as a parameter), `tma_load`, and the mbarriers it signals.
"Thread 0" below is the first thread of the threads lowering the op
(`KernelLowering.first_thread`: a warp-specialized kernel's producer issues from its
own), and "CTA barrier" their barrier (`KernelLowering.barrier`: the consumers' named
one).

- a descriptor TMA reads through is the generic address of its tensor-map parameter
  (`KernelLowering.tensormap_of`, bound by `build`);
- `mbarrier_init`: thread 0 initializes each slot's mbarrier for `count` arrivals (1,
  the issuing thread's; one per consumer warp for a specialized loop's empty ones), fences
  the initialization for the copy engine (`fence.mbarrier_init`), and a CTA barrier
  publishes it to the other threads before any of them waits;
- `tma_load`: thread 0, when the predicate holds, arrives on the slot's mbarrier
  expecting the slot's bytes and issues one `cp.async.bulk.tensor` per box of the
  block (boxes of `swizzle` bytes along the contiguous dimension, all rows: the NVMMA
  layout the slot has, `shared_layouts.nvmma_offsets`, is these boxes one after the
  other, each swizzled as the tensor map's swizzle mode writes it);
- `mbarrier_wait`: every thread spins on `try_wait.parity` (the copies' data is then
  visible to it; the copy engine wrote the slot, wgmma reads it — both the async
  proxy, so no proxy fence);
- `mbarrier_arrive`: lane 0 of each warp arrives, after a `bar.warp.sync`;
- `mbarrier_inval`: a CTA barrier (every thread has done its last wait), then thread 0
  invalidates the mbarriers so their bytes can be reused;
- `descriptor_store` kept for TMA: the block through scratch, one bulk tensor copy
  per box, read by the copy engine before the op ends (`lower_descriptor_store`);
  `tma_store` the same through a buffer of its own, the wait for the copy engine's
  read moved to before the next write into it and to `bulk_wait` (`store_buffers`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import llvmlite.ir as ir

from ...errors import CompilationError
from ...ir.core import Instr
from ...ir.ops import Op
from ...ir.types import SmemType, element_of, shape_of
from ..llvm.types import I32
from .convert import smem_store
from .lower_mma import CHUNK_BYTES, offset_layout, vector_run
from .lower_shared import slot_base
from .registry import handles
from .shared_layouts import nvmma_offsets
from .tma import tensormap_spec

if TYPE_CHECKING:
    from .lower_kernel import KernelLowering


@handles(Op.MAKE_TENSOR_DESCRIPTOR)
def lower_make_tensor_descriptor(lw: "KernelLowering", ins: Instr) -> None:
    if ins.results[0] not in lw.tensormap_of:
        raise CompilationError("a tensor descriptor reached the lowering without a tensor map", ins.loc)


def _barrier_address(lw: "KernelLowering", bars: ir.Value, slot: ir.Value) -> ir.Value:
    return lw.dev.shared_address(lw.b, slot_base(lw, lw.buffer_of[bars], slot))


@handles(Op.MBARRIER_INIT)
def lower_mbarrier_init(lw: "KernelLowering", ins: Instr) -> None:
    t: SmemType = ins.operands[0].type
    b = lw.b
    count = ins.attrs.count if ins.attrs is not None else 1
    with b.if_then(lw.first_thread()):
        for s in range(t.shape[0]):
            lw.dev.mbarrier_init(b, _barrier_address(lw, ins.operands[0], ir.Constant(I32, s)), count)
        lw.dev.fence_mbarrier_init(b)
    lw.barrier()


@handles(Op.TMA_LOAD)
def lower_tma_load(lw: "KernelLowering", ins: Instr) -> None:
    b = lw.b
    buf_v, slot_v, bars_v, pred_v, desc_v, *offs_v = ins.operands
    make = desc_v.owner
    spec = tensormap_spec(make, lw.kernel)
    tmap = lw.tensormap_of[desc_v]
    buf = lw.buffer_of[buf_v]
    slot = lw.scalar(slot_v)
    dst = slot_base(lw, buf, slot)
    bar = _barrier_address(lw, bars_v, slot)
    row, col = (lw.scalar(v) for v in offs_v)
    box_bytes = spec.box[1] * spec.swizzle
    with b.if_then(b.and_(lw.scalar(pred_v), lw.first_thread())):
        lw.dev.mbarrier_expect_tx(b, bar, buf.slot_bytes)
        for j in range(spec.copies):
            at = lw.dev.shared_address(b, b.add(dst, ir.Constant(I32, j * box_bytes)))
            x = b.add(col, ir.Constant(I32, j * spec.box[0])) if j else col
            lw.dev.tma_load(b, at, tmap, [x, row], bar)


@handles(Op.MBARRIER_WAIT)
def lower_mbarrier_wait(lw: "KernelLowering", ins: Instr) -> None:
    bars, slot, phase = ins.operands
    addr = _barrier_address(lw, bars, lw.scalar(slot))
    if ins.attrs is not None and ins.attrs.issuer_only:
        with lw.b.if_then(lw.first_thread()):  # the thread `lower_tma_load` issues from
            lw.dev.mbarrier_wait(lw.b, addr, lw.scalar(phase))
        return
    lw.dev.mbarrier_wait(lw.b, addr, lw.scalar(phase))


@handles(Op.MBARRIER_ARRIVE)
def lower_mbarrier_arrive(lw: "KernelLowering", ins: Instr) -> None:
    """One arrival per warp: its lanes are done with the slot (a warp-synchronous point
    first, so no lane's shared-memory read trails lane 0's arrival)."""
    bars, slot = ins.operands
    b = lw.b
    addr = _barrier_address(lw, bars, lw.scalar(slot))
    lw.dev.warp_sync(b)
    with b.if_then(b.icmp_unsigned("==", lw.lane, ir.Constant(I32, 0))):
        lw.dev.mbarrier_arrive(b, addr)


@handles(Op.MBARRIER_INVAL)
def lower_mbarrier_inval(lw: "KernelLowering", ins: Instr) -> None:
    t: SmemType = ins.operands[0].type
    b = lw.b
    lw.barrier()
    with b.if_then(lw.first_thread()):
        for s in range(t.shape[0]):
            lw.dev.mbarrier_inval(b, _barrier_address(lw, ins.operands[0], ir.Constant(I32, s)))


@handles(Op.DESCRIPTOR_STORE)
def lower_descriptor_store(lw: "KernelLowering", ins: Instr) -> None:
    """A descriptor store kept for TMA (`tma.tma_stores`), through the op's scratch:
    `_store_block`, then thread 0 waits until the copy engine has read the scratch (not
    for the global writes): the barrier the next scratch use starts with then finds the
    bytes free."""
    desc_v, *offs_v, value = ins.operands
    rows, cols = shape_of(value.type)
    lw.scratch(rows * cols * element_of(value.type).bytes)
    _store_block(lw, lw.scratch_base, desc_v, offs_v, value, wait_read=True)


@handles(Op.TMA_STORE)
def lower_tma_store(lw: "KernelLowering", ins: Instr) -> None:
    """A descriptor store through a buffer of its own (`store_buffers`): thread 0 waits
    until the copy engine has read the previous store's block out of the buffer (issued
    an iteration before: long done), a CTA barrier hands the bytes to every thread, then
    `_store_block`, leaving the copy engine reading the buffer. (Every thread runs the
    wait, at once done for those with no bulk copies: a branch around it would part the
    block's conversions from its shared stores, which LLVM then no longer pairs into
    `cvt.rn.f16x2.f32` and 32-bit stores.)"""
    buf_v, desc_v, *offs_v, value = ins.operands
    lw.dev.bulk_wait_read(lw.b, 0)
    lw.barrier()
    _store_block(lw, lw.buffer_of[buf_v].offset, desc_v, offs_v, value, wait_read=False)


@handles(Op.BULK_WAIT)
def lower_bulk_wait(lw: "KernelLowering", ins: Instr) -> None:
    """Thread 0 (which issued the stores) waits until all but its `pending` newest
    bulk copies have read their shared-memory sources (the other threads, with none,
    pass at once)."""
    lw.dev.bulk_wait_read(lw.b, ins.attrs.pending)


def _store_block(lw: "KernelLowering", start: int, desc_v, offs_v, value, wait_read: bool) -> None:
    """Every thread writes its elements of `value` into the shared bytes at `start` in
    the tensor map's layout (`nvmma_offsets`: boxes of `swizzle` bytes along the
    contiguous dimension, each swizzled, so a warp's 16-byte vectors spread over the
    banks) and fences them for the async proxy; after a CTA barrier thread 0 issues one
    bulk tensor copy per box and commits them as a group, then, with `wait_read`, waits
    until the copy engine has read them."""
    b = lw.b
    spec = tensormap_spec(desc_v.owner, lw.kernel)
    tmap = lw.tensormap_of[desc_v]
    rows, cols = shape_of(value.type)
    elem = element_of(value.type)
    size = elem.bytes
    tile = lw.tile(value)
    where = offset_layout(tile.layout, nvmma_offsets((rows, cols), size, spec.swizzle))
    run = vector_run(where, CHUNK_BYTES // size)
    for r in range(0, where.n_regs, run):
        off = lw.element_byte_offset(where, r, size, start)
        smem_store(lw, off, tile.regs[r:r + run], elem, absolute=True)
    lw.dev.fence_proxy_async(b)
    lw.barrier()
    row, col = (lw.scalar(v) for v in offs_v)
    box_bytes = spec.box[1] * spec.swizzle
    with b.if_then(lw.first_thread()):
        for j in range(spec.copies):
            at = lw.dev.shared_address(b, ir.Constant(I32, start + j * box_bytes))
            x = b.add(col, ir.Constant(I32, j * spec.box[0])) if j else col
            lw.dev.tma_store(b, at, tmap, [x, row])
        lw.dev.bulk_commit(b)
        if wait_read:
            lw.dev.bulk_wait_read(b, 0)
