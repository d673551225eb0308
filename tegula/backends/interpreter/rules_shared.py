"""Rules of the `tgir` shared-memory ops, with their sequential meaning, so the CUDA
backend's passes that introduce them can be translation-validated on the interpreter.

- `local_alloc` makes a zero-filled numpy buffer of the buffer type's shape and storage
  dtype (the dtype tiles of its element have here) (a fresh one each time it executes, as a new allocation would be);
- `async_copy buf, slot, ptr[, mask][, index, bound]` completes at issue: it is a
  checked `load` of the pointers (masked-off elements zero; with a bound, elements
  where `index >= bound` are masked off too) written into `buf[slot]`;
- `async_commit` / `async_wait` order nothing here, copies having already landed,
  `local_dealloc` leaves the buffer to the garbage collector, and `barrier` has
  nothing to wait for (one program runs at a time);
- `local_load buf, slot` returns a copy of `buf[slot]`, `local_copy src, i, dst, j`
  writes a copy of `src[i]` into `dst[j]` and `local_store buf, slot, x` a copy of `x`
  into `buf[slot]`; `dot_wait` is its operand (dots
  complete at issue), and so is `convert_layout` (an encoding says where values live,
  not what they are).
"""
from __future__ import annotations

import numpy as np

from ...ir.accessors import memory_operands
from ...ir.attrs import LoadAttrs
from ...ir.core import Instr, Value
from ...ir.ops import Op
from ...ir.types import I1, TileType
from .compiler import Compiler
from .registry import Step, rule
from .rules_memory import load
from .values import storage_dtype


@rule(Op.LOCAL_ALLOC)
def local_alloc(ins: Instr, c: Compiler) -> Step:
    o = c.slot(ins.result)
    shape, dtype = ins.result.type.shape, storage_dtype(ins.result.type.element)

    def step(env):
        env[o] = np.zeros(shape, dtype)
    return step


@rule(Op.ASYNC_COPY)
def async_copy(ins: Instr, c: Compiler) -> Step:
    buf_t = ins.operands[0].type
    mem = memory_operands(ins)
    shape = tuple(buf_t.shape[1:])
    # the copy's read is a load of the slot's tile: reuse its rule (checks, conversions)
    landed = Value(TileType(shape, buf_t.element))
    mask = mem.mask
    combine = None
    if mem.bound is not None:  # the bound is one more term of the mask
        mask = Value(TileType(shape, I1))
        m = c.slot(mem.mask) if mem.mask is not None else None
        i, n, out = c.slot(mem.index), c.slot(mem.bound), c.slot(mask)

        def combine(env):
            inside = np.asarray(env[i]) < np.asarray(env[n])
            env[out] = inside if m is None else np.logical_and(env[m], inside)
    operands = [mem.pointer] + ([mask] if mask is not None else [])
    as_load = Instr(Op.LOAD, operands, [landed], LoadAttrs(has_mask=mask is not None), loc=ins.loc)
    read = load(as_load, c)
    b, s, v = c.slot(ins.operands[0]), c.slot(ins.operands[1]), c.slot(landed)

    def step(env):
        if combine is not None:
            combine(env)
        read(env)
        env[b][int(env[s])] = env[v]
    return step


@rule(Op.ASYNC_COMMIT, Op.ASYNC_WAIT, Op.LOCAL_DEALLOC, Op.BARRIER, Op.BULK_WAIT)
def async_ordering(ins: Instr, c: Compiler) -> None:
    return None


@rule(Op.DOT_WAIT, Op.CONVERT_LAYOUT)
def same_value(ins: Instr, c: Compiler) -> None:
    """dot_wait and convert_layout leave the tile's values as they are."""
    c.alias(ins.results[0], c.slot(ins.operands[0]))
    return None


@rule(Op.LOCAL_LOAD)
def local_load(ins: Instr, c: Compiler) -> Step:
    b, s, o = c.slot(ins.operands[0]), c.slot(ins.operands[1]), c.slot(ins.result)

    def step(env):
        env[o] = env[b][int(env[s])].copy()
    return step


@rule(Op.LOCAL_COPY)
def local_copy(ins: Instr, c: Compiler) -> Step:
    src, i, dst, j = (c.slot(v) for v in ins.operands)

    def step(env):
        env[dst][int(env[j])] = env[src][int(env[i])]
    return step


@rule(Op.LOCAL_STORE)
def local_store(ins: Instr, c: Compiler) -> Step:
    buf, i, x = (c.slot(v) for v in ins.operands)

    def step(env):
        env[buf][int(env[i])] = env[x]
    return step
