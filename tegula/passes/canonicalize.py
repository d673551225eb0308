"""canonicalize: constant folding, algebraic simplification and control-flow cleanup,
repeated to a fixed point.

Expects: verified IR. Guarantees: verified IR computing the same results and
performing the same stores, prints, asserts and barriers in the same order. Per
instruction it applies `rewrite_rules.simplify` (folding through the op table, the
algebraic identities listed there). Structurally it
- inlines the taken region of an `if` whose condition is a constant;
- replaces an `if` whose regions hold only a `yield` of the same values by those values;
- removes a `for` whose bounds and step are constants giving zero iterations (its
  results are its initial values), and inlines one giving a single iteration (its
  induction variable the lower bound, its carried values the initial ones);
- decides comparisons of a loop's induction variable with a constant from the range
  its constant bounds and step give it (fla's `if i_k >= 0:` in a loop from 0);
- drops a loop-carried value that the body yields back unchanged, or that it yields
  its initial value (fla's `o_k1 = tl.arange(0, 64)` re-assigned in the loop that
  reads it, once LICM has hoisted it onto the first): its uses become the initial
  value. Carried, it kept the pipeliner from running the loop's loads ahead.
Instructions made dead by these rewrites are left for `dce`, except the rewritten ones
themselves, which are removed.
"""
from __future__ import annotations

from collections import deque
from typing import Any, Optional

from ..ir.accessors import FOR_INITS, for_inits
from ..ir.core import Block, Instr, Kernel, Value
from ..ir.ops import Op
from ..ir.types import ScalarType
from .ir_utils import constant_bounds, constant_of, resolve, static_trip_count, taken_region
from .rewrite_rules import constant_instr, simplify

# Each round is linear in the IR; rules only shrink or simplify it, so a handful of
# rounds reaches the fixed point in practice. The cap guards against a rule pair that
# would undo each other.
_MAX_ROUNDS = 32


def canonicalize(kernel: Kernel, ctx: Any = None) -> Kernel:
    """Simplify `kernel` in place until no rule applies; returns it."""
    for _ in range(_MAX_ROUNDS):
        if not _Round().block(kernel.body):
            break
    return kernel


