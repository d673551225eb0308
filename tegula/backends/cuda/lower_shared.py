"""Lowering of the `tgir` shared-memory ops: buffers, cp.async copies into them, and
reads out of them.

Buffers (`local_alloc`) are placed by the allocation pass (`shared_memory`), which
writes each one's byte range on the op (`smem(offset, size)`); the barrier pass puts
the CTA barriers around them. A buffer's placement inside each slot (`buffer_layout`)
is chosen for its reader: when a slot feeds an mma.sync dot operand
it gets that operand's swizzled layout (`lower_mma.operand_offsets`), so the dot reads
it with `ldmatrix` straight from the slot; a staging slot (the source of a transposing
`local_copy`) is row-major with its 16-byte chunks swizzled; otherwise slots are
row-major.

- `async_copy` issues one `cp.async` per run of registers that are consecutive both in
  global memory (the plan's vector width) and in the slot, with the mask as the
  source-size predicate (zero fill); a copy with a bound (`index < bound` along the
  run, a descriptor block's `k0 + j < K`) takes the source size `clamp(bound - index,
  0, run)` elements, so an element-granular edge costs no scalar copies; runs narrower
  than 4 bytes (which cp.async cannot move) are copied synchronously through
  registers instead;
- `async_wait` is `cp.async.wait_group N` (and the proxy fence on sm_90); the barrier
  pass follows it with a `barrier` (other threads' copies are visible after it; it also
  orders every earlier read of the slot the next copies overwrite);
- `local_copy` moves a slot into another slot of another layout through registers
  (16-byte reads, the transposed elements written four to a 32-bit store), then the
  proxy fence and a CTA barrier; `local_store` writes a register tile into a slot
  (`stage_registers`), then the same;
- `local_load` produces nothing when all its users are tensor-core dots reading the
  slot in place (`shared_operand`), wgmma ones possibly through a 2-D transpose, which
  then is a view of the slot (`slot_views`: the transposed offsets, the copy direction
  flipped); otherwise it reads the slot into registers.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import llvmlite.ir as ir

from ...errors import CompilationError
from ...ir.core import Instr, Value
from ...ir.ops import Op
from ...ir.types import SmemType, element_of
from ...passes import contiguity_order
from ..llvm.types import I32, llvm_type
from .convert import smem_load, smem_store
from .ldmatrix_reads import matrix_rows, read_ldmatrix
from .linear_layout import BitMap, LinearLayout, dim_run, log2, permute_view
from .lower_memory import access_width, emit_load
from .lower_mma import CHUNK_BYTES, offset_layout, operand_offsets, store_operand, vector_run
from .lower_wgmma import wgmma_operand_offsets
from .registry import handles
from .shared_buffers import SharedBuffer
from .slot_copies import contiguous_dim, copy_slot, staging_offsets, store_registers
from .slot_views import transposed_offsets

if TYPE_CHECKING:
    from .lower_kernel import KernelLowering

# 1024: the 128-byte NVMMA swizzle is a function of address bits 4-9
BUFFER_ALIGN = 1024


def _users(lw: "KernelLowering", v: Value) -> list[Instr]:
    return [ins for ins in lw.kernel.walk() if v in ins.operands]


def _mma_operand_map(lw: "KernelLowering", load: Instr, copies_along_rows: bool) -> Optional[tuple[BitMap, bool]]:
    """(the shared layout, stored along its first dimension?) every user of `load` (a
    local_load) would read its slot in, when all are tensor-core dots taking it as the
    same operand; else None. `copies_along_rows`: the slot's copies run along its first
    dimension (B's K, A's M), so it is stored that way round where the instruction
    allows it: 16-bit operands either way (wgmma transposes them itself), 8-bit ones
    on wgmma K-major always (`_stored_along_rows`)."""
    found: Optional[tuple[BitMap, bool]] = None
    res = load.results[0]
    users = _users(lw, res)
    readers = []  # (dot, the value it reads, read through the transpose?)
    for u in users:
        if u.op is Op.PERMUTE and tuple(u.attrs.order) == (1, 0):
            view_users = _users(lw, u.results[0])
            if not view_users:
                return None
            readers += [(d, u.results[0], True) for d in view_users]
        else:
            readers.append((u, res, False))
    for u, v, through in readers:
        if u.op is not Op.DOT or u not in lw.plan.mma:
            return None
        ks = [k for k in (0, 1) if u.operands[k] is v]
        if len(ks) != 1 or u.operands[2] is v:
            return None
        k = ks[0]
        choice = lw.plan.mma[u]
        eb = choice.elem_bytes
        shape = tuple(v.type.shape)
        rows = copies_along_rows
        if choice.version == 3:
            rows = _stored_along_rows(k, eb, through, copies_along_rows)
            # a transposed reader wants its view stored the other way round; seen from
            # the slot, that is its map composed with the transposition (`slot_views`)
            m = wgmma_operand_offsets(k, shape, eb, rows != through)
            if m is None:
                return None
            if through:
                m = transposed_offsets(m, shape)
        elif through:
            return None  # mma.sync reads its slots as they are
        else:
            m = operand_offsets(k, shape, eb, copies_along_rows if eb == 2 and k == 1 else None)
        if found is not None and (m, rows) != found:
            return None
        found = (m, rows)
    return found if users else None


def _stored_along_rows(k: int, elem_bytes: int, through: bool, copies_along_rows: bool) -> bool:
    """Whether a slot read by wgmma as operand `k` (0: A, 1: B; `through` a transposed
    view) is stored along its first dimension. wgmma transposes 16-bit operands only,
    so an 8-bit one lies K-major in its slot (B along K, A along K, the view's rows for
    B): copies that run the other way (a row-major B, a column-major A) then write it
    element by element through registers (`lower_async_copy`), which is Triton's
    transposing local store; 16-bit slots are stored the way their copies run, which
    keeps those 16-byte cp.async vectors."""
    if elem_bytes != 1:
        return copies_along_rows
    return (k == 1) != through


def _copies_along_rows(lw: "KernelLowering", buf: Value) -> bool:
    """Whether the copies into `buf` move consecutive elements along a slot's first
    dimension (their pointers are most contiguous along it): a B operand loaded
    from a column-major matrix, or transposed (attention's K^T), is then stored
    K-contiguous so that its copies stay 16-byte vectors."""
    for u in _users(lw, buf):
        if u.op is Op.LOCAL_STORE:  # registers: along the dimension they run longer
            lay = lw.plan.layouts[u.operands[2]]
            return dim_run(lay, 0) > dim_run(lay, 1)
        if u.op is Op.TMA_LOAD and u.operands[0] is buf:
            # a descriptor's blocks run along their last dimension: the slot's second,
            # or its first when it holds the transpose
            return u.attrs.transposed
        if u.op is Op.ASYNC_COPY:
            return contiguity_order(u.operands[2], lw.plan.axis)[0] == 0
    return False


def slot_contiguous_dim(ctx: "KernelLowering", buf: Value, copies_along_rows: bool) -> Optional[int]:
    """The dimension along which a slot of `buf` keeps consecutive elements next to each
    other, when a tensor-core reader decides its layout (`_mma_operand_map`); else None
    (the slot is row-major the way its copies run). `ctx` needs `kernel` and `plan` with
    the dots' instructions chosen: layout assignment asks it, before any lowering, to
    give a copy that stores across its own direction a transposing layout."""
    shape = tuple(buf.type.shape[1:])
    if len(shape) != 2:
        return None
    for u in _users(ctx, buf):
        if u.op is Op.LOCAL_LOAD:
            found = _mma_operand_map(ctx, u, copies_along_rows)
            if found is not None:
                return contiguous_dim(found[0], shape)
    return None


def buffer_layout(ctx: "KernelLowering", alloc: Instr) -> tuple[BitMap, bool]:
    """(offsets, along_rows) of a buffer's slots: the swizzled layout its tensor-core
    reader wants and which way round that stores it (see `_mma_operand_map`), else
    contiguous the way the copies run: row-major, or column-major for copies along the
    first dimension (fla's gla gate tile `gk[k, t]`, contiguous along k and read back
    into registers: stored row-major, its copies were 4 bytes each); `ctx` needs
    `kernel` and `plan` (the lowering, or the allocation pass's view)."""
    t: SmemType = alloc.results[0].type
    along_rows = _copies_along_rows(ctx, alloc.results[0])
    for u in _users(ctx, alloc.results[0]):
        if u.op is Op.LOCAL_LOAD:
            found = _mma_operand_map(ctx, u, along_rows)
            if found is not None:
                return found
        if u.op is Op.LOCAL_COPY and u.operands[0] is alloc.results[0] and len(t.shape) == 3:
            return staging_offsets(tuple(t.shape[1:]), t.element.bytes, along_rows), along_rows
    if along_rows and len(t.shape) == 3:
        rows, cols = t.shape[1:]
        return permute_view((cols, rows), (1, 0)), along_rows
    return BitMap.identity(sum(log2(d) for d in t.shape[1:])), along_rows


def read_in_place(ctx: "KernelLowering", load: Instr) -> Optional[BitMap]:
    """The slot layout a `local_load` is read in by its tensor-core users straight from
    the slot (it then produces no registers), or None when it is read into registers."""
    alloc = load.operands[0].owner
    offsets, _rows = buffer_layout(ctx, alloc)
    found = _mma_operand_map(ctx, load, _copies_along_rows(ctx, alloc.results[0]))
    return offsets if found is not None and found[0] == offsets else None


def buffer_bytes(t: SmemType) -> int:
    return t.numel * t.element.bytes


@handles(Op.LOCAL_ALLOC)
def lower_local_alloc(lw: "KernelLowering", ins: Instr) -> None:
    t: SmemType = ins.results[0].type
    offsets, along_rows = buffer_layout(lw, ins)
    slot_bytes = t.numel // t.shape[0] * t.element.bytes
    if ins.smem is None:
        raise CompilationError("a shared-memory buffer has no placement (the allocation pass did not run)", ins.loc)
    offset = ins.smem[0]
    buf = SharedBuffer(offset, slot_bytes, offset + slot_bytes * t.shape[0], offsets, t.element, along_rows)
    lw.buffer_of[ins.results[0]] = buf


@handles(Op.LOCAL_DEALLOC)
def lower_local_dealloc(lw: "KernelLowering", ins: Instr) -> None:
    """Nothing to emit: the allocation pass placed the buffer, the barrier pass keeps
    later users of its bytes behind every thread's last read."""


def slot_base(lw: "KernelLowering", buf: SharedBuffer, slot: ir.Value) -> ir.Value:
    """The shared byte offset of slot `slot` of `buf`."""
    b = lw.b
    return b.add(b.mul(slot, ir.Constant(I32, buf.slot_bytes)), ir.Constant(I32, buf.offset))


def _copy_run(lw: "KernelLowering", ins: Instr, buf: SharedBuffer) -> tuple[int, BitMap]:
    """(elements per copy instruction, register → slot offset map) of an async_copy:
    runs consecutive both in global memory and in the slot."""
    lay = lw.plan.required(ins, 2)
    where = offset_layout(lay, buf.offsets)
    return min(access_width(lw, ins, lay), vector_run(where, CHUNK_BYTES // buf.element.bytes)), where


@handles(Op.ASYNC_COPY)
def lower_async_copy(lw: "KernelLowering", ins: Instr) -> None:
    buf = lw.buffer_of[ins.operands[0]]
    base = slot_base(lw, buf, lw.scalar(ins.operands[1]))
    lay = lw.plan.required(ins, 2)
    ptrs = lw.operand(ins, 2)
    masks = lw.operand(ins, 3) if ins.attrs.has_mask else None
    bounded = bool(getattr(ins.attrs, "has_bound", False))
    if bounded:
        k = 3 + bool(ins.attrs.has_mask)
        index, bound = lw.operand(ins, k), lw.operand(ins, k + 1)
    elem = buf.element
    size = elem.bytes
    run, where = _copy_run(lw, ins, buf)
    if ins.attrs.through_registers or (run * size < 4 and not bounded):
        _copy_through_registers(lw, ins, buf, base, where)
        return
    b = lw.b
    for r in lay.distinct_register_groups(run):
        pred = masks[r] if masks is not None else None
        off = lw.element_byte_offset(where, r, size, base)
        if run * size >= 4:
            src = _source_bytes(b, index[r], bound[r], run, size, pred) if bounded else None
            lw.dev.cp_async(b, off, ptrs[r], run * size, pred, src, through_l1=ins in lw.plan.l1_copies)
        elif bounded:  # narrow, and the bound decided element by element
            for i in range(run):
                inside = b.icmp_signed("<", index[r + i], bound[r + i])
                p = inside if pred is None else b.and_(masks[r + i], inside)
                vals = emit_load(lw, ptrs[r + i], 1, elem, p, None, None)
                smem_store(lw, b.add(off, ir.Constant(I32, i * size)), vals, elem, absolute=True)


def _copy_through_registers(lw: "KernelLowering", ins: Instr, buf: SharedBuffer, base: ir.Value,
                            where: LinearLayout) -> None:
    """An async_copy whose runs are too narrow for cp.async, done now through registers:
    every load first (each vector as wide as global memory allows, the plan's access
    width; they are then in flight together), then the stores, each as many elements
    as lie consecutive in the slot (`slot_run_bits`). A slot stored the other way round
    from the copies (an 8-bit wgmma operand kept K-major, `_stored_along_rows`) is
    transposed on the way into shared memory, as in Triton's local store of a row-major
    fp8 B: where the copy's layout gives each thread four consecutive K rows
    (`transposing_copy_layout`), their bytes of one column go out as one 32-bit store,
    else byte by byte."""
    lay = lw.plan.required(ins, 2)
    ptrs = lw.operand(ins, 2)
    masks = lw.operand(ins, 3) if ins.attrs.has_mask else None
    elem = buf.element
    width = access_width(lw, ins, lay)
    by_element: dict[int, ir.Value] = {}  # a register's element (thread part aside) → its value
    for r in lay.distinct_register_groups(width):
        pred = masks[r] if masks is not None else None
        for i, v in enumerate(emit_load(lw, ptrs[r], width, elem, pred, None, None)):
            by_element[lay.reg_element(r + i)] = v
    store_registers(lw, by_element, lay, where, elem, base)


@handles(Op.LOCAL_COPY)
def lower_local_copy(lw: "KernelLowering", ins: Instr) -> None:
    """Slot to slot through registers (`slot_copies.copy_slot`), then every thread's
    writes made visible: the proxy fence (wgmma reads through the async proxy) and a
    CTA barrier."""
    src, dst = lw.buffer_of[ins.operands[0]], lw.buffer_of[ins.operands[2]]
    copy_slot(lw, tuple(ins.operands[0].type.shape[1:]), src.element,
              src.offsets, slot_base(lw, src, lw.scalar(ins.operands[1])),
              dst.offsets, slot_base(lw, dst, lw.scalar(ins.operands[3])))
    if lw.capability >= 90:
        lw.dev.fence_proxy_async(lw.b)
    lw.barrier()


@handles(Op.LOCAL_STORE)
def lower_local_store(lw: "KernelLowering", ins: Instr) -> None:
    """Registers into a slot (`lower_mma.store_operand`: stmatrix where the layout holds
    16-bit fragments, else vectors), then every thread's writes made visible: the proxy
    fence (wgmma reads through the async proxy) and a CTA barrier."""
    buf = lw.buffer_of[ins.operands[0]]
    value = ins.operands[2]
    store_operand(lw, lw.operand(ins, 2), lw.plan.required(ins, 2), buf.offsets, element_of(value.type),
                  slot_base(lw, buf, lw.scalar(ins.operands[1])), False)
    if lw.capability >= 90:
        lw.dev.fence_proxy_async(lw.b)
    lw.barrier()


def _source_bytes(b: ir.IRBuilder, index: ir.Value, bound: ir.Value, run: int, size: int,
                  pred: Optional[ir.Value]) -> ir.Value:
    """The source size (i32 bytes) of a bounded copy of `run` elements: the elements
    `index, index+1, ...` below `bound` are the first `clamp(bound - index, 0, run)`
    (the axis analysis made sure the index runs and the bound is constant over the
    copy), none where the mask `pred` is false."""
    avail = b.sub(bound, index)
    ty = avail.type
    lo, hi = ir.Constant(ty, 0), ir.Constant(ty, run)
    avail = b.select(b.icmp_signed("<", avail, lo), lo, avail)
    avail = b.select(b.icmp_signed(">", avail, hi), hi, avail)
    if ty.width != 32:
        avail = b.trunc(avail, I32)
    nbytes = b.mul(avail, ir.Constant(I32, size)) if size != 1 else avail
    return nbytes if pred is None else b.select(pred, nbytes, ir.Constant(I32, 0))


@handles(Op.ASYNC_COMMIT)
def lower_async_commit(lw: "KernelLowering", ins: Instr) -> None:
    lw.dev.cp_async_commit(lw.b)


def _slots_written_by_stores(lw: "KernelLowering") -> bool:
    """Whether some async_copy of the kernel writes its slot with ordinary shared-memory
    stores: one done through registers, or one moving runs too narrow for cp.async."""
    for c in lw.kernel.walk():
        if c.op is Op.ASYNC_COPY:
            buf = lw.buffer_of.get(c.operands[0])
            if buf is not None and (c.attrs.through_registers or _copy_run(lw, c, buf)[0] * buf.element.bytes < 4):
                return True
    return False


@handles(Op.ASYNC_WAIT)
def lower_async_wait(lw: "KernelLowering", ins: Instr) -> None:
    lw.dev.cp_async_wait(lw.b, ins.attrs.pending)
    # Slots read by wgmma (the async proxy) after ordinary st.shared need the proxy
    # fence. Slots filled by cp.async alone do not get one, as in Triton's code: on
    # sm_90 the fence assembles to MEMBAR.ALL.CTA + FENCE.VIEW.ASYNC.S in every
    # iteration of the pipelined loop; dropping it took the 128x128x64 4-warp matmul
    # from 0.83x to 0.86x Triton on an H100.
    if lw.capability >= 90 and _slots_written_by_stores(lw):
        lw.dev.fence_proxy_async(lw.b)
    # the barrier pass puts a `barrier` after this op: other threads' copies are then
    # visible, and every earlier read of the slot the next copies overwrite is done


@handles(Op.BARRIER)
def lower_barrier_op(lw: "KernelLowering", ins: Instr) -> None:
    lw.barrier()


@handles(Op.LOCAL_LOAD)
def lower_local_load(lw: "KernelLowering", ins: Instr) -> None:
    buf = lw.buffer_of[ins.operands[0]]
    base = slot_base(lw, buf, lw.scalar(ins.operands[1]))
    res = ins.results[0]
    if read_in_place(lw, ins) is not None:
        lw.shared_views[res] = (buf, base)
        return
    lay = lw.plan.layouts[res]
    elem = element_of(res.type)
    size = elem.bytes
    where = offset_layout(lay, buf.offsets)
    fragments = matrix_rows(where) if size == 2 and lw.capability >= 75 else None
    if fragments is not None:  # a 16-bit slot read into an accumulator's (or operand's) layout
        rows, count, trans = fragments
        lw.define(res, read_ldmatrix(lw, rows, count, lambda g: lw.element_byte_offset(rows, g, size, base),
                                     llvm_type(elem), trans))
        return
    run = vector_run(where, CHUNK_BYTES // size)
    out: list[ir.Value] = []
    for r in range(0, lay.n_regs, run):
        off = lw.element_byte_offset(where, r, size, base)
        out += smem_load(lw, off, run, elem, absolute=True)
    lw.define(res, out)


def transposed_view(lw: "KernelLowering", ins: Instr) -> bool:
    """A 2-D transpose of a slot read in place (its readers are wgmma dots, which
    `read_in_place` checked): the view of the same bytes its readers use. Whether
    `ins` was one."""
    src = lw.shared_views.get(ins.operands[0])
    if src is None or tuple(ins.attrs.order) != (1, 0):
        return False
    buf, base = src
    shape = tuple(ins.operands[0].type.shape)
    view = SharedBuffer(buf.offset, buf.slot_bytes, buf.end, transposed_offsets(buf.offsets, shape), buf.element,
                        not buf.along_rows)
    lw.shared_views[ins.results[0]] = (view, base)
    return True
