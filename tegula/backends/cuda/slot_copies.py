"""Tiles crossing between shared-memory layouts through registers: a slot copied into a
slot of another layout (`copy_slot`, the `local_copy` op: a staging slot transposed into
the K-major slot an 8-bit wgmma operand needs), and registers stored into a slot as
many elements a store as lie consecutive there (`store_registers`, `slot_run_bits`;
also the stores of an `async_copy` done through registers). The staging slot's own
layout is `staging_offsets`. Pure lowering helpers; `lower_shared` owns the ops."""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import llvmlite.ir as ir

from ...ir.types import ScalarType
from . import layouts as LY
from .convert import smem_load, smem_store
from .linear_layout import BitMap, LinearLayout
from .lower_mma import CHUNK_BYTES, offset_layout, vector_run
from .shared_layouts import swizzled_offsets

if TYPE_CHECKING:
    from .lower_kernel import KernelLowering


def copy_slot(lw: "KernelLowering", shape: tuple[int, ...], elem: ScalarType, src_offsets: BitMap,
              src_base: ir.Value, dst_offsets: BitMap, dst_base: ir.Value) -> None:
    """Copy a slot (element offsets `src_offsets`, at byte offset `src_base`) into one of
    another layout through registers: each thread reads 16-byte runs where the source
    keeps them and writes the runs the destination keeps. Between a staging slot and
    the K-major slot of an 8-bit wgmma operand the registers are laid out by
    `transposing_copy_layout`: four rows a thread, so the transposed bytes leave as
    32-bit stores, the 32 lanes of one writing one row of the K-major slot (no bank met
    twice), and the staging swizzle spreads the reads' 8 lanes over 8 chunks."""
    size = elem.bytes
    src_fast, dst_fast = contiguous_dim(src_offsets, shape), contiguous_dim(dst_offsets, shape)
    vec = max(1, CHUNK_BYTES // size)
    if src_fast is not None and dst_fast is not None and src_fast != dst_fast:
        lay = LY.transposing_copy_layout(shape, lw.num_warps, vec, src_fast, dst_fast, max(1, 4 // size))
    else:
        order = None if src_fast is None else [src_fast] + [d for d in range(len(shape)) if d != src_fast]
        lay = LY.default_blocked(shape, lw.num_warps, vec, order)
    read_where = offset_layout(lay, src_offsets)
    run = vector_run(read_where, CHUNK_BYTES // size)
    by_element: dict[int, ir.Value] = {}
    for r in lay.distinct_register_groups(run):
        off = lw.element_byte_offset(read_where, r, size, src_base)
        for i, v in enumerate(smem_load(lw, off, run, elem, absolute=True)):
            by_element[lay.reg_element(r + i)] = v
    store_registers(lw, by_element, lay, offset_layout(lay, dst_offsets), elem, dst_base)


def store_registers(lw: "KernelLowering", by_element: dict[int, ir.Value], lay: LinearLayout,
                     where: LinearLayout, elem: ScalarType, base: ir.Value) -> None:
    """Store a thread's registers of `lay` (given by the element each holds, thread part
    aside) into a slot at byte offset `base`, `where` their slot offsets: each store as
    many elements as lie consecutive in the slot (`slot_run_bits`), a register group
    that holds the same elements as an earlier one (broadcast bits) not again."""
    size = elem.bytes
    bits = slot_run_bits(where, CHUNK_BYTES // size)
    steps = [_register_combination(j, bits) for j in range(1 << len(bits))]
    in_run = sum(1 << i for i in bits)
    stored: set[int] = set()
    for r in range(lay.n_regs):
        first = lay.reg_element(r)
        if r & in_run or first in stored:
            continue
        stored.add(first)
        vals = [by_element[lay.reg_element(r ^ d)] for d in steps]
        off = lw.element_byte_offset(where, r, size, base)
        smem_store(lw, off, vals, elem, absolute=True)


def contiguous_dim(offsets: BitMap, shape: tuple[int, ...]) -> Optional[int]:
    """The dimension whose consecutive elements lie next to each other in a slot stored
    by `offsets` (a 2-D one), or None."""
    if len(shape) != 2:
        return None
    if offsets(1) == 1:  # the flat index of element (0, 1)
        return 1
    if offsets(shape[1]) == 1:  # of element (1, 0)
        return 0
    return None


def _register_combination(j: int, bits: list[int]) -> int:
    """The register index offset of element j of a run whose steps are register `bits`."""
    return sum(1 << bit for i, bit in enumerate(bits) if j >> i & 1)


def slot_run_bits(where: LinearLayout, max_count: int) -> list[int]:
    """The register bits that step a thread's slot offset by 1, 2, 4, ... (at most
    `max_count` elements in all) while every other basis leaves those low offset bits
    alone: the registers a thread stores as one vector. They are the first register
    bits where the slot keeps the registers' order (`vector_run`), others where it is
    stored across it (four K rows of a transposing copy, each a later register bit)."""
    bits: list[int] = []
    while (2 << len(bits)) <= max_count:
        step = [i for i, image in enumerate(where.reg) if image == 1 << len(bits) and i not in bits]
        if not step:
            break
        bits.append(step[0])
    while bits:
        low = (1 << len(bits)) - 1
        others = [image for i, image in enumerate(where.reg) if i not in bits]
        if not any(image & low for image in others + list(where.lane) + list(where.warp)):
            break
        bits.pop()
    return bits


def staging_offsets(shape: tuple[int, ...], elem_bytes: int, along_rows: bool) -> BitMap:
    """A staging slot (the source of a transposing `local_copy`) stored the way its copies
    run, its 16-byte chunks permuted by XOR with bits 2-4 of the other index: the copy
    reads four consecutive rows a thread and 8 lanes a 128-byte access, which then hit
    8 different chunks (bits 0-2 would give two), while the cp.async into it keep their
    16-byte vectors."""
    fast = 0 if along_rows else 1
    vec = max(1, min(CHUNK_BYTES // elem_bytes, shape[fast]))
    return swizzled_offsets(shape, vec, 4, 8, (fast, 1 - fast))
