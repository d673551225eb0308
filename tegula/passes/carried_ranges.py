"""carried_ranges: an integer tile a loop carries only to shift it by a scalar each
iteration is carried as that scalar, and rebuilt from a constant pattern where read.

The idiom is FlexAttention's (and many hand-written kernels'):

    offs_n = kv_start + tl.arange(0, BLOCK_N)
    for ...:
        mask = offs_m[:, None] >= offs_n[None, :]
        ...
        offs_n = offs_n + offset

Carried as a tile, `offs_n` must hold one layout across the back edge, and the GPU
backend chose the loads' layout for it, then converted it through shared memory every
iteration to reach the dot's accumulator layout where the mask reads it (a scratch
buffer and a barrier in the hot loop). Giving the carried tile the readers' layout
instead replicated it to 32 registers a thread for the whole loop. Carried as a scalar,
the tile is an `arange` plus a splat at its reader, which every layout computes from
the thread's index without moving data, and its registers live only where it is read.

Expects: verified IR, best after `licm` (which would hoist the rebuilt pattern back
out of the loop). Guarantees: verified IR with the same behaviour. A `for`'s carried
value `t` is rewritten when
- `t` is an integer (not boolean) tile;
- the body yields `t + splat(s)`, `splat(s) + t` or `t - splat(s)` for it, `s` any
  scalar (it may be computed in the body, from a load);
- its initial value is a *pattern* plus splats of scalars: adds and subtracts of
  `arange`s, constants and splats, through `expand_dims`, `broadcast` and `reshape`
  (the pattern is then built from constants alone, so rebuilding it costs no memory).
Every read of `t` in the body becomes `pattern + splat(c)` built at the top of the body,
and every read of the loop's result `pattern + splat(c')` after the loop, where `c` is a
scalar the loop carries from the initial value's scalar part and shifts by `s`. When the
loop already carries a scalar shifted by the same `s` (FlexAttention's `kv_offset`),
`c` is that scalar plus the difference of the initial values, and nothing new is carried.
The tile's own slot, left feeding only itself, is for `dce` to drop. Integer arithmetic
wraps, so the reassociation keeps every value bit for bit.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ..ir import attrs as A
from ..ir.accessors import for_inits
from ..ir.builder import Builder
from ..ir.core import Block, Instr, Kernel, Value
from ..ir.ops import Op
from ..ir.types import ScalarType, TileType, element_of
from .ir_utils import constant_of

# shape ops through which a splat stays a splat: op(pattern + splat(a)) = op(pattern) + splat(a)
_SHAPE_OPS = (Op.EXPAND_DIMS, Op.BROADCAST, Op.RESHAPE)


@dataclass(frozen=True)
class _Pattern:
    """A tile built from constants alone: `op` (an `arange`, a constant, a shape op, an
    add or subtract) with `attrs` over the patterns in `parts`, giving `type`."""

    op: Op
    type: Any
    attrs: Any = None
    parts: tuple["_Pattern", ...] = ()


@dataclass(frozen=True)
class _Affine:
    """A tile as `pattern + Σ sign·splat(scalar)`; `pattern` None means all zeros."""

    pattern: Optional[_Pattern]
    scalars: tuple[tuple[int, Value], ...]


def carried_ranges(kernel: Kernel, ctx: Any = None) -> Kernel:
    """Carry shifted index tiles of `kernel`'s loops as scalars, in place; returns it."""
    _visit(kernel.body, kernel)
    return kernel


def _visit(block: Block, kernel: Kernel) -> None:
    # outer loops first: an inner loop's initial value may be the rebuilt tile of the
    # outer loop's, which only then reads as a pattern plus a scalar
    index = 0
    while index < len(block.instrs):
        ins = block.instrs[index]
        if ins.op is Op.FOR:
            index += _rewrite_loop(ins, block, index, kernel)
        for region in ins.regions:
            _visit(region, kernel)
        index += 1


