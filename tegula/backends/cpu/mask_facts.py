"""Masks whose "every element is true" reduces to one scalar comparison (a mixin of
`lower.CpuLowering`), so a masked tile access decides its fast path without a pass over
the mask.

The usual Triton mask is a bound check of an index range: `offs < n` with `offs = base +
tl.arange(s, e)` (through splats, broadcasts and `&` of such checks). The elements of
`base + arange(s, e)` are base+s, ..., base+e-1 in order, so `offs < n` holds everywhere
iff base + e - 1 < n — when no element wraps around its integer type, which the test
also checks (in 64-bit arithmetic). Any other mask answers None and is scanned, as
before; a False from here only sends the access down the per-element path, which is
correct for every mask.
"""
from __future__ import annotations

from typing import Optional

import llvmlite.ir as ir

from ...ir.core import Instr, Value
from ...ir.ops import Op
from ...ir.types import ScalarType, element_of, shape_of
from ..llvm.types import I64

_SAME_ELEMENTS = (Op.BROADCAST, Op.EXPAND_DIMS, Op.RESHAPE)
_FLIP = {Op.LT: Op.GT, Op.LE: Op.GE, Op.GT: Op.LT, Op.GE: Op.LE}


def _def(v: Value) -> Optional[Instr]:
    owner = v.owner
    return owner if isinstance(owner, Instr) else None


class MaskFacts:
    """Methods of CpuLowering (see `lower.py` for `self.b`, `self.get`)."""

    def mask_all_true(self, mask: Value) -> Optional[ir.Value]:
        """An i1 that is true iff every element of the tile `mask` is true, computed from
        scalars; None when the mask is not of a form this understands."""
        ins = _def(mask)
        if ins is None:
            return None
        if ins.op in _SAME_ELEMENTS:
            return self.mask_all_true(ins.operands[0])
        if ins.op is Op.AND:
            a, c = (self.mask_all_true(o) if shape_of(o.type) else self.get(o) for o in ins.operands)
            return None if a is None or c is None else self.b.and_(a, c)
        if ins.op is Op.CONSTANT:
            return ir.Constant(ir.IntType(1), int(bool(ins.attrs.value)))
        if ins.op not in _FLIP:
            return None
        x, y = ins.operands
        op = ins.op
        if self._uniform(x) is not None:  # n > offs: offs < n
            x, y, op = y, x, _FLIP[op]
        bound = self._uniform(y)
        span = self._index_range(x)
        if bound is None or span is None:
            return None
        e = element_of(x.type)
        if not isinstance(e, ScalarType) or not e.is_int or e.bits > 32:
            return None
        b = self.b
        wide = (lambda v: b.sext(v, I64)) if e.is_signed else (lambda v: b.zext(v, I64))  # noqa: E731
        base, lo, hi = span
        first = b.add(wide(base), ir.Constant(I64, lo))
        last = b.add(wide(base), ir.Constant(I64, hi))
        n = wide(bound)
        # no element wraps: [first, last] lies in the type's range
        tmin, tmax = (-(1 << (e.bits - 1)), (1 << (e.bits - 1)) - 1) if e.is_signed else (0, (1 << e.bits) - 1)
        fits = b.and_(b.icmp_signed(">=", first, ir.Constant(I64, tmin)),
                      b.icmp_signed("<=", last, ir.Constant(I64, tmax)))
        holds = {Op.LT: lambda: b.icmp_signed("<", last, n), Op.LE: lambda: b.icmp_signed("<=", last, n),
                 Op.GT: lambda: b.icmp_signed(">", first, n), Op.GE: lambda: b.icmp_signed(">=", first, n)}[op]()
        return b.and_(fits, holds)

    def fused_mask_facts(self, values: list) -> Optional[ir.Value]:
        """The conjunction of `mask_all_true` over the boolean tiles that the fused
        (not yet computed) `values` compute element by element, or None if there are
        none: a loop over those elements may be specialized to where it holds."""
        from .tiles import Lazy
        facts: list = []
        seen: set = set()

        def walk(v: Value) -> None:
            if id(v) in seen or len(seen) > 64:
                return
            seen.add(id(v))
            if not isinstance(self.env.get(id(v)), Lazy):
                return
            e = element_of(v.type)
            if isinstance(e, ScalarType) and e.is_bool and shape_of(v.type):
                fact = self.mask_all_true(v)
                if fact is not None:
                    facts.append(fact)
                    return
            ins = _def(v)
            if ins is not None:
                for o in ins.operands:
                    walk(o)
        for v in values:
            walk(v)
        if not facts:
            return None
        out = facts[0]
        for f in facts[1:]:
            out = self.b.and_(out, f)
        return out

    def _uniform(self, v: Value) -> Optional[ir.Value]:
        """The scalar every element of tile `v` equals (a splat, maybe broadcast), or None."""
        ins = _def(v)
        while ins is not None and ins.op in _SAME_ELEMENTS and shape_of(ins.operands[0].type):
            ins = _def(ins.operands[0])
        if ins is None:
            return None
        if ins.op is Op.SPLAT or (ins.op in _SAME_ELEMENTS and not shape_of(ins.operands[0].type)):
            return self.get(ins.operands[0])
        if ins.op is Op.CONSTANT and isinstance(ins.attrs.value, int):
            e = element_of(v.type)
            return ir.Constant(ir.IntType(e.bits), ins.attrs.value)
        return None

    def _index_range(self, v: Value) -> Optional[tuple[ir.Value, int, int]]:
        """(base, lo, hi) when the elements of `v` are base + k for k over a set whose
        least and greatest members are lo and hi (an arange, plus a uniform base)."""
        ins = _def(v)
        while ins is not None and ins.op in _SAME_ELEMENTS:
            ins = _def(ins.operands[0])
        if ins is None:
            return None
        if ins.op is Op.ARANGE:
            e = element_of(ins.result.type)
            return ir.Constant(ir.IntType(e.bits), 0), ins.attrs.start, ins.attrs.end - 1
        if ins.op is Op.ADD:
            for a, c in (ins.operands, ins.operands[::-1]):
                base = self._uniform(a)
                if base is None:
                    continue
                inner = self._index_range(c)
                if inner is None:
                    return None
                ib, lo, hi = inner
                if isinstance(ib, ir.Constant) and ib.constant == 0:
                    return base, lo, hi
                return None
        return None
