"""How a global-memory access is laid out across threads: the pointer operand of a load,
store or async copy (`access_operands`), its dimension order and vector width
(`memory_access`: contiguous, aligned, under a constant mask, at most 16 bytes, and no
wider than keeps every thread busy), and which loads are smaller than the CTA
(`is_small_load`: done where their user wants them, as wide as their pointers allow).
Read by layout assignment and by `encode_layouts` when it rebuilds the plan."""
from __future__ import annotations

from typing import Any, Mapping, Optional

from ...ir.accessors import memory_operands
from ...ir.core import Instr, Value
from ...ir.ops import Op
from ...ir.types import TileType, shape_of
from ...passes import contiguity_order, vector_width

# ops that access global memory through a tile of pointers: the pointer operand's index
ACCESS_OPS = {Op.LOAD: 0, Op.STORE: 0, Op.ASYNC_COPY: 2}


def access_operands(ins: Instr) -> tuple[Value, Optional[Value]]:
    """The pointers and the mask (or None) of a load, store or async_copy."""
    parts = memory_operands(ins)
    return parts.pointer, parts.mask


def memory_access(ins: Instr, num_warps: int, info: Mapping[Value, Any]) -> tuple[list[int], int]:
    """A load/store's dimension order (most contiguous first) and vector width (elements:
    contiguous, aligned, under a constant mask, at most 16 bytes)."""
    parts = memory_operands(ins)
    ptr, mask = parts.pointer, parts.mask
    shape = shape_of(ptr.type)
    order = contiguity_order(ptr, info)
    bound = (parts.index, parts.bound) if parts.bound is not None else None
    vec = vector_width(ptr, mask, info, axis=order[0], bound=bound)
    if is_small_load(ins, num_warps):
        return list(order), vec  # loaded where used (replicated): as wide as it may be
    numel = 1
    for s in shape:
        numel *= s
    # keep every thread busy before widening vectors (Triton's rule)
    return list(order), max(1, min(vec, numel // (32 * num_warps)))


def is_small_store(ins: Instr, num_warps: int) -> bool:
    """A store of fewer elements than the CTA has threads (attention's logsumexp row, a
    layer norm's means): done in the layout of the value it stores where that value
    has one (`_Assigner.stored_where_computed`): threads holding the same element store
    it once (`KernelLowering.duplicate_free`), instead of the value going through
    shared memory, two barriers, to a coalesced layout that saves no transaction."""
    if ins.op is not Op.STORE or not isinstance(ins.operands[1].type, TileType):
        return False
    return ins.operands[1].type.numel < 32 * num_warps


def is_small_load(ins: Instr, num_warps: int) -> bool:
    """A load (or a pipelined load's copy) of fewer elements than the CTA has threads
    (attention's row maxima and deltas, a bias row). A load is done in the layout its
    user wants, where that user has a wish (`_Assigner.loaded_where_used`); either is
    as wide per thread as its pointers allow, since some threads idle anyway."""
    if ins.op is Op.ASYNC_COPY:
        ptr = access_operands(ins)[0]
        return isinstance(ptr.type, TileType) and ptr.type.numel < 32 * num_warps
    if ins.op is not Op.LOAD or ins.attrs.volatile or not isinstance(ins.results[0].type, TileType):
        return False
    return ins.results[0].type.numel < 32 * num_warps
