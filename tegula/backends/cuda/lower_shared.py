"""Lowering of the `tgir` shared-memory ops: buffers, cp.async copies into them, and
reads out of them.

Buffers (`local_alloc`) are placed as a stack from shared offset 0, 128-byte aligned,
freed by `local_dealloc` in reverse order; while any is live the scratch area of the
other ops starts after them (`KernelLowering.scratch_base`). A buffer's placement
inside each slot is chosen for its reader: when a slot feeds an mma.sync dot operand
it gets that operand's swizzled layout (`lower_mma.operand_offsets`), so the dot reads
it with `ldmatrix` straight from the slot; otherwise slots are row-major.

- `async_copy` issues one `cp.async` per run of registers that are consecutive both in
  global memory (the plan's vector width) and in the slot, with the mask as the
  source-size predicate (zero fill); runs narrower than 4 bytes (which cp.async cannot
  move) are copied synchronously through registers instead;
- `async_wait` is `cp.async.wait_group N` then a CTA barrier (other threads' copies
  are visible after it; it also orders every earlier read of the slot the next copies
  overwrite);
- `local_load` produces nothing when all its users are tensor-core dots reading the
  slot in place (`shared_operand`); otherwise it reads the slot into registers.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

import llvmlite.ir as ir

from ...ir.core import Instr, Value
from ...ir.ops import Op
from ...ir.types import ScalarType, SmemType, element_of
from ...passes import contiguity_order
from ..llvm.types import I32
from .convert import smem_load, smem_store
from .linear_layout import BitMap, log2
from .lower_memory import access_width, emit_load
from .lower_mma import CHUNK_BYTES, _vector_run, offset_layout, operand_offsets
from .lower_wgmma import wgmma_operand_offsets
from .registry import handles

if TYPE_CHECKING:
    from .lower_kernel import KernelLowering

# 1024: the 128-byte NVMMA swizzle is a function of address bits 4-9
BUFFER_ALIGN = 1024


@dataclass(frozen=True)
class SharedBuffer:
    offset: int            # bytes from the start of shared memory
    slot_bytes: int
    end: int               # offset + all slots' bytes
    offsets: BitMap        # a slot's flat index → element offset in the slot
    element: ScalarType
    along_rows: bool       # copies into it run along a slot's rows (B's K, or A's M)


def _users(lw: "KernelLowering", v: Value) -> list[Instr]:
    return [ins for ins in lw.kernel.walk() if v in ins.operands]


def _mma_operand_map(lw: "KernelLowering", load: Instr, along_rows: bool) -> Optional[BitMap]:
    """The shared layout every user of `load` (a local_load) would read it in, when all
    are tensor-core dots taking it as the same operand; else None. `along_rows`: the
    slot's copies run along its first dimension (B's K, A's M), so it is stored that
    way round where the instruction allows it."""
    found: Optional[BitMap] = None
    res = load.results[0]
    users = _users(lw, res)
    for u in users:
        if u.op is not Op.DOT or u not in lw.plan.mma:
            return None
        ks = [k for k in (0, 1) if u.operands[k] is res]
        if len(ks) != 1 or u.operands[2] is res:
            return None
        k = ks[0]
        choice = lw.plan.mma[u]
        eb = choice.elem_bytes
        if choice.version == 3:
            m = wgmma_operand_offsets(k, tuple(res.type.shape), eb, along_rows)
            if m is None:
                return None
        else:
            m = operand_offsets(k, tuple(res.type.shape), eb, along_rows if eb == 2 and k == 1 else None)
        if found is not None and m != found:
            return None
        found = m
    return found if users else None


def _copies_along_rows(lw: "KernelLowering", buf: Value) -> bool:
    """Whether the copies into `buf` move consecutive elements along a slot's first
    dimension (their pointers are most contiguous along it): a B operand loaded
    from a column-major matrix, or transposed (attention's K^T), is then stored
    K-contiguous so that its copies stay 16-byte vectors."""
    for u in _users(lw, buf):
        if u.op is Op.ASYNC_COPY:
            # the same judgement as assign_layouts' (an fp8 wgmma was chosen on it)
            return contiguity_order(u.operands[2], lw.plan.axis)[0] == 0
    return False


@handles(Op.LOCAL_ALLOC)
def lower_local_alloc(lw: "KernelLowering", ins: Instr) -> None:
    t: SmemType = ins.results[0].type
    slot_shape = tuple(t.shape[1:])
    offsets = None
    along_rows = _copies_along_rows(lw, ins.results[0])
    for u in _users(lw, ins.results[0]):
        if u.op is Op.LOCAL_LOAD:
            offsets = _mma_operand_map(lw, u, along_rows)
            if offsets is not None:
                break
    if offsets is None:
        offsets = BitMap.identity(sum(log2(d) for d in slot_shape))
    slot_bytes = t.numel // t.shape[0] * t.element.bytes
    top = lw.buffers[-1].end if lw.buffers else 0
    offset = (top + BUFFER_ALIGN - 1) // BUFFER_ALIGN * BUFFER_ALIGN
    buf = SharedBuffer(offset, slot_bytes, offset + slot_bytes * t.shape[0], offsets, t.element, along_rows)
    if lw.smem_recent is not None or lw.loop_depth:
        # scratch used before may overlap the new buffer: every thread must be done with it
        lw.dev.barrier(lw.b)
        lw.smem_recent = None
    lw.buffers.append(buf)
    lw.buffer_of[ins.results[0]] = buf
    lw.scratch_base = buf.end
    lw.smem_bytes = max(lw.smem_bytes, lw.scratch_base)


@handles(Op.LOCAL_DEALLOC)
def lower_local_dealloc(lw: "KernelLowering", ins: Instr) -> None:
    buf = lw.buffer_of[ins.operands[0]]
    if not lw.buffers or lw.buffers[-1] is not buf:
        raise AssertionError("shared buffers must be freed in the reverse order of their allocation")
    # the scratch after the buffers and the buffer itself become scratch again: every
    # thread must have finished reading them
    lw.dev.barrier(lw.b)
    lw.smem_recent = None
    lw.buffers.pop()
    lw.scratch_base = lw.buffers[-1].end if lw.buffers else 0


def slot_base(lw: "KernelLowering", buf: SharedBuffer, slot: ir.Value) -> ir.Value:
    """The shared byte offset of slot `slot` of `buf`."""
    b = lw.b
    return b.add(b.mul(slot, ir.Constant(I32, buf.slot_bytes)), ir.Constant(I32, buf.offset))


@handles(Op.ASYNC_COPY)
def lower_async_copy(lw: "KernelLowering", ins: Instr) -> None:
    buf = lw.buffer_of[ins.operands[0]]
    base = slot_base(lw, buf, lw.scalar(ins.operands[1]))
    lay = lw.plan.required(ins, 2)
    ptrs = lw.operand(ins, 2)
    masks = lw.operand(ins, 3) if ins.attrs.has_mask else None
    elem = buf.element
    size = elem.bytes
    where = offset_layout(lay, buf.offsets)
    run = min(access_width(lw, ins, lay), _vector_run(where, CHUNK_BYTES // size))
    b = lw.b
    done: set[int] = set()
    for r in range(0, lay.n_regs, run):
        const = lay.reg_element(r)
        if const in done:  # a copy of another register group (broadcast bits)
            continue
        done.add(const)
        pred = masks[r] if masks is not None else None
        off = b.add(b.mul(lw.element_flat(where, r), ir.Constant(I32, size)), base)
        if run * size >= 4:
            lw.dev.cp_async(b, off, ptrs[r], run * size, pred)
        else:  # too narrow for cp.async: through registers, now
            vals = emit_load(lw, ptrs[r], run, elem, pred, None, None)
            smem_store(lw, off, vals, elem, absolute=True)


@handles(Op.ASYNC_COMMIT)
def lower_async_commit(lw: "KernelLowering", ins: Instr) -> None:
    lw.dev.cp_async_commit(lw.b)


@handles(Op.ASYNC_WAIT)
def lower_async_wait(lw: "KernelLowering", ins: Instr) -> None:
    lw.dev.cp_async_wait(lw.b, ins.attrs.pending)
    if lw.capability >= 90:
        # the slots may be read by wgmma (the async proxy): publish this thread's writes
        lw.dev.fence_proxy_async(lw.b)
    lw.dev.barrier(lw.b)


@handles(Op.LOCAL_LOAD)
def lower_local_load(lw: "KernelLowering", ins: Instr) -> None:
    buf = lw.buffer_of[ins.operands[0]]
    base = slot_base(lw, buf, lw.scalar(ins.operands[1]))
    res = ins.results[0]
    if _mma_operand_map(lw, ins, buf.along_rows) == buf.offsets:
        lw.shared_views[res] = (buf, base)
        return
    lay = lw.plan.layouts[res]
    elem = element_of(res.type)
    size = elem.bytes
    where = offset_layout(lay, buf.offsets)
    run = _vector_run(where, CHUNK_BYTES // size)
    b = lw.b
    out: list[ir.Value] = []
    for r in range(0, lay.n_regs, run):
        off = b.add(b.mul(lw.element_flat(where, r), ir.Constant(I32, size)), base)
        out += smem_load(lw, off, run, elem, absolute=True)
    lw.define(res, out)
