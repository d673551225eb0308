"""Narrow values packed into the 32-bit registers tensor-core instructions read and write.

A tile's registers hold one element each (`half`, `i8`, ...), but `mma.sync` and
`wgmma` take their operands and, for an f16 accumulator, their accumulators as 32-bit
registers of consecutive elements (`.f16x2`: the lower-indexed element in the low
half). The packing is a bitcast of a small vector, so a chain of instructions that
unpack and repack the same words folds away in LLVM (no `mov` in the PTX between two
`mma.sync` of one accumulator).

An f16 accumulator is packed in pairs of consecutive registers: in the mma.sync and
wgmma accumulator layouts (`mma_layouts`) register bit 0 steps the column by one, the
two halves of one `.f16x2` register of the instruction's fragment.
"""
from __future__ import annotations

import llvmlite.ir as ir

from ..llvm.types import I32


def pack_registers(b: ir.IRBuilder, vals: list[ir.Value], per_register: int) -> list[ir.Value]:
    """Consecutive elements packed `per_register` to an i32 register (two 16-bit or four
    8-bit ones), the first in the low bits."""
    out = []
    for at in range(0, len(vals), per_register):
        group = vals[at:at + per_register]
        vec = ir.Constant(ir.VectorType(group[0].type, per_register), ir.Undefined)
        for i, x in enumerate(group):
            vec = b.insert_element(vec, x, ir.Constant(I32, i))
        out.append(b.bitcast(vec, I32))
    return out


def unpack_registers(b: ir.IRBuilder, words: list[ir.Value], elem: ir.Type, per_register: int) -> list[ir.Value]:
    """The inverse of `pack_registers`: each i32 register's `per_register` elements of
    type `elem`, low bits first."""
    vec_ty = ir.VectorType(elem, per_register)
    out = []
    for w in words:
        vec = b.bitcast(w, vec_ty)
        out += [b.extract_element(vec, ir.Constant(I32, i)) for i in range(per_register)]
    return out


def is_f16(v: ir.Value) -> bool:
    """Whether `v` is an f16 register (an f16 accumulator's element)."""
    return isinstance(v.type, ir.HalfType)
