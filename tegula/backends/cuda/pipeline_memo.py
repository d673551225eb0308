"""The pipelined copies' *coarse* address code: values that change only when a
flattened loop's index crosses a multiple of the inner trip count, computed once per
outer iteration instead of once per copy.

A flattened nest (`passes/flatten_loops.py`) recovers the outer index of its flat
iteration `it` as `j_o = it / T_i`, and the outer body's prologue (tutorial 09's
`_compute_pid`: four divisions by run-time values, the tile's row and column) is a
function of `j_o`. The pipeliner evaluates the loads' address code for iteration
`it + D` in every iteration, so without this each copy paid the 64-bit division and
the prologue's divisions, a chain of ~200 dependent instructions between a wgmma's
issue and the next one's (the H200 ran the tutorial's pointer kernel at 0.68x
Triton, whose own flattening recomputes the prologue only on a new tile).

`find_memo` picks, in a flat loop's address code, the division `idiv(it, d)` by a
value defined outside the loop, and the scalar code computed from it and from
loop invariants alone (the *coarse* values). The pipelined loop then carries, for the
iteration its copies are issued for, the quotient `q`, the remainder `r`, and the
coarse values the rest of the address code reads (the *frontier*); each iteration
steps them (`memo_step`):

    r += 1; wrap = r == d; r = wrap ? 0 : r; q += wrap
    frontier = if wrap { the coarse code for q } else { as carried }

which is the division's exact value because a flat loop counts `it` from 0 by 1 and
runs only where `d = T_i >= 1` (the contract `flatten_loops` keeps: only its own code
divides the flat index). The body's own uses of the coarse values (the current
iteration's, which the epilogue reads) are not touched.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ...ir import attrs as A
from ...ir.builder import Builder
from ...ir.clone import clone_instr
from ...ir.core import Block, Instr, Value
from ...ir.ops import OP_INFO, Op
from ...ir.types import ScalarType
from ...passes.ir_utils import constant_of, defined_inside


@dataclass
class CoarseMemo:
    division: Instr          # idiv(iv, d): the flat loop's outer index
    members: list[Instr]     # the coarse code computed from it, in body order (constants included)
    frontier: list[Value]    # coarse values read by the rest of the address code

    @property
    def skipped(self) -> set[Instr]:
        """The slice ops the memo computes instead (constants are cloned both ways)."""
        return {self.division} | {ins for ins in self.members if ins.op is not Op.CONSTANT}

    @property
    def divisor(self) -> Value:
        return self.division.operands[1]


def find_memo(loop: Instr, slice_ops: list[Instr], readers: list[Instr],
              read_values: list[Value]) -> Optional[CoarseMemo]:
    """The coarse part of `slice_ops` (a flat loop's address code, in body order), or
    None where there is none worth carrying. `readers` (the copies' loads and hints)
    and `read_values` (their masks' split bounds) read the address code's values too:
    with the rest of the slice they make the frontier."""
    if not (isinstance(loop.attrs, A.LoopAttrs) and loop.attrs.flatten):
        return None
    lb, _ub, step = loop.operands[:3]
    if constant_of(lb) != 0 or constant_of(step) != 1:
        return None  # the counting below needs the index to run 0, 1, 2, ...
    body = loop.regions[0]
    iv = body.args[0]
    inside = defined_inside(loop)
    division = next((ins for ins in slice_ops if ins.op is Op.IDIV and ins.operands[0] is iv
                     and ins.operands[1] not in inside), None)
    if division is None:
        return None
    coarse: set[Value] = {division.results[0]}
    members: list[Instr] = []
    for ins in slice_ops:
        if ins is division or ins.regions or not OP_INFO[ins.op].pure:
            continue
        if not all(isinstance(r.type, ScalarType) for r in ins.results):
            continue
        if all(v in coarse or v not in inside for v in ins.operands):
            members.append(ins)
            coarse.update(ins.results)
    computed = {ins for ins in members if ins.op is not Op.CONSTANT}
    if not computed:
        return None  # nothing but the division: a counter alone saves little
    outside = [ins for ins in slice_ops if ins is not division and ins not in computed] + readers
    read = {v for ins in outside for v in _reads(ins)} | set(read_values)
    # the quotient itself is carried apart (`memo_step` binds it), never as a frontier value
    frontier = [r for ins in members if ins in computed for r in ins.results if r in read]
    return CoarseMemo(division, members, frontier)


def _reads(ins: Instr) -> list[Value]:
    return [v for sub in ins.walk() for v in sub.operands]


def memo_inits(b: Builder, memo: CoarseMemo, mapping: dict[Value, Value], iteration: Value) -> list[Value]:
    """The carried state for the last iteration the prologue issued copies for
    (`mapping`: its address code's values, `iteration`: its index): q, r, frontier."""
    q = mapping[memo.division.results[0]]
    d = mapping.get(memo.divisor, memo.divisor)
    r = b.op1(Op.SUB, iteration, b.op1(Op.MUL, q, d))
    return [q, r] + [mapping[v] for v in memo.frontier]


def state_types(memo: CoarseMemo) -> list:
    q = memo.division.results[0]
    return [q.type, q.type] + [v.type for v in memo.frontier]


def memo_step(b: Builder, memo: CoarseMemo, state: list[Value], mapping: dict[Value, Value]) -> list[Value]:
    """Step the carried `state` one iteration on; binds, in `mapping`, the division's
    and the frontier's values to the stepped ones, and returns the stepped state."""
    q, r, kept = state[0], state[1], state[2:]
    d = mapping.get(memo.divisor, memo.divisor)
    t = q.type
    one, zero = b.constant(1, t), b.constant(0, t)
    nxt = b.op1(Op.ADD, r, one)
    wrap = b.op1(Op.EQ, nxt, d)
    r = b.op1(Op.SELECT, wrap, zero, nxt)
    q = b.op1(Op.SELECT, wrap, b.op1(Op.ADD, q, one), q)
    fresh = Block()
    inner: dict[Value, Value] = dict(mapping)
    inner[memo.division.results[0]] = q
    fb = Builder(fresh)
    fb.loc = b.loc
    for ins in memo.members:
        fb.insert(clone_instr(ins, inner))
    fb.yield_([inner[v] for v in memo.frontier])
    same = Block()
    sb = Builder(same)
    sb.loc = b.loc
    sb.yield_(kept)
    choice = b.create(Op.IF, [wrap], result_types=[v.type for v in memo.frontier], regions=[fresh, same])
    mapping[memo.division.results[0]] = q
    mapping.update(zip(memo.frontier, choice.results))
    return [q, r, *choice.results]