class _Round:
    """One sweep over the IR in textual order, so that every definition is visited
    before its uses and replacements can be applied to operands as they are met."""

    def __init__(self) -> None:
        self.mapping: dict[Value, Value] = {}
        self.changed = False
        # a loop's induction variable -> (least, greatest) value it takes (None: unknown)
        self.iv_ranges: dict[Value, tuple[Optional[int], Optional[int]]] = {}

    def replace(self, old: Value, new: Value) -> None:
        self.mapping[old] = new
        self.changed = True

    def block(self, block: Block) -> bool:
        work = deque(block.instrs)
        out: list[Instr] = []
        while work:
            ins = work.popleft()
            ins.operands = [resolve(v, self.mapping) for v in ins.operands]
            inlined = self.structural(ins)
            if inlined is not None:
                work.extendleft(reversed(inlined))
                continue
            rewrite = self.induction_compare(ins) or simplify(ins)
            if rewrite is None:
                if ins.op is Op.FOR:
                    self.drop_invariant_iters(ins)
                    self.note_induction_range(ins)
                for region in ins.regions:
                    self.block(region)
                out.append(ins)
            elif isinstance(rewrite, Value):
                self.replace(ins.result, rewrite)
            else:
                # the replacement may simplify further (e.g. a new constant feeding a
                # folded splat), so it goes back on the worklist
                self.changed = True
                work.appendleft(rewrite)
        block.instrs = out
        return self.changed

    # ------------------------------------------------------------ structured control flow
    def structural(self, ins: Instr) -> Optional[list[Instr]]:
        """Instructions replacing a removable `if`/`for` (possibly none), else None."""
        if ins.op is Op.IF:
            cond = constant_of(ins.operands[0])
            if cond is not None:
                body, results = taken_region(ins, 0 if bool(cond) else 1)
                for old, new in results.items():
                    self.replace(old, new)
                self.changed = True
                return body
            if all(len(r.instrs) == 1 for r in ins.regions):
                then_vals = [resolve(v, self.mapping) for v in ins.regions[0].instrs[0].operands]
                else_vals = [resolve(v, self.mapping) for v in ins.regions[1].instrs[0].operands]
                if all(a is b for a, b in zip(then_vals, else_vals)):
                    for old, new in zip(ins.results, then_vals):
                        self.replace(old, new)
                    self.changed = True
                    return []
        elif ins.op is Op.FOR and static_trip_count(ins) == 0:
            for old, new in zip(ins.results, for_inits(ins)):
                self.replace(old, new)
            self.changed = True
            return []
        elif ins.op is Op.FOR and static_trip_count(ins) == 1:
            # inlined, as MLIR's canonicalization does for Triton: fla's loops over
            # `tl.cdiv(K, BK)` blocks with BK = K, whose dots are then a kernel body's
            # (operands staged beside each other in shared memory, not read through
            # registers as an unpipelined loop's dot)
            body = ins.regions[0]
            self.replace(body.args[0], ins.operands[0])
            for arg, init in zip(body.args[1:], for_inits(ins)):
                self.replace(arg, init)
            instrs, results = taken_region(ins, 0)
            for old, new in results.items():
                self.replace(old, new)
            self.changed = True
            return instrs
        return None

    def note_induction_range(self, loop: Instr) -> None:
        """The least and greatest values a signed-integer induction variable takes, from
        constant bounds and step (either bound alone where the step is constant)."""
        iv = loop.regions[0].args[0]
        t = loop.operands[0].type
        if not isinstance(t, ScalarType) or not t.is_signed:
            return
        lb, ub, step = constant_bounds(loop)
        if not step:
            return
        trips = static_trip_count(loop)
        if trips == 0:
            return
        if trips is not None:
            last = lb + (trips - 1) * step
        elif ub is not None:
            last = ub - 1 if step > 0 else ub + 1  # a bound of the values, not the last one
        else:
            last = None
        self.iv_ranges[iv] = (lb, last) if step > 0 else (last, lb)

    def induction_compare(self, ins: Instr) -> Optional[Instr]:
        """A comparison of an induction variable with a constant that its range decides
        (fla's `if i_k >= 0:` around the dot of a loop from 0): the constant result."""
        if ins.op not in _DECIDE or len(ins.operands) != 2:
            return None
        a, b = ins.operands
        op = ins.op
        if b in self.iv_ranges and a not in self.iv_ranges:
            a, b, op = b, a, _MIRROR[op]
        c = constant_of(b)
        if a not in self.iv_ranges or not isinstance(c, int) or isinstance(c, bool):
            return None
        lo, hi = self.iv_ranges[a]
        result = _DECIDE[op](lo, hi, c)
        if result is None:
            return None
        return constant_instr(ins, result)

    def drop_invariant_iters(self, loop: Instr) -> None:
        """Remove loop-carried values the body yields back unchanged, or yields their
        initial value (every iteration then sees the initial value)."""
        body = loop.regions[0]
        term = body.terminator
        if term is None or term.op is not Op.YIELD:
            return
        for i in reversed(range(len(loop.results))):
            arg = body.args[1 + i]
            init = for_inits(loop)[i]
            if resolve(term.operands[i], self.mapping) not in (arg, resolve(init, self.mapping)):
                continue
            self.replace(arg, init)
            self.replace(loop.results[i], init)
            del loop.results[i], loop.operands[FOR_INITS + i], body.args[1 + i], term.operands[i]


def _lt(lo, hi, c):
    if hi is not None and hi < c:
        return True
    return False if lo is not None and lo >= c else None


def _ge(lo, hi, c):
    decided = _lt(lo, hi, c)
    return None if decided is None else not decided


def _eq(lo, hi, c):
    return False if (lo is not None and c < lo) or (hi is not None and c > hi) else None


def _ne(lo, hi, c):
    decided = _eq(lo, hi, c)
    return None if decided is None else not decided


# iv OP c decided from iv's range [lo, hi] (None: not decided); c OP iv is iv MIRROR c
_DECIDE = {Op.LT: _lt, Op.GE: _ge, Op.LE: lambda lo, hi, c: _lt(lo, hi, c + 1),
           Op.GT: lambda lo, hi, c: _ge(lo, hi, c + 1), Op.EQ: _eq, Op.NE: _ne}
_MIRROR = {Op.LT: Op.GT, Op.GT: Op.LT, Op.LE: Op.GE, Op.GE: Op.LE, Op.EQ: Op.EQ, Op.NE: Op.NE}
