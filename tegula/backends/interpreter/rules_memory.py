"""Rules of load and store (the checked accesses themselves live in `access`).

`load ptr[, mask[, other]]` gathers the memory images of the pointed-to elements,
converts them to storage values and puts `other` (default 0) in masked-off lanes.
`store ptr, value[, mask]` converts the value to its memory image and scatters it.
A fault becomes `OutOfBoundsError` (outside the buffer, or no buffer at all) or
`KernelRuntimeError` (misaligned, read-only), located at the instruction with the
program id. Cache modifiers, eviction policies and `volatile` do not change results
and are ignored.
"""
from __future__ import annotations

import numpy as np

from ...errors import KernelRuntimeError, OutOfBoundsError
from ...ir.accessors import memory_operands
from ...ir.core import Instr
from ...ir.ops import Op
from ...ir.types import PointerType, element_of, shape_of
from . import access
from .access import AccessFault
from .compiler import Compiler, source_loc
from .memory import Ptr, select_ptr
from .registry import MEMORY_SLOT, PID_TUPLE_SLOT, Step, rule
from .values import from_memory, memory_dtype, to_memory, zero


def located_access_error(fault: AccessFault, ins: Instr, env) -> KernelRuntimeError:
    """The located exception of a fault (shared by the load, store and atomic rules)."""
    cls = OutOfBoundsError if fault.kind in ("bounds", "nobuffer") else KernelRuntimeError
    return cls(fault.message, loc=source_loc(ins), pid=env[PID_TUPLE_SLOT])


def _broadcaster(value_shape, shape):
    """A function bringing an operand to the access shape, or None when it has it."""
    if tuple(value_shape) == tuple(shape):
        return None
    return lambda x: np.broadcast_to(x, shape)


@rule(Op.LOAD)
def load(ins: Instr, c: Compiler) -> Step:
    parts = memory_operands(ins)
    has_mask = parts.mask is not None
    p = c.slot(parts.pointer)
    m = c.slot(parts.mask) if parts.mask is not None else None
    oth = c.slot(parts.other) if has_mask and parts.other is not None else None
    o = c.slot(ins.result)
    elem = element_of(ins.result.type)
    shape = shape_of(ins.result.type)
    mdt = memory_dtype(elem)
    type_name = str(elem)
    mask_fix = _broadcaster(shape_of(parts.mask.type), shape) if has_mask else None
    is_ptr = isinstance(elem, PointerType)
    default = None if is_ptr else zero(elem)

    def step(env):
        ptr = env[p]
        mask = None
        if m is not None:
            mask = env[m]
            if mask_fix is not None:
                mask = mask_fix(mask)
        mem = env[MEMORY_SLOT]
        try:
            raw = access.load(mem, ptr, mask, mdt, type_name)
        except AccessFault as fault:
            raise located_access_error(fault, ins, env) from None
        if is_ptr:
            val = mem.resolve(raw.view(np.int64) if isinstance(raw, np.ndarray) else np.int64(raw))
            if mask is not None:
                other = env[oth] if oth is not None else mem.resolve(np.zeros(shape, np.int64)[()])
                val = select_ptr(mem, mask, val, other)
        else:
            val = from_memory(raw, elem)
            if mask is not None:
                val = np.where(mask, val, env[oth] if oth is not None else default)
        env[o] = val
    return step


@rule(Op.STORE)
def store(ins: Instr, c: Compiler) -> Step:
    parts = memory_operands(ins)
    p, v = c.slot(parts.pointer), c.slot(parts.value)
    m = c.slot(parts.mask) if parts.mask is not None else None
    elem = element_of(ins.operands[0].type).pointee
    mdt = memory_dtype(elem)
    type_name = str(elem)
    is_ptr = isinstance(elem, PointerType)

    def step(env):
        mem = env[MEMORY_SLOT]
        value = env[v]
        if is_ptr:
            raw = np.asarray(mem.address(value)).view(np.uint64) if isinstance(value, Ptr) else value
        else:
            raw = to_memory(value, elem)
        try:
            access.store(mem, env[p], raw, env[m] if m is not None else None, mdt, type_name)
        except AccessFault as fault:
            raise located_access_error(fault, ins, env) from None
    return step
