"""Rules of the tensor-descriptor ops: their sequential meaning, which every backend's
lowering (TMA on Hopper, `passes.descriptors_to_pointers` elsewhere) must match.

A descriptor value is a `Descriptor`: the base pointer and the shape and strides as
Python ints. An access covers the block at `offsets`: element `i` of the block is at
coordinates `offsets + i` (32-bit arithmetic, as the pointer form computes them), at
address `base + sum(coord[d] * stride[d])` (64-bit), and is *inside* when every
coordinate lies in `[0, shape[d])`. A load reads the inside elements and gives the
padding (0, or NaN for a "nan" descriptor) elsewhere; a store or reduction writes the
inside elements only (TMA clips the box). Faults (a descriptor larger than its buffer)
are located like a load's.
"""
from __future__ import annotations

from typing import NamedTuple, Optional, Sequence

import numpy as np

from ...errors import CompilationError
from ...ir.core import Instr, Value
from ...ir.ops import Op
from ...ir.types import TensorDescType
from .access import AccessFault, read_modify_write
from .access import load as checked_load
from .access import store as checked_store
from .compiler import Compiler
from .memory import Ptr
from .registry import MEMORY_SLOT, Step, rule
from .rules_atomic import _update
from .rules_memory import located_access_error
from .values import from_memory, memory_dtype, to_memory


class Descriptor(NamedTuple):
    base: Ptr
    shape: tuple[int, ...]
    strides: tuple[int, ...]


def block_of(desc: Descriptor, offsets: list, block: tuple[int, ...], elem_bytes: int,
             checked: Optional[Sequence[int]] = None) -> tuple[Ptr, Optional[np.ndarray]]:
    """The pointers of the block at `offsets` and its inside mask along the `checked`
    dimensions (all by default; None when that is none: a block pointer's unchecked
    access)."""
    rank = len(block)
    checked = range(rank) if checked is None else checked
    addr = np.zeros((1,) * rank, np.int64)
    inside = np.ones((1,) * rank, bool)
    for d, (off, size) in enumerate(zip(offsets, block)):
        with np.errstate(over="ignore"):
            coord = np.int32(off) + np.arange(size, dtype=np.int32)  # wraps as the i32 add does
        coord = coord.reshape((1,) * d + (size,) + (1,) * (rank - 1 - d)).astype(np.int64)
        addr = addr + coord * np.int64(desc.strides[d])
        if d in checked:
            inside = inside & (coord >= 0) & (coord < desc.shape[d])
    addr = np.broadcast_to(addr, block)
    base = desc.base
    buf = base.buf if base.uniform else np.broadcast_to(base.buf, block)
    return Ptr(buf, base.off + addr * np.int64(elem_bytes)), (np.broadcast_to(inside, block) if checked else None)


@rule(Op.MAKE_TENSOR_DESCRIPTOR)
def make_tensor_descriptor(ins: Instr, c: Compiler) -> Step:
    base, *parts = c.slots(ins.operands)
    n = len(parts) // 2
    o = c.slot(ins.result)

    def step(env):
        env[o] = Descriptor(env[base], tuple(int(env[s]) for s in parts[:n]), tuple(int(env[s]) for s in parts[n:]))
    return step


def _access(ins: Instr, c: Compiler):
    desc_type: TensorDescType = ins.operands[0].type
    n = desc_type.rank
    d, *offs = c.slots(ins.operands[:1 + n])
    elem = desc_type.element

    def block(env) -> tuple[Ptr, np.ndarray]:
        return block_of(env[d], [env[s] for s in offs], desc_type.block, elem.bytes)
    return desc_type, elem, block


