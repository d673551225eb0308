"""Local rewrite rules of canonicalization: constant folding and algebraic identities.

`simplify(ins)` looks at one instruction (operands already rewritten by earlier rules)
and returns one of:
- None: nothing to do;
- a `Value`: every use of the instruction's result becomes that value, and the
  instruction goes;
- an `Instr`: a replacement instruction that takes over the same result `Value`
  objects (so uses need no rewriting), e.g. a `constant`, or `splat` for
  `broadcast(splat(x))`.

Floating-point identities are applied only where they are exact for every input, NaN,
infinities and signed zeros included: `x * 1.0`, `x / 1.0`, `x - (+0.0)` and
`x + (-0.0)` are exact; `x + 0.0` (−0 + 0 = +0), `x * 0.0`, `x - x` (NaN, inf) are not.
Integer rules hold under wrapping arithmetic.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Union

import numpy as np

from ..ir import attrs as A
from ..ir.core import Instr, Value
from ..ir.ops import COMPARISONS, Op
from ..ir.types import PointerType, element_of
from .const_fold import fold, scalar_type, to_array
from .ir_utils import constant_of

Rewrite = Union[None, Value, Instr]


def _owner(v: Value) -> Optional[Instr]:
    return v.owner if isinstance(v.owner, Instr) else None


def _defined_by(v: Value, op: Op) -> Optional[Instr]:
    owner = _owner(v)
    return owner if owner is not None and owner.op is op else None


def _is_int(v: Value) -> bool:
    st = scalar_type(v.type)
    return st is not None and st.is_int


def _is_float(v: Value) -> bool:
    st = scalar_type(v.type)
    return st is not None and st.is_float


def _int_equals(v: Value, lit: Any, target: int) -> bool:
    """Whether the integer constant `lit` of `v`'s type equals `target` (after wrapping
    `target` to the type, so -1 matches all-ones of unsigned types)."""
    st = scalar_type(v.type)
    if lit is None or st is None or not st.is_int:
        return False
    return bool(to_array(lit, st) == to_array(target, st))


def _float_is(v: Value, lit: Any, value: float, negative_sign: bool = False) -> bool:
    """Whether the float constant `lit` equals `value` with the given sign bit."""
    st = scalar_type(v.type)
    if lit is None or st is None or not st.is_float:
        return False
    arr = to_array(lit, st)
    return bool(arr == value) and bool(np.signbit(arr)) == negative_sign


def _all_ones(v: Value, lit: Any) -> bool:
    return _int_equals(v, lit, -1)


def constant_instr(ins: Instr, literal: Any) -> Instr:
    """A `constant` taking over `ins`'s result."""
    return Instr(Op.CONSTANT, [], ins.results, A.ConstantAttrs(literal), [], ins.loc)


def _zero_like(ins: Instr) -> Instr:
    st = scalar_type(ins.result.type)
    return constant_instr(ins, False if st is not None and st.is_bool else 0)


def _commuted(ins: Instr, lits: list) -> list[tuple[Value, Value, Any]]:
    """(x, other, other's literal) for both operand orders of a commutative op."""
    a, b = ins.operands
    return [(a, b, lits[1]), (b, a, lits[0])]


# ------------------------------------------------------------------ arithmetic

def _add(ins: Instr, lits: list) -> Rewrite:
    for x, c, lit in _commuted(ins, lits):
        if _int_equals(c, lit, 0) or _float_is(c, lit, 0.0, negative_sign=True):
            return x
    return None


def _sub(ins: Instr, lits: list) -> Rewrite:
    a, b = ins.operands
    if _int_equals(b, lits[1], 0) or _float_is(b, lits[1], 0.0):
        return a
    if a is b and _is_int(a):
        return _zero_like(ins)
    return None


def _mul(ins: Instr, lits: list) -> Rewrite:
    for x, c, lit in _commuted(ins, lits):
        if _int_equals(c, lit, 1) or _float_is(c, lit, 1.0):
            return x
        if _int_equals(c, lit, 0):
            return c  # the zero constant has the result's type already
    return None


def _divide(ins: Instr, lits: list) -> Rewrite:
    a, b = ins.operands
    if _int_equals(b, lits[1], 1) or _float_is(b, lits[1], 1.0):
        return a
    return None


def _rem(ins: Instr, lits: list) -> Rewrite:
    _, b = ins.operands
    st = scalar_type(b.type)
    if _int_equals(b, lits[1], 1) or (st is not None and st.is_signed and _int_equals(b, lits[1], -1)):
        return _zero_like(ins)
    return None


def _and(ins: Instr, lits: list) -> Rewrite:
    a, b = ins.operands
    if a is b:
        return a
    for x, c, lit in _commuted(ins, lits):
        if _int_equals(c, lit, 0):
            return c
        if _all_ones(c, lit):
            return x
    return None


def _or(ins: Instr, lits: list) -> Rewrite:
    a, b = ins.operands
    if a is b:
        return a
    for x, c, lit in _commuted(ins, lits):
        if _int_equals(c, lit, 0):
            return x
        if _all_ones(c, lit):
            return c
    return None


def _xor(ins: Instr, lits: list) -> Rewrite:
    a, b = ins.operands
    if a is b and _is_int(a):
        return _zero_like(ins)
    for x, c, lit in _commuted(ins, lits):
        if _int_equals(c, lit, 0):
            return x
    return None


