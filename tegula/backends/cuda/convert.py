"""Layout conversion of a lowered value, cheapest way first:

1. *local*: every thread already holds what it needs (`local_register_map`): the
   registers are renamed/duplicated, no instruction is emitted;
2. *remat*: the value is index arithmetic over scalars (`is_rematerializable`): it is
   recomputed directly in the wanted layout (a few ALU ops, no memory);
3. *shuffle*: every warp holds the same elements in both layouts and each destination
   word draws from at most two lanes (`warp_exchange`): `shfl.sync.idx` and `prmt`,
   no shared memory and no barrier (fp8 attention's P into wgmma's register A);
4. *smem*: the tile goes through the shared-memory scratch: each thread writes its
   registers at their flat indices (vectorised over registers that hold consecutive
   elements), a barrier, and each thread reads what the new layout gives it.

Also home of the scratch helpers other lowerings use (`smem_store`, `smem_load`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import llvmlite.ir as ir

from ...ir.core import Instr, Value
from ...ir.ops import Op
from ...ir.types import ScalarType, element_of, shape_of
from ..llvm.types import I8, I32, byte_size, llvm_type, memory_type
from . import layouts as LY
from .layout_plan import is_rematerializable
from .ldmatrix_reads import ROW_ELEMENTS, ldmatrix_rows, read_ldmatrix, write_stmatrix
from .linear_layout import LinearLayout, broadcast_view, local_register_map
from .lower_elementwise import arange_regs, constant_groups, elementwise_regs
from .warp_exchange import Exchange, exchange, plan_exchange

if TYPE_CHECKING:
    from .lower_kernel import KernelLowering

MAX_VECTOR_BYTES = 16


def conversion_kind_of(src: LinearLayout, dst: LinearLayout, v: Value) -> str:
    """Which of the ways above converts `v` from `src` to `dst`: `local`, `remat`,
    `shuffle` or `smem` — the one decision the lowering, the shared-memory allocation
    (only `smem` takes scratch) and `encode_layouts.conversion_kind` share."""
    if src == dst or local_register_map(src, dst) is not None:
        return "local"
    if is_rematerializable(v):
        return "remat"
    return "shuffle" if shuffle_plan(src, dst, element_of(v.type)) is not None else "smem"


def convert_value(lw: "KernelLowering", v: Value, want: LinearLayout) -> list[ir.Value]:
    t = lw.tile(v)
    m = local_register_map(t.layout, want)
    if m is not None:
        return [t.regs[i] for i in m]
    kind = conversion_kind_of(t.layout, want, v)
    if kind == "remat":
        return rematerialize(lw, v, want)
    elem = element_of(v.type)
    if kind == "shuffle":
        return exchange(lw, t.regs, shuffle_plan(t.layout, want, elem), elem)
    return through_smem(lw, t.regs, t.layout, want, elem)


def shuffle_plan(src: LinearLayout, dst: LinearLayout, elem: Any) -> Optional[Exchange]:
    """The in-warp shuffle plan of a conversion (`warp_exchange`, cached), None for one
    that goes through shared memory (bool tiles always do: their registers are i1)."""
    if isinstance(elem, ScalarType) and elem.is_bool:
        return None
    return plan_exchange(src, dst, 8 * byte_size(elem))


def rematerialize(lw: "KernelLowering", v: Value, want: LinearLayout) -> list[ir.Value]:
    """Recompute `v` (a rematerializable value) directly in layout `want`."""
    ins: Instr = v.owner
    op, n = ins.op, want.n_regs
    src = ins.operands[0] if ins.operands else None
    if op is Op.CONSTANT:
        return [lw.tile(v).regs[0]] * n
    if op is Op.ARANGE:
        return arange_regs(lw, want, ins.attrs.start)
    if op is Op.CONVERT_LAYOUT:  # a conversion of index math: recompute the source instead
        return lw.convert(src, want)
    if src is not None and lw.tile(src).layout is None:  # splat / broadcast of a scalar
        if op in (Op.SPLAT, Op.BROADCAST, Op.EXPAND_DIMS, Op.RESHAPE):
            return [lw.scalar(src)] * n
    if op in (Op.EXPAND_DIMS, Op.RESHAPE):
        return lw.convert(src, want.with_shape(shape_of(src.type)))
    if op is Op.PERMUTE:
        src_l = LY.permute_source(want, ins.attrs.order)
        regs = lw.convert(src, src_l)
        m = local_register_map(src_l, want, LY.view_for_permute(src_l.shape, ins.attrs.order))
        return [regs[i] for i in m]
    if op is Op.BROADCAST:
        src_l = LY.broadcast_source(want, shape_of(src.type))
        regs = lw.convert(src, src_l)
        m = local_register_map(src_l, want, broadcast_view(src_l.shape, want.shape))
        return [regs[i] for i in m]
    # elementwise (and hint): operands in the same layout, op per register
    ops = [lw.convert(o, want) if lw.tile(o).layout is not None else [lw.scalar(o)]
           for o in ins.operands]
    if op is Op.HINT:
        return ops[0]
    info = lw.plan.axis.get(v)
    return elementwise_regs(lw, ins, ops, n, constant_groups(want, info.constancy if info is not None else None))


# ---------------------------------------------------------------- shared-memory scratch

def to_memory(b: ir.IRBuilder, v: ir.Value, elem: Any) -> ir.Value:
    if isinstance(elem, ScalarType) and elem.is_bool:
        return b.zext(v, I8)
    return v


def from_memory(b: ir.IRBuilder, v: ir.Value, elem: Any) -> ir.Value:
    if isinstance(elem, ScalarType) and elem.is_bool:
        return b.icmp_unsigned("!=", v, ir.Constant(I8, 0))
    return v


def _shared_access(lw: "KernelLowering", byte_offset: ir.Value, absolute: bool,
                   nbytes: int) -> tuple[ir.Value, int]:
    """The pointer of an `nbytes` access at a scratch offset (relative to the scratch
    area, which starts after the shared buffers live at this point,
    `KernelLowering.scratch_base`; or, when `absolute`, from the start of shared memory)
    and the alignment to emit it with (`NVPTXDevice.access_alignment`)."""
    if not absolute and lw.scratch_base:
        byte_offset = lw.b.add(byte_offset, ir.Constant(I32, lw.scratch_base))
    return lw.dev.shared_ptr(lw.b, byte_offset, nbytes), lw.dev.access_alignment(lw.b, byte_offset, nbytes, "shared")


def smem_store(lw: "KernelLowering", byte_offset: ir.Value, values: list[ir.Value], elem: Any,
               absolute: bool = False) -> None:
    """Store consecutive elements (one, or a vector) at a scratch byte offset (or, when
    `absolute`, at that offset from the start of shared memory)."""
    b = lw.b
    mt = memory_type(elem)
    vals = [to_memory(b, v, elem) for v in values]
    ptr, align = _shared_access(lw, byte_offset, absolute, len(vals) * byte_size(elem))
    if len(vals) == 1:
        b.store(vals[0], ptr, align=align)
        return
    vt = ir.VectorType(mt, len(vals))
    vec = ir.Constant(vt, ir.Undefined)
    for i, x in enumerate(vals):
        vec = b.insert_element(vec, x, ir.Constant(I32, i))
    b.store(vec, ptr, align=align)


def smem_load(lw: "KernelLowering", byte_offset: ir.Value, count: int, elem: Any,
              absolute: bool = False) -> list[ir.Value]:
    b = lw.b
    mt = memory_type(elem)
    ptr, align = _shared_access(lw, byte_offset, absolute, count * byte_size(elem))
    if count == 1:
        return [from_memory(b, b.load(ptr, typ=mt, align=align), elem)]
    vt = ir.VectorType(mt, count)
    vec = b.load(ptr, typ=vt, align=align)
    return [from_memory(b, b.extract_element(vec, ir.Constant(I32, i)), elem) for i in range(count)]


def flat_run(lay: LinearLayout, max_count: int) -> int:
    """How many consecutive registers (from 0) hold consecutive flat indices."""
    k = 0
    while k < len(lay.reg) and lay.reg[k] == 1 << k and (2 << k) <= max_count:
        k += 1
    return 1 << k


def _runs_and_pad(src: LinearLayout, dst: LinearLayout, esize: int) -> tuple[int, int, int]:
    """Elements a thread writes / reads as one vector, and the padding of each row."""
    per = max(1, MAX_VECTOR_BYTES // esize)
    w, r = flat_run(src, per), flat_run(dst, per)
    row = src.shape[-1]
    pad = max(w, r) if row * esize >= 128 and len(src.shape) > 1 else 0
    return w, r, pad


def through_smem_bytes(src: LinearLayout, dst: LinearLayout, elem: Any) -> int:
    """The scratch a conversion from `src` to `dst` through shared memory needs."""
    esize = byte_size(elem)
    pad = _runs_and_pad(src, dst, esize)[2]
    return (src.numel + (src.numel // src.shape[-1]) * pad) * esize


def through_smem(lw: "KernelLowering", regs: list[ir.Value], src: LinearLayout, dst: LinearLayout,
                 elem: Any) -> list[ir.Value]:
    """Convert a tile from `src` to `dst` through the scratch buffer.

    Elements are stored in flat-index order, each row (the last dimension) padded by
    one vector: a side that walks down a column (a transpose) then hits a different
    bank on every row instead of the same one, while vectors stay aligned."""
    b = lw.b
    esize = byte_size(elem)
    w, r, pad = _runs_and_pad(src, dst, esize)
    row = src.shape[-1]
    row_bits = row.bit_length() - 1

    def offset(flat: ir.Value) -> ir.Value:
        if pad:
            flat = b.add(flat, b.mul(b.lshr(flat, ir.Constant(I32, row_bits)), ir.Constant(I32, pad)))
        return b.mul(flat, ir.Constant(I32, esize))

    lw.scratch(through_smem_bytes(src, dst, elem))
    # 16-bit rows a multiple of (row + pad) elements apart: 16-byte aligned, so a layout
    # holding ldmatrix/stmatrix fragments moves by those (`ldmatrix_reads`)
    matrices = esize == 2 and len(dst.shape) > 1 and (row + pad) % ROW_ELEMENTS == 0

    def low(bit: int) -> int:
        return bit if bit < row else (bit >> row_bits) * (row + pad)

    start = ir.Constant(I32, lw.scratch_base)  # ld/stmatrix take offsets from the start of shared memory
    written = ldmatrix_rows(src, low) if matrices and lw.capability >= 90 else None
    if written is not None:  # out of an accumulator's (or operand's) layout: stmatrix
        rows, count = written
        write_stmatrix(lw, rows, count, lambda g: lw.b.add(offset(lw.element_flat(rows, g)), start), regs)
    else:
        for g in range(0, src.n_regs, w):
            smem_store(lw, offset(lw.element_flat(src, g)), regs[g:g + w], elem)
    lw.smem_written()
    fragments = ldmatrix_rows(dst, low) if matrices and lw.capability >= 75 else None
    if fragments is not None:  # into an accumulator's (or operand's) layout: ldmatrix
        rows, count = fragments
        return read_ldmatrix(lw, rows, count, lambda g: lw.b.add(offset(lw.element_flat(rows, g)), start),
                             llvm_type(elem))
    out: list[ir.Value] = []
    for g in range(0, dst.n_regs, r):
        out.extend(smem_load(lw, offset(lw.element_flat(dst, g)), r, elem))
    return out
