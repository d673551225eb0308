"""cse: common subexpression elimination of pure instructions.

Expects: verified IR. Guarantees: verified IR with the same behaviour, in which no pure,
region-free, non-memory instruction recomputes (same op, attributes, operands and
result types) a value an earlier instruction already computed where that earlier one
dominates it. In structured IR an instruction dominates the rest of its block and
everything nested there, so the table of available expressions is scoped: entries made
inside a region are dropped when the region ends (the two regions of an `if`, and the
before/after regions of a `while`, do not see each other's).

Operands of commutative ops (the op table's `commutative`) are ordered before keying,
so `add %a, %b` and `add %b, %a` merge. Loads are never merged: a store may come between.
"""
from __future__ import annotations

from typing import Any, Hashable, Optional

from ..ir.core import Block, Instr, Kernel, Value
from ..ir.ops import OP_INFO, Op
from .const_fold import canonical_literal
from .ir_utils import is_movable_pure, resolve


def cse(kernel: Kernel, ctx: Any = None) -> Kernel:
    """Merge duplicate pure computations of `kernel` in place; returns it."""
    _CSE().block(kernel.body)
    return kernel


def _literal_key(value: Any, t: Any) -> Hashable:
    # 0, 0.0, -0.0 and False compare equal in Python, and nan != nan: key on the
    # literal's type and repr after canonicalising it to its IR type
    lit = canonical_literal(value, t)
    return (type(lit).__name__, repr(lit))


def instr_key(ins: Instr) -> Optional[Hashable]:
    """What makes two instructions compute the same value, or None if unkeyable."""
    operands = list(ins.operands)
    if OP_INFO[ins.op].commutative and len(operands) == 2:
        operands.sort(key=lambda v: v.id)
    if ins.op is Op.CONSTANT:
        attrs: Hashable = _literal_key(ins.attrs.value, ins.result.type)
    else:
        attrs = ins.attrs
    key = (ins.op, tuple(operands), attrs, tuple(r.type for r in ins.results))
    try:
        hash(key)
    except TypeError:  # an attribute holding a list: never merged
        return None
    return key


class _CSE:
    def __init__(self) -> None:
        self.available: dict[Hashable, Instr] = {}
        self.mapping: dict[Value, Value] = {}

    def block(self, block: Block) -> None:
        added: list[Hashable] = []
        kept: list[Instr] = []
        for ins in block.instrs:
            ins.operands = [resolve(v, self.mapping) for v in ins.operands]
            key = instr_key(ins) if is_movable_pure(ins) else None
            if key is not None:
                earlier = self.available.get(key)
                if earlier is not None:
                    for old, new in zip(ins.results, earlier.results):
                        self.mapping[old] = new
                    continue
                self.available[key] = ins
                added.append(key)
            for region in ins.regions:
                self.block(region)
            kept.append(ins)
        block.instrs = kept
        for key in added:
            del self.available[key]