def _shift(ins: Instr, lits: list) -> Rewrite:
    a, b = ins.operands
    if _int_equals(b, lits[1], 0) or _int_equals(a, lits[0], 0):
        return a
    return None


def _min_max(ins: Instr, lits: list) -> Rewrite:
    a, b = ins.operands
    return a if a is b else None


def _involution(ins: Instr, lits: list) -> Rewrite:
    inner = _defined_by(ins.operands[0], ins.op)
    return inner.operands[0] if inner is not None else None


def _compare(ins: Instr, lits: list) -> Rewrite:
    a, b = ins.operands
    # x OP x is decidable for integers and pointers only; floats may be NaN
    if a is b and not _is_float(a):
        return constant_instr(ins, ins.op in (Op.EQ, Op.LE, Op.GE))
    return None


def _select(ins: Instr, lits: list) -> Rewrite:
    cond, a, b = ins.operands
    if lits[0] is not None:
        return a if bool(lits[0]) else b
    if a is b:
        return a
    if cond.type == ins.result.type and lits[1] is not None and lits[2] is not None \
            and bool(lits[1]) and not bool(lits[2]):
        return cond
    return None


def _addptr(ins: Instr, lits: list) -> Rewrite:
    p, off = ins.operands
    return p if _int_equals(off, lits[1], 0) else None


# ------------------------------------------------------------------ conversions and shapes

def _same_type(ins: Instr, lits: list) -> Rewrite:
    x = ins.operands[0]
    return x if x.type == ins.result.type else None


def _broadcast(ins: Instr, lits: list) -> Rewrite:
    x = ins.operands[0]
    if x.type == ins.result.type:
        return x
    splat = _defined_by(x, Op.SPLAT)
    if splat is not None:
        return Instr(Op.SPLAT, [splat.operands[0]], ins.results, None, [], ins.loc)
    inner = _defined_by(x, Op.BROADCAST)
    if inner is not None:
        return Instr(Op.BROADCAST, [inner.operands[0]], ins.results, ins.attrs, [], ins.loc)
    return None


def _reshape(ins: Instr, lits: list) -> Rewrite:
    x = ins.operands[0]
    if x.type == ins.result.type:
        return x
    splat = _defined_by(x, Op.SPLAT)
    if splat is not None:
        return Instr(Op.SPLAT, [splat.operands[0]], ins.results, None, [], ins.loc)
    inner = _defined_by(x, Op.RESHAPE)
    if inner is not None and not inner.attrs.can_reorder and not ins.attrs.can_reorder:
        src = inner.operands[0]
        if src.type == ins.result.type:
            return src
        return Instr(Op.RESHAPE, [src], ins.results, ins.attrs, [], ins.loc)
    return None


def _expand_dims(ins: Instr, lits: list) -> Rewrite:
    splat = _defined_by(ins.operands[0], Op.SPLAT)
    if splat is not None:
        return Instr(Op.SPLAT, [splat.operands[0]], ins.results, None, [], ins.loc)
    return None


def _permute(ins: Instr, lits: list) -> Rewrite:
    x = ins.operands[0]
    order = tuple(ins.attrs.order)
    if order == tuple(range(len(order))):
        return x
    splat = _defined_by(x, Op.SPLAT)
    if splat is not None:
        return Instr(Op.SPLAT, [splat.operands[0]], ins.results, None, [], ins.loc)
    inner = _defined_by(x, Op.PERMUTE)
    if inner is not None:
        # result dim i is inner's dim order[i], which is the source's dim inner.order[order[i]]
        composed = tuple(inner.attrs.order[i] for i in order)
        src = inner.operands[0]
        if composed == tuple(range(len(composed))):
            return src
        return Instr(Op.PERMUTE, [src], ins.results, A.PermuteAttrs(composed), [], ins.loc)
    return None


_RULES: dict[Op, Callable[[Instr, list], Rewrite]] = {
    Op.ADD: _add, Op.SUB: _sub, Op.MUL: _mul,
    Op.IDIV: _divide, Op.DIV: _divide, Op.FDIV: _divide, Op.REM: _rem,
    Op.AND: _and, Op.OR: _or, Op.XOR: _xor, Op.SHL: _shift, Op.SHR: _shift,
    Op.MAXIMUM: _min_max, Op.MINIMUM: _min_max,
    Op.NEG: _involution, Op.NOT: _involution,
    Op.SELECT: _select, Op.ADDPTR: _addptr,
    Op.CAST: _same_type, Op.BITCAST: _same_type,
    Op.BROADCAST: _broadcast, Op.RESHAPE: _reshape, Op.EXPAND_DIMS: _expand_dims,
    Op.PERMUTE: _permute,
    **{op: _compare for op in COMPARISONS},
}


def simplify(ins: Instr) -> Rewrite:
    """Fold `ins` if its operands are constants, else apply the first algebraic rule
    that matches. See the module docstring for what the result means."""
    if ins.op is Op.CONSTANT or len(ins.results) != 1:
        return None
    lits = [constant_of(v) for v in ins.operands]
    if ins.operands and all(lit is not None for lit in lits):
        if not isinstance(element_of(ins.result.type), PointerType):
            folded = fold(ins.op, ins.attrs, [v.type for v in ins.operands], lits, ins.result.type)
            if folded is not None:
                return constant_instr(ins, folded)
    rule = _RULES.get(ins.op)
    return rule(ins, lits) if rule is not None else None
