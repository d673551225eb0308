"""Axis analysis: divisibility, contiguity and constancy of every integer and pointer
value of a kernel (`AxisInfo`, defined in `axis_info`), the facts the GPU backend needs
for vectorized, coalesced memory access.

`axis_info(kernel)` is an analysis, not a transformation: it leaves the IR alone and
returns a dict from each `Value` to its `AxisInfo`. Seeds are the kernel arguments'
`ArgAttrs.divisibility` (bytes, for pointers), constants, `arange`, `program_id`,
`hint` instructions (`multiple_of`, `max_contiguous`, `max_constancy`: the user's claim
replaces the analysis result) and `assume` conditions of the forms `x % 2**k == 0`,
`x & (2**k - 1) == 0` and `x >= 0` / `x > c` (c >= -1), which hold kernel-wide. The
per-instruction rules are in `axis_rules`; this module walks structured control flow:
- `for`: the induction variable is `lb + i*step`; loop-carried values start from their
  initial values and are joined with what the body yields until nothing changes
  (bounded; on no convergence they fall back to "unknown");
- `if`: results join the two regions' yields (only the taken one for a constant
  condition); `while` iterates like `for`;
- results of reductions, scans, dots and loads are unknown.

Hints apply in place, as in Triton (where `tl.multiple_of(x, v)` sets an attribute on
x's defining op, or for a loop's block argument on the loop): a `hint` instruction's
claim holds for its result *and* for its operand wherever that value is used, before
the hint or after it, and whether or not the hint's result is used (Triton's grouped
GEMM tutorial discards it). A hint on a loop-carried block argument is applied each
time the fixed point binds the argument, on top of the join of the initial and the
yielded values; the loop's results are that join alone (the hint is a claim about the
iterations that run, and says nothing of a value no iteration reads). Hints on kernel
arguments apply only through their result: Triton sets no attribute on a function's
argument, and a hint inside a branch must not speak for the whole kernel. The
compiler's own `known_multiple_of` hints (`axis_rules.KNOWN_MULTIPLE_OF`) apply only
through their result, and only raise the divisibility found.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Optional

from ..ir.accessors import for_bounds, for_inits
from ..ir.core import Block, Instr, Kernel, Value
from ..ir.ops import Op
from ..ir.types import ScalarType, element_of, shape_of
from .axis_info import AxisInfo, join, make, uniform, unknown
from .axis_rules import KNOWN_MULTIPLE_OF, apply_hint, transfer
from .const_fold import canonical_literal
from .dataflow import fixed_point
from .ir_utils import constant_of

# Each round of a loop either changes nothing or lowers some power of two or flag, so
# the fixed point comes fast; the cap bounds pathological nests.
_MAX_LOOP_ROUNDS = 16

# The largest divisibility the launch specialization tells apart (runtime.specialization:
# 1, 2, 4, 8 or 16 for an int, 16 for an aligned pointer): at the cap it means "at least".
SPECIALIZATION_CAP = 16


def axis_info(kernel: Kernel, likely_divisibility: int = 0) -> dict[Value, AxisInfo]:
    """AxisInfo of every value of `kernel` (arguments, results, block arguments).

    With `likely_divisibility` (a power of two), an argument whose divisibility is at
    the specialization's cap (`SPECIALIZATION_CAP`: "16 or more", pointers and integers
    alike) is taken to be divisible by that much: what is likely (allocators align
    arrays, sizes are round), not what is proved. Such a result may only steer
    heuristics (whether an access likely straddles a sector), never the width or the
    legality of an access. A divisibility below the cap is exact (a row stride of 3000
    is divisible by 8 and not by 16) and stays."""
    return _Analysis(kernel, likely_divisibility).run()


# ------------------------------------------------------------------ assumptions

def _pow2(c: Optional[int]) -> bool:
    return c is not None and c > 0 and c & (c - 1) == 0


def _int_constant(v: Value) -> Optional[int]:
    lit = constant_of(v)
    e = element_of(v.type)
    if lit is None or not isinstance(e, ScalarType) or not e.is_int:
        return None
    return int(canonical_literal(lit, e))


def _defining(v: Value) -> Optional[Instr]:
    return v.owner if isinstance(v.owner, Instr) else None


def collect_assumptions(kernel: Kernel) -> dict[Value, tuple[int, bool]]:
    """(divisibility, non-negative) facts that `assume` instructions state about values."""
    facts: dict[Value, tuple[int, bool]] = {}

    def add(v: Value, div: int = 1, nonneg: bool = False) -> None:
        old_div, old_nonneg = facts.get(v, (1, False))
        facts[v] = (max(old_div, div), old_nonneg or nonneg)

    def learn(cond: Value) -> None:
        ins = _defining(cond)
        if ins is None:
            return
        if ins.op is Op.AND:
            learn(ins.operands[0])
            learn(ins.operands[1])
        elif ins.op is Op.EQ:
            for x, z in (ins.operands, reversed(ins.operands)):
                if _int_constant(z) != 0 or _defining(x) is None:
                    continue
                inner = _defining(x)
                if len(inner.operands) != 2:
                    continue
                a, c = inner.operands[0], _int_constant(inner.operands[1])
                if inner.op is Op.REM and c is not None and _pow2(abs(c)):
                    add(a, div=abs(c))
                elif inner.op is Op.AND and c is not None and _pow2(c + 1):
                    add(a, div=c + 1)
        elif ins.op in (Op.GT, Op.GE, Op.LT, Op.LE):
            x, y = ins.operands
            # normalise to "x > c" / "x >= c"
            if ins.op in (Op.LT, Op.LE):
                x, y = y, x
            c = _int_constant(y)
            strict = ins.op in (Op.GT, Op.LT)
            if c is not None and (c >= 0 or (strict and c == -1)):
                add(x, nonneg=True)

    for ins in kernel.walk():
        if ins.op is Op.ASSUME:
            learn(ins.operands[0])
    return facts


def collect_hints(kernel: Kernel) -> dict[Value, list[Instr]]:
    """The `hint` instructions about each hinted value other than a kernel argument, in
    program order (a later claim of the same kind wins, as a later attribute does in
    Triton)."""
    args = set(kernel.args)
    hints: dict[Value, list[Instr]] = {}
    for ins in kernel.walk():
        if ins.op is Op.HINT and ins.operands[0] not in args and ins.attrs.kind != KNOWN_MULTIPLE_OF:
            hints.setdefault(ins.operands[0], []).append(ins)
    return hints


# ------------------------------------------------------------------ the dataflow walk

class _Analysis:
    def __init__(self, kernel: Kernel, likely_divisibility: int = 0) -> None:
        self.kernel = kernel
        self.likely_divisibility = likely_divisibility
        self.info: dict[Value, AxisInfo] = {}
        self.facts = collect_assumptions(kernel)
        self.hints = collect_hints(kernel)

    def get(self, v: Value) -> AxisInfo:
        found = self.info.get(v)
        return found if found is not None else unknown(shape_of(v.type))

    def set(self, v: Value, info: AxisInfo) -> None:
        e = element_of(v.type)
        if isinstance(e, ScalarType) and e.is_unsigned and not info.nonnegative:
            info = replace(info, nonnegative=True)
        for hint in self.hints.get(v, ()):
            info = apply_hint(info, hint, v)
        fact = self.facts.get(v)
        if fact is not None:
            div, nonneg = fact
            info = replace(info, divisibility=tuple(max(d, div) for d in info.divisibility),
                           nonnegative=info.nonnegative or nonneg)
        self.info[v] = info

    def run(self) -> dict[Value, AxisInfo]:
        attrs = self.kernel.arg_attrs
        for i, a in enumerate(self.kernel.args):
            div = attrs[i].divisibility if i < len(attrs) and attrs[i] is not None else 1
            if div >= SPECIALIZATION_CAP:
                div = max(div, self.likely_divisibility)
            self.set(a, uniform(shape_of(a.type), div))
        self.block(self.kernel.body)
        return self.info

    def block(self, block: Block) -> None:
        for ins in block.instrs:
            self.instr(ins)

    def instr(self, ins: Instr) -> None:
        if ins.op is Op.FOR:
            self.for_loop(ins)
        elif ins.op is Op.IF:
            self.if_(ins)
        elif ins.op is Op.WHILE:
            self.while_loop(ins)
        else:
            for region in ins.regions:  # combine functions: scalars of unknown origin
                for a in region.args:
                    self.set(a, unknown(shape_of(a.type)))
                self.block(region)
            outs = transfer(ins, [self.get(v) for v in ins.operands])
            for r, info in zip(ins.results, outs):
                self.set(r, info)

    def iterate(self, args: list[Value], inits: list[AxisInfo], run_body) -> list[AxisInfo]:
        """Fixed point of loop-carried values: `run_body()` analyses the loop with
        `args` bound and returns the infos flowing back into them."""
        current = list(inits)

        def sweep() -> bool:
            for a, info in zip(args, current):
                self.set(a, info)
            new = [join(c, b) for c, b in zip(current, run_body())]
            changed = new != current
            current[:] = new
            return changed

        def give_up() -> None:  # sound: nothing is claimed of the loop-carried values
            current[:] = [unknown(shape_of(a.type)) for a in args]
            for a, info in zip(args, current):
                self.set(a, info)
            run_body()

        fixed_point(sweep, _MAX_LOOP_ROUNDS, give_up)
        return current

    def for_loop(self, loop: Instr) -> None:
        lb, _, step = (self.get(v) for v in for_bounds(loop))
        body = loop.regions[0]
        # iv = lb + i*step
        iv_div = min(lb.element_divisibility(), step.element_divisibility())
        self.set(body.args[0], make((), (iv_div,), (1,), (1,),
                                    nonnegative=lb.nonnegative and step.nonnegative))

        def run_body() -> list[AxisInfo]:
            self.block(body)
            return [self.get(v) for v in body.terminator.operands]

        inits = [self.get(v) for v in for_inits(loop)]
        final = self.iterate(body.args[1:], inits, run_body)
        for r, info in zip(loop.results, final):
            self.set(r, info)

    def if_(self, ins: Instr) -> None:
        cond = self.get(ins.operands[0]).constant
        yields = []
        for region in ins.regions:
            self.block(region)
            yields.append([self.get(v) for v in region.terminator.operands])
        if cond is not None:
            chosen = yields[0] if cond else yields[1]
        else:
            chosen = [join(a, b) for a, b in zip(*yields)]
        for r, info in zip(ins.results, chosen):
            self.set(r, info)

    def while_loop(self, loop: Instr) -> None:
        before, after = loop.regions

        def run_body() -> list[AxisInfo]:
            self.block(before)
            cond = before.terminator
            for a, v in zip(after.args, cond.operands[1:]):
                self.set(a, self.get(v))
            self.block(after)
            return [self.get(v) for v in after.terminator.operands]

        inits = [self.get(v) for v in loop.operands]
        self.iterate(before.args, inits, run_body)
        for r, v in zip(loop.results, before.terminator.operands[1:]):
            self.set(r, self.get(v))