@rule(Op.DESCRIPTOR_LOAD)
def descriptor_load(ins: Instr, c: Compiler) -> Step:
    desc_type, elem, block = _access(ins, c)
    o = c.slot(ins.result)
    mdt, type_name = memory_dtype(elem), str(elem)
    fill = from_memory(np.zeros((), mdt), elem)[()]
    if desc_type.padding == "nan":
        fill = np.asarray(np.nan, dtype=np.asarray(fill).dtype)[()]

    def step(env):
        ptrs, inside = block(env)
        try:
            raw = checked_load(env[MEMORY_SLOT], ptrs, inside, mdt, type_name)
        except AccessFault as fault:
            raise located_access_error(fault, ins, env) from None
        env[o] = np.where(inside, from_memory(raw, elem), fill)
    return step


@rule(Op.DESCRIPTOR_STORE)
def descriptor_store(ins: Instr, c: Compiler) -> Step:
    _desc_type, elem, block = _access(ins, c)
    v = c.slot(ins.operands[-1])
    mdt, type_name = memory_dtype(elem), str(elem)

    def step(env):
        ptrs, inside = block(env)
        try:
            checked_store(env[MEMORY_SLOT], ptrs, to_memory(env[v], elem), inside, mdt, type_name)
        except AccessFault as fault:
            raise located_access_error(fault, ins, env) from None
    return step


@rule(Op.TMA_STORE)
def tma_store(ins: Instr, c: Compiler) -> Step:
    """The copy completes at issue: descriptor_store of the value (the buffer it passes
    through holds nothing a later op reads)."""
    as_store = Instr(Op.DESCRIPTOR_STORE, ins.operands[1:], [], loc=ins.loc)
    return descriptor_store(as_store, c)


@rule(Op.DESCRIPTOR_REDUCE)
def descriptor_reduce(ins: Instr, c: Compiler) -> Step:
    _desc_type, elem, block = _access(ins, c)
    v = c.slot(ins.operands[-1])
    mdt, type_name = memory_dtype(elem), str(elem)
    kind = "fadd" if ins.attrs.kind == "add" and elem.is_float else ins.attrs.kind
    update = _update(kind, elem)

    def step(env):
        ptrs, inside = block(env)
        val = np.asarray(to_memory(env[v], elem), dtype=mdt)
        try:
            read_modify_write(env[MEMORY_SLOT], ptrs, inside, mdt, type_name, update, val)
        except AccessFault as fault:
            raise located_access_error(fault, ins, env) from None
    return step


@rule(Op.TMA_LOAD)
def tma_load(ins: Instr, c: Compiler) -> Step:
    """The copy completes at issue: the block as `descriptor_load` reads it, into the
    slot (transposed when the slot holds the transpose)."""
    buf, slot, _bars, pred = c.slots(ins.operands[:4])
    desc_type: TensorDescType = ins.operands[4].type
    landed = Value(desc_type.block_type)
    as_load = Instr(Op.DESCRIPTOR_LOAD, ins.operands[4:], [landed], loc=ins.loc)
    read = descriptor_load(as_load, c)
    v = c.slot(landed)
    transposed = ins.attrs.transposed

    def step(env):
        if not env[pred]:
            return
        read(env)
        env[buf][int(env[slot])] = env[v].T if transposed else env[v]
    return step


@rule(Op.MBARRIER_INIT, Op.MBARRIER_WAIT, Op.MBARRIER_INVAL, Op.MBARRIER_ARRIVE)
def mbarrier(ins: Instr, c: Compiler) -> None:
    """Copies complete at issue, so a phase has always completed when it is waited for."""
    return None


@rule(Op.WARPGROUP_TURN)
def warpgroup_turn(ins: Instr, c: Compiler) -> None:
    """Turns order the warpgroups' dot issue (a schedule, no values): one sequential
    program has a single order already."""
    return None


@rule(Op.WARP_ROLE)
def warp_role(ins: Instr, c: Compiler) -> Step:
    """Warp partitions run concurrently, handing ring slots over through mbarriers; one
    sequential program cannot play both (the producer would overwrite slots before they
    are read), so a warp-specialized kernel runs on the GPU or its emulator only."""
    def step(env):
        raise CompilationError("a warp-specialized kernel (tgir with 'warp_role') runs on the GPU or the CUDA "
                               "emulator, not on the interpreter", ins.loc)
    return step