def _rewrite_loop(loop: Instr, parent: Block, index: int, kernel: Kernel) -> int:
    """Rewrite every qualifying carried tile of `loop` (at `parent.instrs[index]`);
    returns how many instructions were inserted before the loop."""
    inserted = 0
    slot = 0
    while slot < len(loop.results):
        plan = _plan(loop, slot)
        if plan is not None:
            inserted += _apply(loop, slot, *plan, parent, index + inserted, kernel)
        slot += 1
    return inserted


def _plan(loop: Instr, slot: int) -> Optional[tuple[_Affine, int, Value]]:
    """(the initial value as an affine tile, the step's sign, the step scalar) when the
    slot's tile qualifies, else None."""
    body = loop.regions[0]
    arg = body.args[1 + slot]
    t = arg.type
    if not isinstance(t, TileType) or not isinstance(t.element, ScalarType):
        return None
    if not t.element.is_int or t.element.is_bool:
        return None
    step = _shift_of(body.terminator.operands[slot], arg)
    if step is None:
        return None
    affine = _affine(for_inits(loop)[slot])
    if affine is None:
        return None
    return affine, step[0], step[1]


def _shift_of(v: Value, arg: Value, splatted: bool = True) -> Optional[tuple[int, Value]]:
    """(sign, s) when `v` is `arg ± splat(s)` (or `splat(s) + arg`), else None; with
    `splatted` False, when `v` is the scalar `arg ± s` (or `s + arg`)."""
    owner = v.owner
    if not isinstance(owner, Instr) or owner.op not in (Op.ADD, Op.SUB):
        return None
    a, b = owner.operands
    if a is arg and (s := _step(b, splatted)) is not None:
        return (1 if owner.op is Op.ADD else -1), s
    if owner.op is Op.ADD and b is arg and (s := _step(a, splatted)) is not None:
        return 1, s
    return None


def _step(v: Value, splatted: bool) -> Optional[Value]:
    if not splatted:
        return v
    owner = v.owner
    if isinstance(owner, Instr) and owner.op is Op.SPLAT:
        return owner.operands[0]
    return None


def _affine(v: Value) -> Optional[_Affine]:
    """`v` as a pattern plus splats of scalars, or None when it is not one."""
    owner = v.owner
    if not isinstance(owner, Instr):
        return None
    if owner.op is Op.SPLAT:
        return _Affine(None, ((1, owner.operands[0]),))
    if owner.op is Op.ARANGE or (owner.op is Op.CONSTANT and isinstance(v.type, TileType)):
        return _Affine(_Pattern(owner.op, v.type, owner.attrs), ())
    if owner.op in _SHAPE_OPS:
        inner = _affine(owner.operands[0])
        if inner is None:
            return None
        pattern = None if inner.pattern is None else _Pattern(owner.op, v.type, owner.attrs, (inner.pattern,))
        return _Affine(pattern, inner.scalars)
    if owner.op in (Op.ADD, Op.SUB):
        left, right = (_affine(x) for x in owner.operands)
        if left is None or right is None:
            return None
        sign = 1 if owner.op is Op.ADD else -1
        scalars = left.scalars + tuple((sign * s, x) for s, x in right.scalars)
        return _Affine(_combine(owner.op, v.type, left.pattern, right.pattern), scalars)
    return None


def _combine(op: Op, t: Any, left: Optional[_Pattern], right: Optional[_Pattern]) -> Optional[_Pattern]:
    if right is None:
        return left
    if left is None and op is Op.ADD:
        return right
    if left is None:  # 0 - right
        return _Pattern(Op.SUB, t, None, (_Pattern(Op.CONSTANT, t, A.ConstantAttrs(0)), right))
    return _Pattern(op, t, None, (left, right))


