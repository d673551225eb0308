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
   elements), a barrier, and each thread reads what the new layout gives it. The
   scratch is row- or column-major (the flat indices of the transposed tile), its rows
   padded by a vector or a 16-byte row, whichever takes the fewest accesses
   (`_scratch`); 16-bit layouts holding ld/stmatrix fragments move by those
   (`ldmatrix_reads`, `.trans` where their pairs run across the rows stored).

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
from .ldmatrix_reads import ROW_ELEMENTS, matrix_rows, read_ldmatrix, write_stmatrix
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


class _Scratch:
    """How a conversion lays the tile out in its scratch: in the flat-index order of
    `src` and `dst` (the two layouts, or for a 2-D tile both transposed, so that the
    scratch is column-major), each row padded by `pad` elements; `w` / `r` elements
    written / read as one vector; `low(b)` the element offset of flat-index basis `b`;
    `matrices`: 16-bit rows 16-byte aligned, so a layout holding ldmatrix/stmatrix
    fragments moves by those (`ldmatrix_reads`: ldmatrix from sm_75, stmatrix from
    sm_90 — `capability`)."""

    def __init__(self, src: LinearLayout, dst: LinearLayout, esize: int, capability: int,
                 matrix_rows: bool = False) -> None:
        self.src, self.dst, self.capability = src, dst, capability
        self.w, self.r, self.pad = _runs_and_pad(src, dst, esize)
        if matrix_rows and self.pad:  # a whole 16-byte row of padding: rows stay 16-byte aligned
            self.pad = max(self.pad, MAX_VECTOR_BYTES // esize)
        self.row = src.shape[-1]
        self.row_bits = self.row.bit_length() - 1
        self.matrices = esize == 2 and len(dst.shape) > 1 and (self.row + self.pad) % ROW_ELEMENTS == 0

    def low(self, bit: int) -> int:
        return bit if bit < self.row else (bit >> self.row_bits) * (self.row + self.pad)

    def _matrix_rows(self, lay: LinearLayout, since: int) -> Optional[tuple[LinearLayout, int, bool]]:
        if not self.matrices or self.capability < since:
            return None
        return matrix_rows(lay, self.low)

    def writes(self) -> Optional[tuple[LinearLayout, int, bool]]:
        """(row addresses, matrices an instruction, transposed?) of `stmatrix` writes of
        `src`, None when it is not written so."""
        return self._matrix_rows(self.src, 90)

    def reads(self) -> Optional[tuple[LinearLayout, int, bool]]:
        """The same for `ldmatrix` reads of `dst`."""
        return self._matrix_rows(self.dst, 75)

    def accesses(self) -> int:
        """Shared-memory instructions a thread issues (vectors, or ld/stmatrix): what
        the arrangement is chosen by."""
        written, read = self.writes(), self.reads()
        writes = written[0].n_regs if written is not None else self.src.n_regs // self.w
        reads = read[0].n_regs if read is not None else self.dst.n_regs // self.r
        return writes + reads

    def bytes(self, esize: int) -> int:
        return (self.src.numel + (self.src.numel // self.row) * self.pad) * esize


def _scratch(src: LinearLayout, dst: LinearLayout, esize: int, capability: int) -> _Scratch:
    """The scratch arrangement of a conversion with the fewest accesses (the first of
    equals): row-major or, for a 2-D tile, column-major (fla's wy backward: its `A`
    loaded column-major, converted to an mma.sync A fragment before a loop; row-major
    it was written one element a store, column-major it is written 16 bytes a store and
    read with `ldmatrix.trans`; a wgmma accumulator stored column-major: `stmatrix.trans`
    and 16-byte reads); rows padded by the wider vector or, for 16-bit tiles, by a
    16-byte row where that lets fragments move by ldmatrix/stmatrix (an mma.sync
    accumulator converted to an A fragment: pairs on both sides, rows padded by 2
    elements, stayed off ldmatrix)."""
    views = [(src, dst)]
    if len(src.shape) == 2:
        views.append((LY.permute_layout(src, (1, 0)), LY.permute_layout(dst, (1, 0))))
    options = [_Scratch(s, d, esize, capability, rows) for s, d in views
               for rows in ((False, True) if esize == 2 else (False,))]
    return min(options, key=_Scratch.accesses)


def through_smem_bytes(src: LinearLayout, dst: LinearLayout, elem: Any, capability: int) -> int:
    """The scratch a conversion from `src` to `dst` through shared memory needs (on a
    target of `capability`: its arrangement depends on the instructions it has)."""
    esize = byte_size(elem)
    return _scratch(src, dst, esize, capability).bytes(esize)


def through_smem(lw: "KernelLowering", regs: list[ir.Value], src: LinearLayout, dst: LinearLayout,
                 elem: Any) -> list[ir.Value]:
    """Convert a tile from `src` to `dst` through the scratch buffer.

    Elements are stored in flat-index order (or transposed, `_scratch`), each row
    padded by one vector: a side that walks down a column (a transpose) then hits a
    different bank on every row instead of the same one, while vectors stay aligned."""
    esize = byte_size(elem)
    sc = _scratch(src, dst, esize, lw.capability)
    src, dst, w, r = sc.src, sc.dst, sc.w, sc.r
    lw.scratch(sc.bytes(esize))
    written = sc.writes()
    if written is not None:  # out of an accumulator's (or operand's) layout: stmatrix
        rows, count, trans = written
        write_stmatrix(lw, rows, count, _Addresses(lw, sc, rows, esize), regs, trans)
    else:
        at = _Addresses(lw, sc, src, esize)
        for g in range(0, src.n_regs, w):
            smem_store(lw, at(g), regs[g:g + w], elem, absolute=True)
    lw.smem_written()
    fragments = sc.reads()
    if fragments is not None:  # into an accumulator's (or operand's) layout: ldmatrix
        rows, count, trans = fragments
        return read_ldmatrix(lw, rows, count, _Addresses(lw, sc, rows, esize), llvm_type(elem), trans)
    at = _Addresses(lw, sc, dst, esize)
    out: list[ir.Value] = []
    for g in range(0, dst.n_regs, r):
        out.extend(smem_load(lw, at(g), r, elem, absolute=True))
    return out


class _Addresses:
    """The shared byte address (from the start of shared memory) of a layout's register
    g in a conversion's scratch: where the register's flat-index bits meet none a
    thread's lanes or warps set, the padding of rows is additive over the two parts, so
    it is one per-thread base plus a constant — which folds into the access's immediate
    (a 128x128 epilogue's 128 stores took an address computation each before)."""

    def __init__(self, lw: "KernelLowering", sc: _Scratch, lay: LinearLayout, esize: int) -> None:
        self.lw, self.sc, self.lay, self.esize = lw, sc, lay, esize
        self.thread_mask = lay.thread_bits()
        self.base: Optional[ir.Value] = None

    def _padded(self, flat: ir.Value) -> ir.Value:
        b, sc = self.lw.b, self.sc
        if sc.pad:
            flat = b.add(flat, b.mul(b.lshr(flat, ir.Constant(I32, sc.row_bits)), ir.Constant(I32, sc.pad)))
        return b.add(b.mul(flat, ir.Constant(I32, self.esize)), ir.Constant(I32, self.lw.scratch_base))

    def __call__(self, g: int) -> ir.Value:
        reg = self.lay.reg_element(g)
        if reg & self.thread_mask:
            return self._padded(self.lw.element_flat(self.lay, g))
        if self.base is None:
            self.base = self._padded(self.lw.thread_part(self.lay))
        sc = self.sc
        padded = reg + (reg >> sc.row_bits) * sc.pad
        return self.lw.b.add(self.base, ir.Constant(I32, padded * self.esize)) if padded else self.base
