"""Lowering of source ops (constants, program ids, arange, splat) and of every
elementwise op: one `scalar_ops.lower_op` per register, all operands in the result's
layout (the plan guarantees it).

Registers whose elements the axis analysis proves equal (they lie in one block of the
value's constancy, e.g. the 8 registers of an `offs < n` mask with n divisible by 8)
are computed once: the first register of each such group is lowered and the others
reuse its LLVM value, so a masked tile costs one compare per vector instead of one per
element (LLVM cannot see that itself: the registers' indices differ).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Sequence

import llvmlite.ir as ir

from ...ir.core import Instr
from ...ir.ops import OP_INFO, Kind, Op
from ...ir.types import element_of
from ..llvm.scalar_ops import lower_op
from ..llvm.types import constant
from .linear_layout import LinearLayout, dim_fields
from .registry import handles

if TYPE_CHECKING:
    from .lower_kernel import KernelLowering

_AXES = "xyz"


@handles(Op.CONSTANT)
def lower_constant(lw: "KernelLowering", ins: Instr) -> None:
    r = ins.results[0]
    c = constant(r.type, ins.attrs.value)
    lay = lw.plan.layouts.get(r)
    lw.define(r, [c] * (lay.n_regs if lay else 1))


@handles(Op.PROGRAM_ID, Op.NUM_PROGRAMS)
def lower_program_id(lw: "KernelLowering", ins: Instr) -> None:
    name = "ctaid" if ins.op is Op.PROGRAM_ID else "nctaid"
    lw.define(ins.results[0], [lw.dev.sreg(lw.b, f"{name}.{_AXES[ins.attrs.axis]}")])


@handles(Op.SMID)
def lower_smid(lw: "KernelLowering", ins: Instr) -> None:
    lw.define(ins.results[0], [lw.dev.sreg(lw.b, "smid")])


@handles(Op.GLOBALTIMER)
def lower_globaltimer(lw: "KernelLowering", ins: Instr) -> None:
    lw.define(ins.results[0], [lw.dev.globaltimer(lw.b)])


def arange_regs(lw: "KernelLowering", lay: LinearLayout, start: int) -> list[ir.Value]:
    """The registers of `arange(start, ...)` in `lay`: each element's coordinate plus
    `start`, the constant kept outermost (`register_offsets`)."""
    return [lw.register_offsets.shifted(lw.b, lw.element_coords(lay, r)[0], start) for r in range(lay.n_regs)]


@handles(Op.ARANGE)
def lower_arange(lw: "KernelLowering", ins: Instr) -> None:
    r = ins.results[0]
    lw.define(r, arange_regs(lw, lw.plan.layouts[r], ins.attrs.start))


@handles(Op.SPLAT)
def lower_splat(lw: "KernelLowering", ins: Instr) -> None:
    r = ins.results[0]
    v = lw.scalar(ins.operands[0])
    lw.define(r, [v] * lw.plan.layouts[r].n_regs)


def constant_groups(lay: Optional[LinearLayout], constancy: Optional[Sequence[int]]) -> list[int]:
    """For each register of `lay`, the first register holding an element of the same
    constancy block (equal values), given the value's per-dimension `constancy`."""
    if lay is None:
        return [0]
    n = lay.n_regs
    if constancy is None or len(constancy) != len(lay.shape) or all(c <= 1 for c in constancy):
        return list(range(n))
    # two registers hold elements of one block iff their flat indices agree on every
    # bit above each dimension's low log2(constancy) bits; the thread's own part of
    # the index is the same for both, so the register parts decide
    low = 0
    for (s, nbits), c in zip(dim_fields(lay.shape), constancy):
        k = min(max(c, 1).bit_length() - 1, nbits)
        low |= ((1 << k) - 1) << s
    first: dict[int, int] = {}
    return [first.setdefault(lay.reg_element(r) & ~low, r) for r in range(n)]


def elementwise_regs(lw: "KernelLowering", ins: Instr, operands: Sequence[Sequence[ir.Value]],
                     n: int, reps: Optional[Sequence[int]] = None) -> list[ir.Value]:
    """Apply `ins`'s op register by register; scalar operands (one value) broadcast.
    `reps[r]`, when given, is a register known to hold the same value as r (r itself
    or an earlier one), whose result r reuses."""
    types = [o.type for o in ins.operands]
    rtype = ins.results[0].type
    pair = _pair_conversion(lw, ins, operands, n)
    out: list[ir.Value] = []
    paired = -1  # the register converted together with the one before it
    for r in range(n):
        if reps is not None and reps[r] != r:
            out.append(out[reps[r]])
            continue
        if r == paired:
            continue
        if pair is not None and r % 2 == 0 and r + 1 < n and (reps is None or reps[r + 1] == r + 1):
            out += pair(operands[0][r], operands[0][r + 1])
            paired = r + 1
            continue
        args = [regs[r] if len(regs) > 1 else regs[0] for regs in operands]
        split = lw.register_offsets.lower(lw.b, ins.op, args)
        out.append(split if split is not None else lower_op(lw.b, lw.target, ins.op, ins.attrs, args, types, rtype))
    return out


def _pair_conversion(lw: "KernelLowering", ins: Instr, operands: Sequence[Sequence[ir.Value]], n: int):
    """For a cast the target converts two at a time (f32 to fp8: one
    `cvt.rn.satfinite.{e4m3,e5m2}x2.f32` for two elements), the function converting a
    register pair; else None."""
    if ins.op is not Op.CAST or n < 2 or len(operands[0]) < n:
        return None
    src, dst = element_of(ins.operands[0].type), element_of(ins.results[0].type)
    convert_pair = getattr(lw.target, "convert_pair", None)
    if convert_pair is None or not lw.target.converts_pair(src, dst, getattr(ins.attrs, "rounding", "rtne")):
        return None
    return lambda lo, hi: convert_pair(lw.b, lo, hi, dst)


# inline assembly runs `pack` registers at a time: lower_inline_asm.py
_ELEMENTWISE = [op for op, info in OP_INFO.items() if info.kind is Kind.ELEMENTWISE and op is not Op.INLINE_ASM]


@handles(*_ELEMENTWISE)
def lower_elementwise(lw: "KernelLowering", ins: Instr) -> None:
    r = ins.results[0]
    lay = lw.plan.layouts.get(r)
    ops = [lw.operand(ins, k) for k in range(len(ins.operands))]
    reps = None
    if lay is not None and OP_INFO[ins.op].pure:
        info = lw.plan.axis.get(r)
        reps = constant_groups(lay, info.constancy if info is not None else None)
    lw.define(r, elementwise_regs(lw, ins, ops, lay.n_regs if lay else 1, reps))


@handles(Op.HINT)
def lower_hint(lw: "KernelLowering", ins: Instr) -> None:
    lw.define(ins.results[0], lw.operand(ins, 0))