def _apply(loop: Instr, slot: int, init: _Affine, sign: int, step: Value,
           parent: Block, index: int, kernel: Kernel) -> int:
    """Carry slot `slot` as a scalar; returns how many instructions went before the loop."""
    body = loop.regions[0]
    arg, result = body.args[1 + slot], loop.results[slot]
    before = Builder()
    before.set_insertion_before(parent, index)
    before.loc = loop.loc
    start = _scalar_sum(before, init.scalars, element_of(arg.type))
    partner = _partner(loop, slot, sign, step)
    offset: Optional[Value] = None
    if partner is None:
        inner, outer = _carry_scalar(loop, start, sign, step)
    else:
        # c = k + (start - k's initial value), k the carried scalar shifted by `step` too
        k_init = for_inits(loop)[partner]
        offset = start if constant_of(k_init) == 0 else before.op1(Op.SUB, start, k_init)
        inner, outer = body.args[1 + partner], loop.results[partner]
    inserted = before.index - index

    top = Builder()
    top.set_insertion_before(body, 0)
    top.loc = loop.loc
    inside = _rebuild(top, init.pattern, arg.type, inner, offset)
    after = Builder()
    after.set_insertion_before(parent, index + inserted + 1)
    after.loc = loop.loc
    outside = _rebuild(after, init.pattern, arg.type, outer, offset)
    # neither rebuild reads `arg` or `result`; the slot's own update now reads `inside`
    # and feeds only the slot, which dce drops
    for nested in body.walk():
        nested.operands = [inside if v is arg else v for v in nested.operands]
    for nested in kernel.walk():
        nested.operands = [outside if v is result else v for v in nested.operands]
    return inserted


def _scalar_sum(b: Builder, scalars: tuple[tuple[int, Value], ...], element: ScalarType) -> Value:
    """Σ sign·s, built before the loop (0 for no scalars)."""
    total: Optional[Value] = None
    for sign, s in scalars:
        if total is None:
            total = s if sign > 0 else b.op1(Op.SUB, b.constant(0, element), s)
        else:
            total = b.op1(Op.ADD if sign > 0 else Op.SUB, total, s)
    return b.constant(0, element) if total is None else total


def _partner(loop: Instr, slot: int, sign: int, step: Value) -> Optional[int]:
    """A scalar slot the body shifts by the same step with the same sign, if any."""
    body = loop.regions[0]
    element = element_of(body.args[1 + slot].type)
    for j, arg in enumerate(body.args[1:]):
        shift = _shift_of(body.terminator.operands[j], arg, splatted=False)
        if j != slot and arg.type == element and shift == (sign, step):
            return j
    return None


def _carry_scalar(loop: Instr, start: Value, sign: int, step: Value) -> tuple[Value, Value]:
    """Add a carried scalar starting at `start`, shifted by ±`step` at the end of each
    iteration; returns (its body argument, the loop's result for it)."""
    body = loop.regions[0]
    carried = body.add_arg(start.type)
    b = Builder()
    b.set_insertion_before(body, len(body.instrs) - 1)
    b.loc = loop.loc
    shifted = b.op1(Op.ADD if sign > 0 else Op.SUB, carried, step)
    body.terminator.operands.append(shifted)
    loop.operands.append(start)
    final = Value(start.type, owner=loop)
    loop.results.append(final)
    return carried, final


def _rebuild(b: Builder, pattern: Optional[_Pattern], t: Any, scalar: Value, offset: Optional[Value]) -> Value:
    """`pattern + splat(scalar + offset)` of type `t`, built at `b`."""
    if offset is not None:
        scalar = b.op1(Op.ADD, scalar, offset)
    shifted = b.op1(Op.SPLAT, scalar, type=t)
    if pattern is None:
        return shifted
    return b.op1(Op.ADD, _materialize(b, pattern), shifted)


def _materialize(b: Builder, p: _Pattern) -> Value:
    parts = [_materialize(b, q) for q in p.parts]
    return b.create(p.op, parts, p.attrs, [p.type]).result
