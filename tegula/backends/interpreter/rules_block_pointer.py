"""Rules of the block-pointer ops: their sequential meaning, which the pass
`block_pointers_to_pointers` (every compiled backend's lowering of them) must match.

A block pointer value is a `BlockPointer`: the base pointer, the shape and strides as
Python ints and the offsets as i32 (`advance` adds with i32 wrap-around, as the pointer
form's scalar adds do). An access covers the block at the offsets: element `i` is at
coordinates `offsets + i` (i32), at address `base + sum(i64(coord[d]) * stride[d])`,
and is *inside* when each coordinate of a `boundary_check` dimension lies in
`[0, shape[d])` (unchecked dimensions are not tested: an access there outside the
buffer faults, located like a load's). A load reads the inside elements and gives the
padding (0, or NaN) elsewhere; a store writes the inside elements only.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...ir.core import Instr
from ...ir.ops import Op
from ...ir.types import BlockPtrType
from . import access
from .access import AccessFault
from .compiler import Compiler
from .memory import Ptr
from .registry import MEMORY_SLOT, Step, rule
from .rules_descriptor import Descriptor, block_of
from .rules_memory import located_access_error
from .values import from_memory, memory_dtype, to_memory


class BlockPointer(NamedTuple):
    base: Ptr
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offsets: tuple[np.int32, ...]


@rule(Op.MAKE_BLOCK_PTR)
def make_block_ptr(ins: Instr, c: Compiler) -> Step:
    base, *parts = c.slots(ins.operands)
    n = len(parts) // 3
    shape, strides, offsets = parts[:n], parts[n:2 * n], parts[2 * n:]
    o = c.slot(ins.result)

    def step(env):
        env[o] = BlockPointer(env[base], tuple(int(env[s]) for s in shape), tuple(int(env[s]) for s in strides),
                              tuple(np.int32(env[s]) for s in offsets))
    return step


@rule(Op.ADVANCE)
def advance(ins: Instr, c: Compiler) -> Step:
    p, *deltas = c.slots(ins.operands)
    o = c.slot(ins.result)

    def step(env):
        bp = env[p]
        moved = tuple(np.int32(off + np.int32(env[d])) for off, d in zip(bp.offsets, deltas))
        env[o] = bp._replace(offsets=moved)
    return step


def _block(ins: Instr, c: Compiler):
    """The op's block-pointer type and a function of the environment giving the
    block's pointers and its mask along the checked dimensions (None if none)."""
    bp_type: BlockPtrType = ins.operands[0].type
    p = c.slot(ins.operands[0])
    checked = ins.attrs.boundary_check
    elem_bytes = bp_type.element.bytes

    def block(env):
        bp = env[p]
        return block_of(Descriptor(bp.base, bp.shape, bp.strides), list(bp.offsets), bp_type.block, elem_bytes,
                        checked)
    return bp_type, block


@rule(Op.BLOCK_LOAD)
def block_load(ins: Instr, c: Compiler) -> Step:
    bp_type, block = _block(ins, c)
    elem = bp_type.element
    o = c.slot(ins.result)
    mdt, type_name = memory_dtype(elem), str(elem)
    fill = from_memory(np.zeros((), mdt), elem)[()]
    if ins.attrs.padding == "nan":
        fill = np.asarray(np.nan, dtype=np.asarray(fill).dtype)[()]

    def step(env):
        ptrs, inside = block(env)
        try:
            raw = access.load(env[MEMORY_SLOT], ptrs, inside, mdt, type_name)
        except AccessFault as fault:
            raise located_access_error(fault, ins, env) from None
        value = from_memory(raw, elem)
        env[o] = value if inside is None else np.where(inside, value, fill)
    return step


@rule(Op.BLOCK_STORE)
def block_store(ins: Instr, c: Compiler) -> Step:
    bp_type, block = _block(ins, c)
    elem = bp_type.element
    v = c.slot(ins.operands[1])
    mdt, type_name = memory_dtype(elem), str(elem)

    def step(env):
        ptrs, inside = block(env)
        try:
            access.store(env[MEMORY_SLOT], ptrs, to_memory(env[v], elem), inside, mdt, type_name)
        except AccessFault as fault:
            raise located_access_error(fault, ins, env) from None
    return step
