"""licm: loop-invariant code motion out of `for` loops.

Expects: verified IR. Guarantees: verified IR with the same behaviour in which every
pure, region-free, non-memory instruction (`ir_utils.is_movable_pure`) at the top level
of a `for` body whose operands are all defined outside the loop has moved to just
before the loop, in its original order. Loops are processed innermost first, so an
expression invariant in several nested loops climbs out of all of them.

Not hoisted: loads (a store in the loop may change what they read), stores and other
side effects, instructions with regions (reductions), and instructions nested in an
`if` inside the loop body (they may be guarded by the condition), and anything out of
a loop whose `tl.range` says `disable_licm=True` (as Triton honours it). Hoisted instructions
run even when the loop runs zero times; that is safe because pure ops cannot trap here
(integer division by zero has a defined result in the IR).
"""
from __future__ import annotations

from typing import Any

from ..ir.attrs import LoopAttrs
from ..ir.core import Block, Instr, Kernel
from ..ir.ops import Op
from .ir_utils import defined_inside, is_movable_pure


def licm(kernel: Kernel, ctx: Any = None) -> Kernel:
    """Hoist loop invariants of `kernel` in place; returns it."""
    _visit(kernel.body)
    return kernel


def _visit(block: Block) -> None:
    out: list[Instr] = []
    for ins in block.instrs:
        for region in ins.regions:
            _visit(region)
        if ins.op is Op.FOR:
            out.extend(_hoist(ins))
        out.append(ins)
    block.instrs = out


def _hoist(loop: Instr) -> list[Instr]:
    """Remove the invariant instructions from `loop`'s body and return them in order."""
    if isinstance(loop.attrs, LoopAttrs) and loop.attrs.disable_licm:
        return []  # `tl.range(..., disable_licm=True)`: the loop keeps its invariants
    inside = defined_inside(loop)
    body = loop.regions[0]
    hoisted: list[Instr] = []
    kept: list[Instr] = []
    for ins in body.instrs:
        if is_movable_pure(ins) and not any(v in inside for v in ins.operands):
            hoisted.append(ins)
            inside.difference_update(ins.results)
        else:
            kept.append(ins)
    body.instrs = kept
    return hoisted
